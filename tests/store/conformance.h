/* The cross-twin store conformance suite (DESIGN §9): one body, run against every twin.
 *
 * A twin's test program calls conformance_suite() with a factory that opens a fresh, empty
 * store (the default board only) and a matching close; each test opens its own store. The
 * suite injects its own clock (store_clock_set), so leases and expiry are exercised without
 * sleeping. */
#ifndef BOARDD_TESTS_STORE_CONFORMANCE_H
#define BOARDD_TESTS_STORE_CONFORMANCE_H

#include "store/store_twins.h"

#include <check.h>

Suite *conformance_suite(const char *name, struct store *(*open_fresh)(void),
			 void (*close)(struct store *));

/* ---- shared by the conformance_*.c files ---- */

#define CT_T0 1780000000000LL /* 2026-05-28T...Z: the suite's clock starts here */

extern int64_t ct_now; /* the injected clock, ms */

/* Opens a fresh store with the suite clock reset to CT_T0; closes it. */
struct store *ct_open(void);
void ct_close(struct store *st);

extern const struct store_actor ct_bot;
extern const struct store_actor ct_op;

/* Creates a card on the default board (state NULL: first column; blockers NULL-terminated or
 * NULL) and returns it; fails the test on error. Caller frees. */
struct core_card *ct_create(struct store *st, const char *id, const char *state,
			    const char *const *blockers);
/* The stored card; fails the test when missing. Caller frees. */
struct core_card *ct_get(struct store *st, const char *id);
/* State of card id (asserts it exists). */
void ct_assert_state(struct store *st, const char *id, const char *state);
/* Claims id for marker (lease 60 s) and returns the epoch; fails the test on error. */
int64_t ct_claim(struct store *st, const char *id, const char *marker);
/* Creates run `id` (status running, lease 30 s) on card for marker by actor; fails the test
 * on error. */
void ct_run(struct store *st, const char *id, const char *card, const char *marker,
	    const struct store_actor *actor);
/* Events after `after` (up to 1000), copied; caller frees with store_events_free. */
struct core_event *ct_events(struct store *st, int64_t after, size_t *n);
/* The last event's seq (0 when none). */
int64_t ct_last_seq(struct store *st);
/* Asserts e's payload equals the JSON `want` (as JSON: key order does not matter). printf
 * format, so epochs (a counter on one twin, a clock floor on the other) can be spliced in. */
void ct_assert_payload(const struct core_event *e, const char *want, ...)
	__attribute__((format(printf, 2, 3)));
/* A strv over a NULL-terminated list (borrowed strings; free only .v). */
struct core_strv ct_strv(const char *const *v);
/* Sets card id's labels to the NULL-terminated list, as the bot; fails the test on error. */
void ct_set_labels(struct store *st, const char *id, const char *const *labels);
/* Card id's labels are exactly the NULL-terminated list, in that order. */
void ct_assert_labels(struct store *st, const char *id, const char *const *want);
/* SetStateFrom of card id (from: NULL for any; reason: NULL for none) by `actor`; fails the
 * test unless it is done. */
void ct_move(struct store *st, const char *id, const char *from, const char *to,
	     const char *reason, const struct store_actor *actor);

/* Puts subscription `name` on the default board (NULL-terminated lists or NULL; url a closed
 * port, secret given) and returns it; fails the test on error. Caller frees with
 * store_sub_free. */
struct store_sub *ct_sub_put(struct store *st, const char *name, const char *const *types,
			     const char *const *to_states, const char *const *all_labels,
			     const char *const *consume);

void conformance_add_cards(Suite *s);
void conformance_add_workflow(Suite *s);
void conformance_add_claims(Suite *s);
void conformance_add_runs(Suite *s);
void conformance_add_runs_history(Suite *s);
void conformance_add_admin(Suite *s);
void conformance_add_next(Suite *s);

/* Asked inside a test: whether the twin under test serialises concurrent writes to one
 * document (claim-next's race test needs it); false with *why for a server that does not
 * (FerretDB 1.24). NULL: atomic (the FS twin). */
extern bool (*ct_atomic)(const char **why);
void conformance_add_stats(Suite *s);
void conformance_add_effects(Suite *s);
void conformance_add_attention(Suite *s);
void conformance_add_fence(Suite *s);
void conformance_add_events(Suite *s);
void conformance_add_reaper_batch(Suite *s);
void conformance_add_parity(Suite *s);
void conformance_add_policy(Suite *s);

#endif
