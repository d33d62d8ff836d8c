/* Idempotency keys (DESIGN §18): the wrappers every caller uses, the thread binding the FS
 * twin journals a key with, and the stored form of a record both twins keep. The twins' own
 * halves are store/fs/fs_idem.c and store/mongo/mongo_idem.c. */
#include "store/store.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local struct store_idem *idem_bound;

static bool key_valid(const char *s)
{
	size_t n = 0;

	if (!s || !*s)
		return false;
	for (; *s; s++, n++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return n <= STORE_IDEM_KEY_MAX;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

enum core_rc store_idem_begin(struct store *st, struct store_idem *k)
{
	enum core_rc rc;
	long waited = 0, step = 5;

	if (!st || !k || !key_valid(k->key) || !k->fp || !*k->fp)
		return CORE_ERR_BAD_REQUEST;
	if (!st->ops->idem || !st->ops->idem->begin)
		return CORE_ERR_NOT_IMPLEMENTED;
	k->body = k->location = NULL;
	k->attached = false;
	k->st = st;
	k->begun_ms = mono_ms();
	for (;;) {
		rc = st->ops->idem->begin(st, k);
		if (rc != CORE_OK || k->state != STORE_IDEM_PENDING || waited >= STORE_IDEM_WAIT_MS)
			return rc;
		/* Another request holds the key: its answer usually follows within milliseconds
		 * (one write), and then this one answers the same. */
		nap_ms(step);
		waited += step;
		if (step < 50)
			step *= 2;
	}
}

enum core_rc store_idem_end(struct store *st, struct store_idem *k, int status, const char *body,
			    const char *location)
{
	long step = 50;

	if (!st || !k || status < 100 || status > 599 || !body)
		return CORE_ERR_BAD_REQUEST;
	if (!st->ops->idem || !st->ops->idem->end)
		return CORE_ERR_NOT_IMPLEMENTED;
	/* The write was made: its answer must be recorded, or a repeat after the reservation
	 * could be taken over (STORE_IDEM_PENDING_MS) would write again. A database blip (Mongo)
	 * is waited out, until STORE_IDEM_END_MARGIN_MS before that; recording again is safe
	 * (the same answer, guarded on this reservation). */
	for (;;) {
		enum core_rc rc = st->ops->idem->end(st, k, status, body, location);
		int64_t left = k->begun_ms + STORE_IDEM_PENDING_MS - STORE_IDEM_END_MARGIN_MS -
			       mono_ms();

		if (rc != CORE_ERR_STORE_UNAVAILABLE || left <= 0 || !st->ops->idem->end_retries)
			return rc;
		nap_ms(left < step ? (long)left : step);
		if (step < 1000)
			step *= 2;
	}
}

void store_idem_abort(struct store *st, struct store_idem *k)
{
	if (st && k && st->ops->idem && st->ops->idem->abort)
		st->ops->idem->abort(st, k);
}

void store_idem_release(struct store_idem *k)
{
	if (!k)
		return;
	free(k->body);
	free(k->location);
	k->body = k->location = NULL;
}

void store_idem_bind(struct store_idem *k)
{
	k->up = idem_bound;
	idem_bound = k;
}

void store_idem_unbind(struct store_idem *k)
{
	if (idem_bound == k)
		idem_bound = k->up;
	k->up = NULL;
}

struct store_idem *store_idem_bound(void)
{
	return idem_bound;
}

char *store_idem_text(const char *fp, int status, const char *body, const char *location,
		      int64_t at)
{
	json_t *j = json_pack("{s:s, s:i, s:s, s:s, s:I}", "fp", fp, "status", status, "body",
			      body ? body : "", "location", location ? location : "", "at",
			      (json_int_t)at);
	char *text = NULL;
	size_t len;

	if (j)
		text = store_json_text(j, &len);
	json_decref(j);
	return text;
}

enum core_rc store_idem_parse(const char *text, struct store_idem *k)
{
	json_t *j = json_loads(text, 0, NULL);
	const char *fp = NULL, *body = NULL, *loc = NULL;
	json_int_t status = -1, at = 0;
	enum core_rc rc = CORE_ERR_BAD_REQUEST;

	if (!j || json_unpack(j, "{s:s, s:I, s:s, s:s, s:I}", "fp", &fp, "status", &status, "body",
			      &body, "location", &loc, "at", &at) != 0)
		goto out;
	if (strcmp(fp, k->fp) != 0) {
		rc = CORE_ERR_IDEMPOTENCY_KEY_REUSED;
		goto out;
	}
	if (status == 0) {
		k->state = STORE_IDEM_LOST;
		rc = CORE_OK;
		goto out;
	}
	k->body = strdup(body);
	k->location = strdup(loc);
	if (!k->body || !k->location) {
		store_idem_release(k);
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	k->state = STORE_IDEM_DONE;
	k->status = (int)status;
	rc = CORE_OK;
out:
	json_decref(j);
	return rc;
}
