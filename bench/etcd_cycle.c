/* etcd_cycle — the claim cycle of loadgen, expressed on etcd's v3 JSON gateway.
 *
 *   etcd_cycle -p PORT | -U SOCKET [-w 32] [-d 20] [-W 2] [-n CYCLES] [-l 30000] [-r 3]
 *              [-P bench] [-g]
 *
 * Same client, same concurrency, same cycle shape as loadgen; each worker owns one card,
 * i.e. two keys: <prefix>/claim/<card> (the claim) and <prefix>/state/<card> (the column).
 *
 *   claim   txn(create_revision(claim) == 0 -> put claim = marker with the lease);
 *           the epoch is the revision the txn returns (= the claim key's mod_revision).
 *   renew   lease keep-alive (x3).
 *   write   txn(mod_revision(claim) == epoch -> put state = "review"), then the same with
 *           "in_progress". The column lives under its own key so the claim key's mod_revision
 *           stays the epoch for the whole claim, as boardd's claim_epoch does: a fenced write
 *           does not move the fence. (Putting the state into the claim key itself would move
 *           mod_revision on every write and force the owner to carry the new revision as its
 *           next token, which is not what a fence generation is.) A claim that expired or was
 *           deleted and re-created has another mod_revision (or none), so the compare fails
 *           just as boardd's (marker, epoch) check does.
 *   release txn(mod_revision(claim) == epoch -> delete claim).
 *
 * Leases: by default each worker grants one lease before the clock starts and attaches every
 * claim to it, the way etcd's own concurrency.Session does; renew keeps it alive. This is the
 * cheapest faithful form for etcd. With -g every claim grants its own lease first (timed as
 * "lease_grant") and release revokes it ("lease_revoke"), which is closer to boardd's
 * per-claim lease_ms but costs etcd two more round trips and two more raft entries.
 * Note: etcd's keep-alive is answered by the leader without a raft write or an fsync, while
 * boardd's renew is a journaled, fsynced write; the comparison keeps that difference in
 * etcd's favour. */
#include "bench/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	OP_GRANT = BENCH_CYCLE_OPS,
	OP_REVOKE,
	N_OPS,
};

static const char *const op_names[N_OPS] = {
	BENCH_CYCLE_OP_NAMES,
	[OP_GRANT] = "lease_grant",
	[OP_REVOKE] = "lease_revoke",
};

static bool lease_per_claim;

struct etcd_worker {
	char claim_key[256];  /* base64 */
	char state_key[256];  /* base64 */
	char marker[128];     /* base64 */
	int64_t lease;
	int64_t epoch;
};

static int etcd_lease_grant(struct bench_worker *w, struct etcd_worker *ew, bool timed)
{
	char body[64];
	const char *resp;
	int status;

	snprintf(body, sizeof body, "{\"TTL\":%lld}",
		 (long long)(w->opts->lease_ms + 999) / 1000);
	status = timed ? bench_op_request(w, OP_GRANT, "POST", "/v3/lease/grant", NULL, body,
					  &resp)
		       : bench_op_untimed(w, "POST", "/v3/lease/grant", NULL, body, &resp);
	if (status != 200)
		return -1;
	if (!bench_json_int(resp, "ID", &ew->lease)) {
		if (timed)
			bench_op_unexpected(w, OP_GRANT, resp);
		return -1;
	}
	return 0;
}

static int etcd_setup(struct bench_worker *w)
{
	struct etcd_worker *ew = calloc(1, sizeof *ew);
	char raw[160], body[600], val[32]; /* base64 of a column name */
	const char *resp;

	if (!ew)
		return -1;
	w->ctx = ew;
	snprintf(raw, sizeof raw, "%s/claim/%s-%zu", w->opts->prefix, w->opts->prefix, w->idx);
	bench_base64(raw, strlen(raw), ew->claim_key);
	snprintf(raw, sizeof raw, "%s/state/%s-%zu", w->opts->prefix, w->opts->prefix, w->idx);
	bench_base64(raw, strlen(raw), ew->state_key);
	snprintf(raw, sizeof raw, "bench-w%zu", w->idx);
	bench_base64(raw, strlen(raw), ew->marker);
	/* The card: its column, like boardd's POST /v1/cards before the clock starts. */
	bench_base64("in_progress", 11, val);
	snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", ew->state_key, val);
	if (bench_op_untimed(w, "POST", "/v3/kv/put", NULL, body, &resp) != 200) {
		fprintf(stderr, "etcd_cycle: put: %s\n", resp);
		return -1;
	}
	/* A claim key left by an earlier run on the same data dir would make every claim fail. */
	snprintf(body, sizeof body, "{\"key\":\"%s\"}", ew->claim_key);
	if (bench_op_untimed(w, "POST", "/v3/kv/deleterange", NULL, body, &resp) != 200)
		return -1;
	if (!lease_per_claim && etcd_lease_grant(w, ew, false) != 0) {
		fprintf(stderr, "etcd_cycle: lease grant: %s\n", resp);
		return -1;
	}
	return 0;
}

/* txn(mod_revision(claim) == epoch -> op); op is a JSON request_op object. */
static int etcd_fenced_txn(struct bench_worker *w, struct etcd_worker *ew, size_t op,
			   const char *request_op)
{
	char body[800];
	const char *resp;

	snprintf(body, sizeof body,
		 "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":\"EQUAL\","
		 "\"mod_revision\":\"%lld\"}],\"success\":[%s]}",
		 ew->claim_key, (long long)ew->epoch, request_op);
	if (bench_op_request(w, op, "POST", "/v3/kv/txn", NULL, body, &resp) != 200)
		return -1;
	if (!strstr(resp, "\"succeeded\":true")) {
		bench_op_unexpected(w, op, resp);
		return -1;
	}
	return 0;
}

static void etcd_lease_revoke(struct bench_worker *w, struct etcd_worker *ew, bool timed)
{
	char body[64];
	const char *resp;

	snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)ew->lease);
	if (timed)
		bench_op_request(w, OP_REVOKE, "POST", "/v3/lease/revoke", NULL, body, &resp);
	else
		bench_op_untimed(w, "POST", "/v3/lease/revoke", NULL, body, &resp);
}

/* After a failed step: delete the claim if it is still ours. Untimed. */
static void etcd_recover(struct bench_worker *w, struct etcd_worker *ew)
{
	char body[800];
	const char *resp;

	snprintf(body, sizeof body,
		 "{\"compare\":[{\"key\":\"%s\",\"target\":\"MOD\",\"result\":\"EQUAL\","
		 "\"mod_revision\":\"%lld\"}],\"success\":[{\"request_delete_range\":"
		 "{\"key\":\"%s\"}}]}",
		 ew->claim_key, (long long)ew->epoch, ew->claim_key);
	bench_op_untimed(w, "POST", "/v3/kv/txn", NULL, body, &resp);
	if (lease_per_claim)
		etcd_lease_revoke(w, ew, false);
}

static int etcd_cycle(struct bench_worker *w)
{
	struct etcd_worker *ew = w->ctx;
	char body[800], op[400], val[32]; /* base64 of a column name */
	const char *resp;
	int64_t ttl;
	int k;

	if (lease_per_claim && etcd_lease_grant(w, ew, true) != 0)
		return -1;
	snprintf(body, sizeof body,
		 "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
		 "\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"%s\","
		 "\"value\":\"%s\",\"lease\":\"%lld\"}}]}",
		 ew->claim_key, ew->claim_key, ew->marker, (long long)ew->lease);
	if (bench_op_request(w, BENCH_OP_CLAIM, "POST", "/v3/kv/txn", NULL, body, &resp) != 200)
		goto fail_unclaimed;
	if (!strstr(resp, "\"succeeded\":true") || !bench_json_int(resp, "revision", &ew->epoch)) {
		bench_op_unexpected(w, BENCH_OP_CLAIM, resp);
		goto fail_unclaimed;
	}
	snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", (long long)ew->lease);
	for (k = 0; k < (int)w->opts->renews; k++) {
		if (bench_op_request(w, BENCH_OP_RENEW, "POST", "/v3/lease/keepalive", NULL, body,
				     &resp) != 200)
			goto fail;
		/* An expired lease answers TTL 0 (omitted from the JSON). */
		if (!bench_json_int(resp, "TTL", &ttl) || ttl <= 0) {
			bench_op_unexpected(w, BENCH_OP_RENEW, resp);
			goto fail;
		}
	}
	bench_base64("review", 6, val);
	snprintf(op, sizeof op, "{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}",
		 ew->state_key, val);
	if (etcd_fenced_txn(w, ew, BENCH_OP_TO_REVIEW, op) != 0)
		goto fail;
	bench_base64("in_progress", 11, val);
	snprintf(op, sizeof op, "{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\"}}",
		 ew->state_key, val);
	if (etcd_fenced_txn(w, ew, BENCH_OP_TO_PROGRESS, op) != 0)
		goto fail;
	snprintf(op, sizeof op, "{\"request_delete_range\":{\"key\":\"%s\"}}", ew->claim_key);
	if (etcd_fenced_txn(w, ew, BENCH_OP_RELEASE, op) != 0)
		goto fail;
	if (lease_per_claim)
		etcd_lease_revoke(w, ew, true);
	return 0;
fail:
	etcd_recover(w, ew);
	return -1;
fail_unclaimed:
	if (lease_per_claim)
		etcd_lease_revoke(w, ew, false);
	return -1;
}

static void etcd_teardown(struct bench_worker *w)
{
	struct etcd_worker *ew = w->ctx;

	if (!lease_per_claim && ew->lease)
		etcd_lease_revoke(w, ew, false);
	free(ew);
	w->ctx = NULL;
}

static int etcd_opt(int opt, const char *arg, void *ctx)
{
	(void)arg;
	(void)ctx;
	if (opt != 'g')
		return -1;
	lease_per_claim = true;
	return 0;
}

int main(int argc, char **argv)
{
	static struct bench_driver d = {
		.target = "etcd",
		.ops = op_names,
		.n_ops = N_OPS,
		.setup = etcd_setup,
		.cycle = etcd_cycle,
		.teardown = etcd_teardown,
	};
	struct bench_opts o;

	if (bench_opts_parse(&o, argc, argv, "g", etcd_opt, NULL,
			     "usage: etcd_cycle -p PORT | -U SOCKET [options]   (etcd's client port, or\n"
			     "       its client socket: --listen-client-urls unix://NAME:PORT puts it\n"
			     "       at NAME:PORT in etcd's working directory)\n"
			     "  -g          grant a lease per claim and revoke it at release\n"
			     "              (default: one lease per worker, kept alive by renew)\n") !=
	    0)
		return 2;
	d.cycle_desc = lease_per_claim
			       ? "lease grant -> txn claim -> keepalive xN -> fenced txn put state "
				 "x2 -> fenced txn delete -> lease revoke"
			       : "txn claim (session lease) -> keepalive xN -> fenced txn put state "
				 "x2 -> fenced txn delete";
	return bench_run(&d, &o);
}
