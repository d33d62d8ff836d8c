/* GET /v1/attention: the cards that need an operator, each with its reasons (DESIGN §15).
 * The store decides (store_attention_list: core_attention_reasons at the store's now). */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

enum core_rc api_h_attention(struct api_req *r)
{
	const char *board;
	int64_t limit;
	struct store_attention *v = NULL;
	size_t n = 0, i;
	bool truncated = false;
	json_t *list;
	enum core_rc rc;

	if ((rc = api_query(r, "board", &board)) != CORE_OK ||
	    (rc = api_query_int(r, "limit", 1000, 1, 1000, &limit)) != CORE_OK)
		return rc;
	if (board && !core_name_valid(board))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "board must match [A-Za-z0-9._-]{1,64}");
	if (board && (rc = api_auth_board(r, board)) != CORE_OK)
		return rc;
	rc = store_attention_list(r->api->st, board, api_auth_boards(r), (size_t)limit, &v, &n,
				  &truncated);
	if (rc != CORE_OK)
		return rc;
	list = json_array();
	for (i = 0; list && i < n; i++) {
		json_t *reasons = json_array(), *item;
		int k;

		for (k = 0; reasons && k < CORE_ATTN_COUNT_; k++)
			if ((v[i].reasons & (1u << k)) &&
			    json_array_append_new(reasons,
						  json_string(core_attention_reason_name(k))) != 0) {
				json_decref(reasons);
				reasons = NULL;
			}
		item = reasons ? json_pack("{s:o, s:o}", "card", store_card_to_json(v[i].card),
					   "reasons", reasons)
			       : NULL;
		if (!item || json_array_append_new(list, item) != 0) {
			json_decref(list);
			list = NULL;
		}
	}
	store_attention_free(v, n);
	if (!list)
		return CORE_ERR_NOMEM;
	return api_reply(r, 200, json_pack("{s:o, s:b}", "cards", list, "truncated", truncated));
}

void api_attention_collect(struct api *a, struct metrics_sink *s)
{
	struct store_attention *v = NULL;
	double count[CORE_ATTN_COUNT_] = {0};
	size_t n = 0, i;
	bool truncated = false;
	int k;

	/* A store that cannot answer serves no lane (boardd_store_stats_up says why). */
	if (store_attention_list(a->st, NULL, NULL, 1000, &v, &n, &truncated) != CORE_OK)
		return;
	for (i = 0; i < n; i++)
		for (k = 0; k < CORE_ATTN_COUNT_; k++)
			if (v[i].reasons & (1u << k))
				count[k]++;
	store_attention_free(v, n);
	for (k = 0; k < CORE_ATTN_COUNT_; k++) {
		const char *reason = core_attention_reason_name((enum core_attention_reason)k);

		metrics_sink_value(s, METRICS_ATTENTION, &reason, count[k]);
	}
}
