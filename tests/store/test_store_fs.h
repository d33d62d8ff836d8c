/* FS-only store tests, split by theme across two files. */
#ifndef BOARDD_TESTS_STORE_TEST_STORE_FS_H
#define BOARDD_TESTS_STORE_TEST_STORE_FS_H

#include <check.h>
#include <stdint.h>

/* Recovery from damaged directories: torn/corrupt lines, gaps, the legacy sweep. */
TCase *store_fs_crash_tcase(void);
/* The journal's pre-allocated tail: what a crash leaves in it, how recovery ends the log. */
TCase *store_fs_segment_tcase(void);
/* DESIGN §11 on the FS twin: claim-only journal lines, fence state across restarts. */
TCase *store_fs_fence_tcase(void);
/* DESIGN §20 on the FS twin: run output and history across restarts and rollbacks. */
TCase *store_fs_runs_tcase(void);
/* What the open does besides replaying: the directory lock, a crash's leftovers, syncs. */
TCase *store_fs_open_tcase(void);
/* Path of the journal generation the store is writing (caller frees). */
char *fx_journal_path(const char *dir, uint64_t gen);
/* Size of a file, -1 when missing. */
long fx_file_size(const char *path);

#endif
