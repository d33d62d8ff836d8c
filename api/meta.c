/* Routes that need no token: health, readiness, Prometheus metrics, the OpenAPI document. */
#include "api/api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_rc api_h_healthz(struct api_req *r)
{
	return api_reply(r, 200, json_pack("{s:s}", "status", "ok"));
}

enum core_rc api_h_readyz(struct api_req *r)
{
	enum core_rc rc = store_ping(r->api->st);

	if (rc != CORE_OK)
		return api_fail(r, rc, "store %s is not ready: it refuses writes or cannot be reached",
				store_name(r->api->st));
	return api_reply(r, 200, json_pack("{s:s, s:s}", "status", "ready", "store",
					   store_name(r->api->st)));
}

/* Appends to a growing text buffer; false on OOM. */
static bool buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static bool buf_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return false;
		if (*buf && *len + (size_t)n < *cap) {
			*len += (size_t)n;
			return true;
		}
		{
			size_t ncap = (*cap ? *cap * 2 : 4096) + (size_t)n;
			char *nb = realloc(*buf, ncap);

			if (!nb)
				return false;
			*buf = nb;
			*cap = ncap;
		}
	}
}

enum core_rc api_h_metrics(struct api_req *r)
{
	struct api *a = r->api;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	struct store_fs_stats fs;
	unsigned s, polls, conns;
	bool ok;

	pthread_mutex_lock(&a->poll_mu);
	polls = a->polls;
	pthread_mutex_unlock(&a->poll_mu);
	pthread_mutex_lock(&a->conns.mu);
	conns = a->conns.n;
	pthread_mutex_unlock(&a->conns.mu);
	ok = buf_printf(&buf, &len, &cap,
			"# HELP boardd_http_requests_total HTTP requests answered, by status.\n"
			"# TYPE boardd_http_requests_total counter\n");
	for (s = 0; ok && s < API_STATUS_SLOTS; s++) {
		unsigned long c = atomic_load(&a->status_count[s]);

		if (c)
			ok = buf_printf(&buf, &len, &cap,
					"boardd_http_requests_total{status=\"%u\"} %lu\n", s, c);
	}
	ok = ok &&
	     buf_printf(&buf, &len, &cap,
			"# HELP boardd_http_request_duration_seconds_sum Time spent answering.\n"
			"# TYPE boardd_http_request_duration_seconds_sum counter\n"
			"boardd_http_request_duration_seconds_sum %.6f\n"
			"# HELP boardd_http_requests_completed_total Requests completed.\n"
			"# TYPE boardd_http_requests_completed_total counter\n"
			"boardd_http_requests_completed_total %lu\n"
			"# HELP boardd_events_long_polls Long-polls waiting now.\n"
			"# TYPE boardd_events_long_polls gauge\n"
			"boardd_events_long_polls %u\n"
			"# HELP boardd_http_connections_open TCP connections open now.\n"
			"# TYPE boardd_http_connections_open gauge\n"
			"boardd_http_connections_open %u\n"
			"# HELP boardd_http_connections_refused_total Connections closed at accept: "
			"over --max-connections or --max-connections-per-ip.\n"
			"# TYPE boardd_http_connections_refused_total counter\n"
			"boardd_http_connections_refused_total %lu\n"
			"# HELP boardd_http_header_timeouts_total Connections closed because a "
			"request's headers did not arrive whole in time (idle keep-alive included).\n"
			"# TYPE boardd_http_header_timeouts_total counter\n"
			"boardd_http_header_timeouts_total %lu\n"
			"# HELP boardd_http_library_answers_total Requests libmicrohttpd refused itself "
			"(also counted in boardd_http_requests_total).\n"
			"# TYPE boardd_http_library_answers_total counter\n"
			"boardd_http_library_answers_total %lu\n",
			(double)atomic_load(&a->duration_us_total) / 1e6,
			atomic_load(&a->requests_total), polls, conns,
			atomic_load(&a->connections_refused), atomic_load(&a->header_timeouts),
			atomic_load(&a->library_answers));
	if (ok && store_fs_stats_get(a->st, &fs) == CORE_OK)
		ok = buf_printf(&buf, &len, &cap,
				"# HELP boardd_fs_commits_total Journal lines written since open.\n"
				"# TYPE boardd_fs_commits_total counter\n"
				"boardd_fs_commits_total %llu\n"
				"# HELP boardd_fs_syncs_total Journal fdatasync calls since open (one "
				"covers every line written before it: group commit).\n"
				"# TYPE boardd_fs_syncs_total counter\n"
				"boardd_fs_syncs_total %llu\n"
				"# HELP boardd_fs_compactions_total Snapshots written since open.\n"
				"# TYPE boardd_fs_compactions_total counter\n"
				"boardd_fs_compactions_total %llu\n"
				"# HELP boardd_fs_failed 1 while writes are refused after a failed "
				"write or sync.\n"
				"# TYPE boardd_fs_failed gauge\n"
				"boardd_fs_failed %d\n",
				(unsigned long long)fs.commits, (unsigned long long)fs.syncs,
				(unsigned long long)fs.compactions, fs.failed ? 1 : 0);
	if (!ok) {
		free(buf);
		return CORE_ERR_NOMEM;
	}
	r->raw_owned = buf;
	r->raw_len = len;
	r->raw_type = "text/plain; version=0.0.4";
	r->status = 200;
	return CORE_OK;
}

enum core_rc api_h_openapi_json(struct api_req *r)
{
	r->raw_body = api_openapi_json;
	r->raw_len = api_openapi_json_len;
	r->raw_type = "application/json";
	r->status = 200;
	return CORE_OK;
}

enum core_rc api_h_openapi_yaml(struct api_req *r)
{
	r->raw_body = api_openapi_yaml;
	r->raw_len = api_openapi_yaml_len;
	r->raw_type = "application/yaml";
	r->status = 200;
	return CORE_OK;
}
