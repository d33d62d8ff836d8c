/* Internal to the deliverer (deliver.c schedules, deliver_attempt.c attempts). */
#ifndef BOARDD_SERVER_DELIVER_ATTEMPT_H
#define BOARDD_SERVER_DELIVER_ATTEMPT_H

#include "server/deliver.h"

#include <stdint.h>

/* CLOCK_MONOTONIC in microseconds. */
int64_t server_deliver_mono_us(void);

/* One leased delivery (borrowed): attempted unless its subscription is gone or disabled (then
 * dead), and its outcome written fenced by (owner, dl->lease_epoch). A store that cannot be
 * read leaves it to its lease. rnd: the calling thread's erand48 state (the retry jitter). */
void server_deliver_attempt(struct store *st, const struct server_deliver_config *cfg,
			    const char *owner, const struct store_delivery *dl,
			    unsigned short rnd[3]);

#endif
