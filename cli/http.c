/* The one place boardctl's libcurl easy handle is set up (curl's tool_operate.c shape): a
 * handle per thread, kept across requests so a worker reuses its keep-alive connection. */
#include "cli/cli.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct cli_http {
	CURL *curl;
	char *buf; /* the answer's body */
	size_t len, cap;
	char errbuf[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct cli_http *h = ctx;
	size_t more = size * n;

	if (h->len + more + 1 > h->cap) {
		size_t cap = h->cap ? h->cap : 4096;
		char *nb;

		while (cap < h->len + more + 1)
			cap *= 2;
		nb = realloc(h->buf, cap);
		if (!nb)
			return 0; /* curl reports a write error */
		h->buf = nb;
		h->cap = cap;
	}
	memcpy(h->buf + h->len, p, more);
	h->len += more;
	h->buf[h->len] = '\0';
	return more;
}

struct cli_http *cli_http_new(void)
{
	struct cli_http *h = calloc(1, sizeof *h);

	if (!h)
		return NULL;
	h->curl = curl_easy_init();
	if (!h->curl) {
		free(h);
		return NULL;
	}
	return h;
}

void cli_http_free(struct cli_http *h)
{
	if (!h)
		return;
	curl_easy_cleanup(h->curl);
	free(h->buf);
	free(h);
}

static long http_call(struct cli_http *h, const char *method, const char *path, const json_t *body,
		      int64_t if_match, const char *idem, long timeout_ms, json_t **out, char *err,
		      size_t errlen);

long cli_http_call(struct cli_http *h, const char *method, const char *path, const json_t *body,
		   int64_t if_match, long timeout_ms, json_t **out, char *err, size_t errlen)
{
	return http_call(h, method, path, body, if_match, NULL, timeout_ms, out, err, errlen);
}

long cli_http_call_keyed(struct cli_http *h, const char *method, const char *path,
			 const json_t *body, const char *key, long timeout_ms, json_t **out,
			 char *err, size_t errlen)
{
	return http_call(h, method, path, body, -1, key, timeout_ms, out, err, errlen);
}

bool cli_http_new_key(char *buf, size_t len)
{
	unsigned char b[16];
	size_t i;

	if (len < 2 * sizeof b + 1 || getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return false;
	for (i = 0; i < sizeof b; i++)
		snprintf(buf + 2 * i, 3, "%02x", b[i]);
	return true;
}

static long http_call(struct cli_http *h, const char *method, const char *path, const json_t *body,
		      int64_t if_match, const char *idem, long timeout_ms, json_t **out, char *err,
		      size_t errlen)
{
	struct curl_slist *hdrs = NULL;
	char *url = NULL, *text = NULL, line[CLI_ERR_MAX];
	long status = 0;
	CURLcode cc;

	if (out)
		*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	h->len = 0;
	if (h->buf)
		h->buf[0] = '\0';
	if (asprintf(&url, "%s%s", cli_g.url, path) < 0) {
		url = NULL;
		goto oom;
	}
	if (cli_g.token) {
		snprintf(line, sizeof line, "Authorization: Bearer %s", cli_g.token);
		hdrs = curl_slist_append(hdrs, line);
	}
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text)
			goto oom;
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	}
	if (if_match >= 0) {
		snprintf(line, sizeof line, "If-Match: \"%lld\"", (long long)if_match);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (idem) {
		snprintf(line, sizeof line, "Idempotency-Key: %s", idem);
		hdrs = curl_slist_append(hdrs, line);
	}
	curl_easy_reset(h->curl); /* keeps the connection cache: the keep-alive survives */
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	if (cli_g.unix_path) /* the URL's host only names the Host header then */
		curl_easy_setopt(h->curl, CURLOPT_UNIX_SOCKET_PATH, cli_g.unix_path);
	curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h->curl, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "boardctl/0.1");
	if (cli_g.cacert)
		curl_easy_setopt(h->curl, CURLOPT_CAINFO, cli_g.cacert);
	if (text) {
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
	} else if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
	}
	h->errbuf[0] = '\0';
	cc = curl_easy_perform(h->curl);
	if (cc != CURLE_OK) {
		if (err && errlen && cli_g.unix_path) /* libcurl's text names localhost:80 */
			snprintf(err, errlen, "%s %s: over unix:%s: %s", method, path,
				 cli_g.unix_path, curl_easy_strerror(cc));
		else if (err && errlen)
			snprintf(err, errlen, "%s %s: %s", method, path,
				 h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	if (cli_g.verbose)
		cli_warn("%s %s -> %ld", method, path, status);
	if (out && h->len)
		*out = json_loads(h->buf, 0, NULL);
	if (err && errlen && status >= 400) {
		json_t *j = out ? *out : json_loads(h->buf ? h->buf : "", 0, NULL);

		snprintf(err, errlen, "%s %s: %ld %s", method, path, status,
			 j ? cli_http_problem(j) : "");
		if (!out)
			json_decref(j);
	}
	goto out;
oom:
	if (err && errlen)
		snprintf(err, errlen, "%s %s: out of memory", method, path);
out:
	curl_slist_free_all(hdrs);
	free(text);
	free(url);
	return status;
}

const char *cli_http_problem(const json_t *answer)
{
	const char *d = json_string_value(json_object_get(answer, "detail"));
	const char *code = json_string_value(json_object_get(answer, "code"));

	if (d && *d)
		return d;
	return code ? code : "";
}

bool cli_http_escape(const char *s, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		bool plain = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
			     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' ||
			     ch == '~' || ch == ':';

		if (o + (plain ? 1 : 3) >= len)
			return false;
		if (plain) {
			buf[o++] = (char)ch;
		} else {
			buf[o++] = '%';
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
		}
	}
	buf[o] = '\0';
	return true;
}
