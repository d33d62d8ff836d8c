/* GET /metrics: the Prometheus text rendering of metrics/metrics.h's table. The api owns the
 * request-latency histograms; the store adds its samples through store_stats (never a twin's
 * own header); the registry holds the counters others increment (claims, reaper, TLS). */
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_events.h"
#include "api/api_handlers.h"
#include "api/api_req.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Every status this server answers gets its own code label; anything else is "other". */
static const unsigned codes[] = {200, 201, 204, 304, 400, 401, 403, 404, 405, 406, 408,
				 409, 410, 411, 413, 414, 415, 416, 422, 428, 429, 431,
				 500, 501, 503, 505};
#define N_CODES (sizeof codes / sizeof codes[0] + 1)

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define N_METHODS (sizeof methods / sizeof methods[0] + 1) /* + "other" */

static size_t code_slot(unsigned status)
{
	size_t i;

	for (i = 0; i < N_CODES - 1; i++)
		if (codes[i] == status)
			return i;
	return N_CODES - 1;
}

static size_t method_slot(const char *m)
{
	size_t i;

	for (i = 0; m && i < N_METHODS - 1; i++)
		if (methods[i][0] == m[0] && strcmp(methods[i], m) == 0)
			return i;
	return N_METHODS - 1;
}

enum core_rc api_metrics_init(struct api *a)
{
	size_t n;

	api_router_table(&n);
	a->http_routes = n + 1; /* + "unmatched" */
	a->http_series = calloc(a->http_routes * N_METHODS * N_CODES, sizeof(*a->http_series));
	if (!a->http_series)
		return CORE_ERR_NOMEM;
	a->metrics = a->cfg.metrics;
	if (!a->metrics) {
		a->metrics = metrics_new();
		a->metrics_owned = true;
		if (!a->metrics) {
			free(a->http_series);
			a->http_series = NULL;
			return CORE_ERR_NOMEM;
		}
	}
	return CORE_OK;
}

void api_metrics_release(struct api *a)
{
	size_t i;

	for (i = 0; a->http_series && i < a->http_routes * N_METHODS * N_CODES; i++)
		free(atomic_load(&a->http_series[i]));
	free(a->http_series);
	a->http_series = NULL;
	if (a->metrics_owned)
		metrics_free(a->metrics);
	a->metrics = NULL;
}

struct metrics *api_metrics(const struct api *a)
{
	return a ? a->metrics : NULL;
}

void api_metrics_request(struct api *a, const struct api_req *r, uint64_t ns)
{
	size_t n_routes, route;
	const struct api_route *table = api_router_table(&n_routes);
	_Atomic(struct metrics_hist *) *slot;
	struct metrics_hist *h, *expect = NULL;

	route = r->route ? (size_t)(r->route - table) : n_routes;
	slot = &a->http_series[(route * N_METHODS + method_slot(r->method)) * N_CODES +
			       code_slot(r->final_status)];
	h = atomic_load_explicit(slot, memory_order_acquire);
	if (!h) {
		/* First request of this series: publish a zeroed histogram; a racing thread's
		 * wins and ours is dropped. */
		struct metrics_hist *mine = calloc(1, sizeof(*mine));

		if (!mine)
			return; /* out of memory: this observation is lost, not the request */
		if (atomic_compare_exchange_strong(slot, &expect, mine)) {
			h = mine;
		} else {
			free(mine);
			h = expect;
		}
	}
	metrics_hist_observe(h, METRICS_B_HTTP_NS, ns);
}

static void http_collect(const struct api *a, struct metrics_sink *s)
{
	size_t n_routes, route, m, c;
	const struct api_route *table = api_router_table(&n_routes);
	char code[16];

	for (route = 0; route < a->http_routes; route++) {
		for (m = 0; m < N_METHODS; m++) {
			for (c = 0; c < N_CODES; c++) {
				const struct metrics_hist *h = atomic_load(
					&a->http_series[(route * N_METHODS + m) * N_CODES + c]);
				const char *labels[3];

				if (!h)
					continue;
				labels[0] = route < n_routes ? table[route].pattern : "unmatched";
				labels[1] = m < N_METHODS - 1 ? methods[m] : "other";
				if (c < N_CODES - 1)
					snprintf(code, sizeof code, "%u", codes[c]);
				else
					snprintf(code, sizeof code, "other");
				labels[2] = code;
				metrics_sink_hist(s, METRICS_HTTP_DURATION, labels, h);
			}
		}
	}
}

enum core_rc api_h_metrics(struct api_req *r)
{
	struct api *a = r->api;
	struct metrics_sink *s = metrics_sink_new();
	const char *version = a->cfg.version ? a->cfg.version : "unknown";
	char *text = NULL;
	size_t len = 0;
	unsigned polls, conns;
	bool store_up;

	if (!s)
		return CORE_ERR_NOMEM;
	http_collect(a, s);
	pthread_mutex_lock(&a->poll_mu);
	polls = a->polls;
	pthread_mutex_unlock(&a->poll_mu);
	metrics_sink_value(s, METRICS_LONG_POLLS, NULL, polls);
	metrics_sink_value(s, METRICS_EVENT_STREAMS, NULL, api_streams_open(a));
	pthread_mutex_lock(&a->conns.mu);
	conns = a->conns.n;
	pthread_mutex_unlock(&a->conns.mu);
	metrics_sink_value(s, METRICS_HTTP_CONNECTIONS, NULL, conns);
	metrics_sink_value(s, METRICS_HTTP_REFUSED, NULL,
			   (double)atomic_load(&a->connections_refused));
	metrics_sink_value(s, METRICS_HTTP_ANSWER_BYTES, NULL,
			   (double)atomic_load(&a->answer_bytes));
	metrics_sink_value(s, METRICS_HTTP_ANSWERS_REFUSED, NULL,
			   (double)atomic_load(&a->answers_refused));
	metrics_sink_value(s, METRICS_HTTP_HEADER_TIMEOUTS, NULL,
			   (double)atomic_load(&a->header_timeouts));
	metrics_sink_value(s, METRICS_HTTP_LIBRARY_ANSWERS, NULL,
			   (double)atomic_load(&a->library_answers));
	/* A store that cannot answer does not cost the rest of the scrape: it says so. */
	store_up = store_stats(a->st, s) == CORE_OK;
	metrics_sink_value(s, METRICS_STORE_UP, NULL, store_up ? 1 : 0);
	api_attention_collect(a, s);
	api_tls_collect(a, s);
	metrics_sink_value(s, METRICS_BUILD_INFO, &version, 1);
	metrics_process_collect(s);
	if (!metrics_render(a->metrics, s, &text, &len)) {
		metrics_sink_free(s);
		return CORE_ERR_NOMEM;
	}
	metrics_sink_free(s);
	r->raw_owned = text;
	r->raw_len = len;
	r->raw_type = "text/plain; version=0.0.4; charset=utf-8";
	r->status = 200;
	return CORE_OK;
}
