/* FS twin fixtures: fresh temp directories and the conformance factory. */
#ifndef BOARDD_TESTS_STORE_FS_FIXTURE_H
#define BOARDD_TESTS_STORE_FS_FIXTURE_H

#include "store/store_twins.h"

#include <pthread.h>

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

/* A compaction held (STORE_FS_FAULT_HOLD_SNAPSHOT) with its snapshot written, not installed:
 * fx_compact_hold runs store_fs_compact on a thread and returns once it waits there (it has
 * captured the state and switched writers to the next generation); fx_compact_release lifts
 * the hold and returns the compaction's result. */
struct fx_held {
	struct store *st;
	pthread_t thread;
	enum core_rc rc;
};
void fx_compact_hold(struct store *st, struct fx_held *h);
enum core_rc fx_compact_release(struct fx_held *h);

#endif
