/* One webhook delivery attempt (DESIGN §14): sign, POST, judge the answer with
 * core_delivery_judge, write the outcome fenced by the lease. A lease lost meanwhile (expired
 * and taken by another replica, or an operator retry) makes the outcome a clean conflict: the
 * attempt was made, at least once, never recorded twice.
 *
 * HTTP is libcurl, the project's client library already (boardctl): one easy handle per
 * attempt, set up in one place (attempt_post). Only the subscription's URL is requested:
 * redirects are never followed (a 3xx is a failed attempt), only http and https, and the
 * response body is read up to 64 KiB and then cut. Counters and the latency histogram go to
 * the metrics registry (boardd_webhook_*, metrics/metrics.h). Which delivery is attempted
 * when is deliver.c's. */
#include "server/deliver_attempt.h"

#include "metrics/metrics.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RESPONSE_MAX (64 * 1024)
#define RETRY_AFTER_MAX_MS ((int64_t)24 * 3600 * 1000)

/* The outcome counted in boardd_webhook_outcomes_total (metrics/metrics.h's value list). */
enum dlv_outcome {
	DLV_OUT_DONE,
	DLV_OUT_RETRY,
	DLV_OUT_DEAD,
	DLV_OUT_DISABLED,
	DLV_OUT_LOST,
	DLV_OUT_ERROR,
};

static const char *const outcome_names[] = {
	[DLV_OUT_DONE] = "done",	   [DLV_OUT_RETRY] = "retry",
	[DLV_OUT_DEAD] = "dead",	   [DLV_OUT_DISABLED] = "disabled",
	[DLV_OUT_LOST] = "lease_lost", [DLV_OUT_ERROR] = "store_error",
};

/* ---- signing ---- */

char *server_deliver_sign(const char *secret, const char *id, int64_t ts_s, const char *body)
{
	unsigned char key[128], mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	char b64[2 * EVP_MAX_MD_SIZE], *msg, *out;
	const char *k64;
	size_t klen, msg_len;
	int n;

	if (!secret || strncmp(secret, "whsec_", 6) != 0)
		return NULL;
	k64 = secret + 6;
	klen = strlen(k64);
	if (klen == 0 || klen % 4 || klen / 4 * 3 > sizeof key)
		return NULL;
	n = EVP_DecodeBlock(key, (const unsigned char *)k64, (int)klen);
	if (n < 0)
		return NULL;
	n -= (k64[klen - 1] == '=') + (k64[klen - 2] == '=');
	msg_len = strlen(id) + strlen(body) + 32;
	msg = malloc(msg_len);
	if (!msg)
		return NULL;
	snprintf(msg, msg_len, "%s.%" PRId64 ".%s", id, ts_s, body);
	if (!HMAC(EVP_sha256(), key, n, (const unsigned char *)msg, strlen(msg), mac, &mac_len)) {
		free(msg);
		return NULL;
	}
	free(msg);
	EVP_EncodeBlock((unsigned char *)b64, mac, (int)mac_len);
	out = malloc(strlen(b64) + 4);
	if (out)
		sprintf(out, "v1,%s", b64);
	return out;
}

/* ---- one attempt ---- */

struct attempt {
	size_t body_read;
	int64_t retry_after_ms; /* 0: none */
	int64_t now_ms;         /* wall clock, for an HTTP-date Retry-After */
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct attempt *a = ctx;

	(void)p;
	if (a->body_read + size * n > RESPONSE_MAX)
		return 0; /* enough: cut the transfer, the status is known */
	a->body_read += size * n;
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct attempt *a = ctx;
	size_t len = size * n;
	char v[128];
	const char *s;
	size_t vl;

	if (len < 12 || strncasecmp(p, "retry-after:", 12) != 0)
		return len;
	for (s = p + 12; s < p + len && (*s == ' ' || *s == '\t'); s++)
		;
	vl = (size_t)(p + len - s);
	while (vl && (s[vl - 1] == '\r' || s[vl - 1] == '\n' || s[vl - 1] == ' '))
		vl--;
	if (vl == 0 || vl >= sizeof v)
		return len;
	memcpy(v, s, vl);
	v[vl] = '\0';
	if (strspn(v, "0123456789") == vl) {
		long long secs = vl > 9 ? 999999999LL : atoll(v);

		a->retry_after_ms = secs * 1000;
	} else {
		time_t t = curl_getdate(v, NULL);

		if (t > 0 && (int64_t)t * 1000 > a->now_ms)
			a->retry_after_ms = (int64_t)t * 1000 - a->now_ms;
	}
	if (a->retry_after_ms > RETRY_AFTER_MAX_MS)
		a->retry_after_ms = RETRY_AFTER_MAX_MS;
	return len;
}

/* POSTs the delivery; *status is the HTTP status or 0 (no answer: *err says why). */
static void attempt_post(const struct server_deliver_config *cfg, const struct store_delivery *dl,
			 const struct store_sub *sub, int *status, struct attempt *a, char *err,
			 size_t errlen)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = NULL;
	char line[512], ebuf[CURL_ERROR_SIZE] = "";
	int64_t ts = (int64_t)time(NULL);
	char *sig = server_deliver_sign(sub->secret, dl->id, ts, dl->body);
	long code = 0;
	CURLcode rc;

	*status = 0;
	a->now_ms = ts * 1000;
	if (!h || !sig) {
		snprintf(err, errlen, "%s", !sig ? "cannot sign: malformed secret" : "out of memory");
		goto out;
	}
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	snprintf(line, sizeof line, "webhook-id: %s", dl->id);
	hdr = curl_slist_append(hdr, line);
	snprintf(line, sizeof line, "webhook-timestamp: %" PRId64, ts);
	hdr = curl_slist_append(hdr, line);
	snprintf(line, sizeof line, "webhook-signature: %s", sig);
	hdr = curl_slist_append(hdr, line);
	hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip */
	curl_easy_setopt(h, CURLOPT_URL, sub->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->timeout_ms);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, dl->body);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(dl->body));
	curl_easy_setopt(h, CURLOPT_USERAGENT, "boardd-webhooks");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	/* A body cut at 64 KiB still answered: its status stands. */
	if (code >= 100 && code <= 999 && (rc == CURLE_OK || rc == CURLE_WRITE_ERROR)) {
		*status = (int)code;
		if (code < 200 || code > 299)
			snprintf(err, errlen, "HTTP %ld", code);
	} else {
		snprintf(err, errlen, "%s", ebuf[0] ? ebuf : curl_easy_strerror(rc));
	}
out:
	curl_slist_free_all(hdr);
	if (h)
		curl_easy_cleanup(h);
	free(sig);
}

int64_t server_deliver_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void server_deliver_attempt(struct store *st, const struct server_deliver_config *cfg,
			    const char *owner, const struct store_delivery *dl,
			    unsigned short rnd[3])
{
	struct store_delivery_outcome o = {.owner = owner, .epoch = dl->lease_epoch};
	struct store_sub *sub = NULL;
	struct attempt a = {0};
	char err[CURL_ERROR_SIZE + 32] = "";
	enum core_rc rc;
	enum dlv_outcome out;
	int64_t now, sched, t0;

	rc = store_sub_get(st, dl->board, dl->sub, &sub);
	/* A subscription created after the delivery was enqueued is another one under the same
	 * name (the first was deleted): the delivery was the deleted one's, and its event may
	 * be nothing the new one's filter or receiver asked for. */
	if (rc == CORE_OK && sub->created_at > dl->created_at) {
		rc = CORE_ERR_NOT_FOUND;
		store_sub_free(sub);
		sub = NULL;
	}
	if (rc == CORE_ERR_NOT_FOUND || (rc == CORE_OK && !sub->enabled)) {
		o.verdict = CORE_DELIVERY_DEAD;
		o.error = rc == CORE_OK ? "subscription disabled" : "subscription deleted";
	} else if (rc != CORE_OK) {
		return; /* the store is down: the lease expires and someone tries again */
	} else {
		t0 = server_deliver_mono_us();
		attempt_post(cfg, dl, sub, &o.status, &a, err, sizeof err);
		metrics_observe(cfg->metrics, METRICS_WEBHOOK_DURATION, "", NULL,
				(uint64_t)(server_deliver_mono_us() - t0));
		metrics_inc(cfg->metrics, METRICS_WEBHOOK_ATTEMPTS, "");
		now = store_now(st);
		/* The schedule (test-scaled), then Retry-After as the receiver said it. */
		o.verdict = core_delivery_judge(o.status, dl->attempts + 1, now, erand48(rnd), 0,
						&sched);
		if (o.verdict == CORE_DELIVERY_RETRY) {
			o.next_at = now + (int64_t)((double)(sched - now) / cfg->time_scale);
			if (now + a.retry_after_ms > o.next_at)
				o.next_at = now + a.retry_after_ms;
		}
		o.error = err[0] ? err : NULL;
		o.sub = sub; /* a 410 disables this version of it only, the one just asked */
	}
	rc = store_delivery_finish(st, dl->id, &o, NULL);
	if (rc == CORE_ERR_CLAIM_CONFLICT)
		out = DLV_OUT_LOST;
	else if (rc != CORE_OK)
		out = DLV_OUT_ERROR;
	else
		out = o.verdict == CORE_DELIVERY_DONE	   ? DLV_OUT_DONE
		      : o.verdict == CORE_DELIVERY_RETRY   ? DLV_OUT_RETRY
		      : o.verdict == CORE_DELIVERY_DISABLE ? DLV_OUT_DISABLED
							   : DLV_OUT_DEAD;
	metrics_inc(cfg->metrics, METRICS_WEBHOOK_OUTCOMES, outcome_names[out]);
	if (out == DLV_OUT_LOST || out == DLV_OUT_ERROR)
		fprintf(stderr, "boardd: delivery %s: outcome not written (%s)\n", dl->id,
			core_rc_code(rc));
	store_sub_free(sub);
}
