/* The deliverer: a pool of threads that lease due webhook deliveries from the store, POST
 * them with the Standard Webhooks headers and write each outcome fenced by the lease
 * (DESIGN §14). Two replicas on one MongoDB never attempt one delivery at the same time; a
 * replica killed mid-delivery leaves it to another once the lease expires. One receiver
 * cannot delay another (DESIGN §16): deliveries wait in per-subscription queues, one attempt
 * per subscription at a time, and a thread is started whenever all are in attempts, so a
 * hung receiver holds only its own subscription's deliveries (deliver.c says how).
 */
#ifndef BOARDD_SERVER_DELIVER_H
#define BOARDD_SERVER_DELIVER_H

#include "store/store.h"

struct metrics;

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct server_deliver;

struct server_deliver_config {
	unsigned threads;     /* deliverer threads kept (64 more at most start while receivers
			       * hang, and end when idle); 0: none started */
	int64_t lease_ms;     /* a delivery's lease; default 60 000 (> the timeout) */
	int64_t timeout_ms;   /* whole request; default 15 000 */
	int64_t idle_ms;      /* nap when nothing is due; default 250 */
	/* Test only: divides the retry schedule (5 s ... 10 h) by this; Retry-After is honoured
	 * unscaled. Default 1. */
	double time_scale;
	const char *owner;    /* lease owner prefix; NULL: "deliver:<host>:<pid>" */
	struct metrics *metrics; /* borrowed; NULL: nothing counted */
};

/* The Standard Webhooks signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>" keyed by
 * the base64-decoded part of secret after "whsec_". New string (caller frees); NULL when the
 * secret is malformed or on OOM. */
char *server_deliver_sign(const char *secret, const char *id, int64_t ts_s, const char *body);

/* Starts cfg->threads threads over st (borrowed until server_deliver_stop). */
enum core_rc server_deliver_start(struct store *st, const struct server_deliver_config *cfg,
				  struct server_deliver **out);
/* Stops the threads (an attempt in flight finishes or times out) and frees d. */
void server_deliver_stop(struct server_deliver *d);

#endif
