/* FS-only store tests, split by theme across two files. */
#ifndef BOARDD_TESTS_STORE_TEST_STORE_FS_H
#define BOARDD_TESTS_STORE_TEST_STORE_FS_H

#include "store/store.h"
#include "store/store_twins.h"

#include <check.h>
#include <stdbool.h>
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
/* A card id (title id) created in "ready" by a bot; its rc. */
enum core_rc fx_create_rc(struct store *st, const char *id);
/* Does card id exist? */
bool fx_exists(struct store *st, const char *id);
/* The FS twin's counters (asserts the store is one). */
struct store_fs_stats fx_stats(struct store *st);
/* Path of the journal generation the store is writing (caller frees). */
char *fx_journal_path(const char *dir, uint64_t gen);
/* Size of a file, -1 when missing. */
long fx_file_size(const char *path);

#endif
