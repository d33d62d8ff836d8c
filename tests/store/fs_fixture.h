/* FS twin fixtures: fresh temp directories and the conformance factory. */
#ifndef BOARDD_TESTS_STORE_FS_FIXTURE_H
#define BOARDD_TESTS_STORE_FS_FIXTURE_H

#include "store/store.h"

/* A new empty directory under $TMPDIR (or /tmp); caller frees the string. */
char *fx_tmpdir(void);
/* rm -rf dir, then frees it. */
void fx_rmdir(char *dir);
/* Opens the FS twin on dir with the given options (others default); fails the test on error. */
struct store *fx_open(const char *dir, size_t compact_bytes, size_t events_keep,
		      const char *hostname);
/* The conformance factory: a fresh dir per store, removed on close. */
struct store *fx_open_fresh(void);
void fx_close_fresh(struct store *st);

#endif
