/* A store fixture both twins' reaper tests share (tests/reaper/test_reaper.c on FS,
 * tests/store/test_store_mongo_reaper.c on Mongo). */
#ifndef BOARDD_TESTS_STORE_SUB_FIXTURE_H
#define BOARDD_TESTS_STORE_SUB_FIXTURE_H

#include "store/store.h"

/* Subscribes "all" on board default to every subscribable card event type (ADR-096: only the
 * run's own verdicts may fire it in a reaper pass); fails the test on error. */
void fx_subscribe_all(struct store *st);

#endif
