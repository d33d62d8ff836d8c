/* The conformance suite's frame: the factory, the injected clock, and small helpers. */
#include "tests/store/conformance.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ct_now = CT_T0;

static struct store *(*ct_factory)(void);
static void (*ct_closer)(struct store *);

const struct store_actor ct_bot = {.name = "ci-bot"};
const struct store_actor ct_op = {.name = "alice", .operator_role = true};

static int64_t ct_clock(void *ctx)
{
	return *(const int64_t *)ctx;
}

struct store *ct_open(void)
{
	struct store *st = ct_factory();

	ck_assert_ptr_nonnull(st);
	ct_now = CT_T0;
	store_clock_set(st, ct_clock, &ct_now);
	ck_assert_int_eq(store_now(st), CT_T0);
	return st;
}

void ct_close(struct store *st)
{
	ct_closer(st);
}

void ct_assert_payload(const struct core_event *e, const char *want, ...)
{
	char buf[512];
	json_t *a, *b;
	va_list ap;

	va_start(ap, want);
	vsnprintf(buf, sizeof(buf), want, ap);
	va_end(ap);
	a = json_loads(e->payload ? e->payload : "{}", 0, NULL);
	b = json_loads(buf, 0, NULL);
	ck_assert_msg(b != NULL, "bad expected JSON %s", buf);
	ck_assert_msg(json_equal(a, b), "payload %s, want %s", e->payload, buf);
	json_decref(a);
	json_decref(b);
}

struct core_strv ct_strv(const char *const *v)
{
	struct core_strv sv = {0};
	size_t n = 0;

	while (v && v[n])
		n++;
	if (n) {
		sv.v = calloc(n, sizeof(*sv.v));
		ck_assert_ptr_nonnull(sv.v);
		memcpy(sv.v, v, n * sizeof(*sv.v));
	}
	sv.n = n;
	return sv;
}

void ct_set_labels(struct store *st, const char *id, const char *const *labels)
{
	struct core_strv sv = ct_strv(labels);
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_labels_set(st, id, &sv, &ct_bot, &c), CORE_OK);
	core_card_free(c);
	free(sv.v);
}

void ct_assert_labels(struct store *st, const char *id, const char *const *want)
{
	struct core_card *c = ct_get(st, id);
	size_t k;

	for (k = 0; want[k]; k++) {
		ck_assert_msg(k < c->labels.n, "%s: missing label %s", id, want[k]);
		ck_assert_str_eq(c->labels.v[k], want[k]);
	}
	ck_assert_uint_eq(k, c->labels.n);
	core_card_free(c);
}

void ct_move(struct store *st, const char *id, const char *from, const char *to,
	     const char *reason, const struct store_actor *actor)
{
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_set_state_from(st, id, from, to, reason, actor, &c), CORE_OK);
	core_card_free(c);
}

struct core_card *ct_create(struct store *st, const char *id, const char *state,
			    const char *const *blockers)
{
	struct core_strv bl = ct_strv(blockers);
	struct store_card_create in = {.id = id, .title = id, .state = state,
				       .blockers = blockers ? &bl : NULL};
	struct core_card *c = NULL;
	enum core_rc rc = store_card_create(st, &in, &ct_bot, &c);

	free(bl.v);
	ck_assert_msg(rc == CORE_OK, "create %s: %s", id ? id : "(generated)", core_rc_code(rc));
	ck_assert_ptr_nonnull(c);
	return c;
}

struct core_card *ct_get(struct store *st, const char *id)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_get(st, id, &c);

	ck_assert_msg(rc == CORE_OK, "get %s: %s", id, core_rc_code(rc));
	return c;
}

void ct_assert_state(struct store *st, const char *id, const char *state)
{
	struct core_card *c = ct_get(st, id);

	ck_assert_str_eq(c->state, state);
	core_card_free(c);
}

void ct_run(struct store *st, const char *id, const char *card, const char *marker,
	    const struct store_actor *actor)
{
	struct store_run_create in = {.id = id, .card_id = card, .marker = marker,
				      .status = "running", .lease_ms = 30000};
	struct core_run *r = NULL;

	ck_assert_int_eq(store_run_create(st, &in, actor, &r), CORE_OK);
	core_run_free(r);
}

int64_t ct_claim(struct store *st, const char *id, const char *marker)
{
	struct store_claim_result r;
	int64_t epoch;

	ck_assert_int_eq(store_card_claim(st, id, marker, 60000, &ct_bot, &r), CORE_OK);
	epoch = r.token.epoch;
	core_card_free(r.card);
	return epoch;
}

struct core_event *ct_events(struct store *st, int64_t after, size_t *n)
{
	struct core_event *ev = NULL;
	int64_t next;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 1000, 0, &ev, n, &next),
			 CORE_OK);
	return ev;
}

int64_t ct_last_seq(struct store *st)
{
	size_t n;
	struct core_event *ev = ct_events(st, 0, &n);
	int64_t seq = n ? ev[n - 1].seq : 0;

	store_events_free(ev, n);
	return seq;
}

Suite *conformance_suite(const char *name, struct store *(*open_fresh)(void),
			 void (*close)(struct store *))
{
	Suite *s = suite_create(name);

	ct_factory = open_fresh;
	ct_closer = close;
	conformance_add_cards(s);
	conformance_add_workflow(s);
	conformance_add_claims(s);
	conformance_add_runs(s);
	conformance_add_runs_history(s);
	conformance_add_admin(s);
	conformance_add_next(s);
	conformance_add_stats(s);
	conformance_add_effects(s);
	conformance_add_attention(s);
	conformance_add_fence(s);
	conformance_add_events(s);
	conformance_add_reaper_batch(s);
	conformance_add_parity(s);
	conformance_add_policy(s);
	return s;
}
