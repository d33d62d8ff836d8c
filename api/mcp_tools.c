/* The MCP tools (DESIGN §13): one static table — name, capability, the store call it maps
 * onto, description, input and output JSON Schemas, runner — from which tools/list, the
 * tools/call dispatch, `boardd mcp-tools` (the README's tool list) and the tests derive
 * (STYLE rule 15). A runner only translates: it parses arguments with the REST routes' own
 * helpers and calls the store function the REST route calls, so no rule lives here twice. */
#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_idem.h"
#include "api/api_daemon.h"
#include "api/api_mcp.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_STR "{\"type\":\"string\"}"
#define S_STRV "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}"
#define S_ID "{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9._:-]{1,128}$\",\"description\":\"card id\"}"
#define S_NAME(what) "{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9._-]{1,64}$\",\"description\":\"" what "\"}"
#define S_LABELS(what) "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"pattern\":\"^[^\\\\s,]{1,64}$\"},\"maxItems\":128,\"description\":\"" what "\"}"

/* A card as served by GET /v1/cards/{id} (store/codec.c, store/json_text.c). */
#define S_CARD                                                                              \
	"{\"type\":\"object\",\"required\":[\"id\",\"board\",\"title\",\"body\",\"state\","    \
	"\"labels\",\"blockers\",\"claim\",\"claim_epoch\"],\"properties\":{"                   \
	"\"id\":" S_STR ",\"board\":" S_STR ",\"title\":" S_STR ",\"body\":" S_STR              \
	",\"state\":" S_STR ",\"labels\":" S_STRV ",\"blockers\":" S_STRV                       \
	",\"comments\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}"                    \
	",\"claim\":{\"type\":[\"object\",\"null\"]}"                                           \
	",\"claim_epoch\":{\"type\":[\"integer\",\"null\"]}"                                    \
	",\"last_run_id\":{\"type\":[\"string\",\"null\"]}"                                     \
	",\"awaiting_input\":{\"type\":\"boolean\"}"                                            \
	",\"gave_up\":{\"type\":[\"object\",\"null\"]}"                                         \
	",\"state_reason\":{\"type\":[\"string\",\"null\"]}"                                    \
	",\"created_at\":" S_STR ",\"updated_at\":" S_STR ",\"state_at\":" S_STR              \
	",\"not_before\":{\"type\":[\"string\",\"null\"]},\"attempts\":{\"type\":\"integer\"}}}"

#define S_IN(props, req)                                                                    \
	"{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req "],"                \
	"\"additionalProperties\":false}"

static enum core_rc run_list_cards(struct api_req *r, json_t **out);
static enum core_rc run_get_card(struct api_req *r, json_t **out);
static enum core_rc run_create_card(struct api_req *r, json_t **out);
static enum core_rc run_move_card(struct api_req *r, json_t **out);
static enum core_rc run_close_card(struct api_req *r, json_t **out);
static enum core_rc run_set_labels(struct api_req *r, json_t **out);
static enum core_rc run_adjust_labels(struct api_req *r, json_t **out);
static enum core_rc run_add_comment(struct api_req *r, json_t **out);

struct mcp_tool {
	const char *name;
	unsigned cap;           /* enum api_cap */
	const char *store_call; /* what it maps onto (docs) */
	const char *description;
	const char *input_schema;  /* JSON text */
	const char *output_schema; /* JSON text */
	enum core_rc (*run)(struct api_req *r, json_t **out); /* OUT: structuredContent */
};

static const struct mcp_tool tools[] = {
	{"list_cards", API_CAP_READ, "store_card_list (GET /v1/cards)",
	 "List cards, oldest first, filtered by board, column (state) and label; only boards the "
	 "token may see. A page ends with `next`: pass it as `after` for the next page.",
	 S_IN("\"board\":" S_NAME("board name (default: every board the token sees)")
	      ",\"state\":" S_NAME("column name") ",\"label\":{\"type\":\"string\"}"
	      ",\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000,\"default\":100}"
	      ",\"after\":{\"type\":\"string\",\"maxLength\":512,\"description\":\"the next of "
	      "the previous page\"}",
	      ""),
	 "{\"type\":\"object\",\"required\":[\"cards\",\"next\"],\"properties\":{\"cards\":{"
	 "\"type\":\"array\",\"items\":" S_CARD "},\"next\":{\"type\":[\"string\",\"null\"]}}}",
	 run_list_cards},
	{"get_card", API_CAP_READ, "store_card_get (GET /v1/cards/{id})", "Read one card.",
	 S_IN("\"id\":" S_ID, "\"id\""), S_CARD, run_get_card},
	{"create_card", API_CAP_CREATE, "store_card_create (POST /v1/cards)",
	 "Create a card. Without a state it goes to the board's first column; with blockers not "
	 "all done it waits in the board's waiting column. With not_before, workers cannot claim "
	 "it before that time.",
	 S_IN("\"title\":{\"type\":\"string\",\"maxLength\":65536},\"body\":{\"type\":\"string\","
	      "\"maxLength\":65536},\"board\":" S_NAME("board name (default: default)")
	      ",\"state\":" S_NAME("column name") ",\"labels\":" S_LABELS("labels")
	      ",\"blockers\":{\"type\":\"array\",\"items\":" S_ID ",\"maxItems\":256}"
	      ",\"priority\":{\"type\":\"integer\",\"minimum\":-2147483648,\"maximum\":2147483647,"
	      "\"description\":\"claim-next order: higher first (default 0)\"}"
	      ",\"not_before\":{\"type\":[\"string\",\"null\"],\"format\":\"date-time\","
	      "\"description\":\"RFC 3339: no worker claims the card before this time\"}"
	      ",\"idempotency_key\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":255,"
	      "\"description\":\"a repeat of this call within 24 h (same key, same arguments) "
	      "answers the card the first created, creating nothing (DESIGN §18)\"}",
	      "\"title\""),
	 S_CARD, run_create_card},
	{"move_card", API_CAP_MOVE, "store_card_set_state_from (PATCH /v1/cards/{id}/state)",
	 "Move a card from one column to another, compare-and-swap on the source column: `from` "
	 "when given, else the column this call reads. Moving into a terminal column also needs "
	 "board.close. Leaving a terminal column, or moving from one into another, is refused "
	 "(terminal_state_exit): only an operator reopens or refiles.",
	 S_IN("\"id\":" S_ID ",\"to\":" S_NAME("target column") ",\"from\":" S_NAME(
		      "expected source column"),
	      "\"id\",\"to\""),
	 S_CARD, run_move_card},
	{"close_card", API_CAP_CLOSE, "store_card_set_state_from (PATCH /v1/cards/{id}/state)",
	 "Close a card: move it into a terminal column (default: the board's completed column), "
	 "compare-and-swap on the column this call reads. A card in another terminal column is "
	 "refused (terminal_state_exit): refiling is an operator's.",
	 S_IN("\"id\":" S_ID ",\"to\":" S_NAME("terminal column (default: the completed one)"),
	      "\"id\""),
	 S_CARD, run_close_card},
	{"set_labels", API_CAP_LABEL, "store_card_labels_set (PUT /v1/cards/{id}/labels)",
	 "Replace a card's labels with exactly this list (absolute: it can re-arm a one-shot "
	 "label another writer consumed; prefer adjust_labels).",
	 S_IN("\"id\":" S_ID ",\"labels\":" S_LABELS("the new label set"), "\"id\",\"labels\""),
	 S_CARD, run_set_labels},
	{"adjust_labels", API_CAP_LABEL, "store_card_labels_adjust (PATCH /v1/cards/{id}/labels)",
	 "Add and/or remove labels in one atomic step.",
	 S_IN("\"id\":" S_ID ",\"add\":" S_LABELS("labels to add") ",\"remove\":" S_LABELS(
		      "labels to remove"),
	      "\"id\""),
	 S_CARD, run_adjust_labels},
	{"add_comment", API_CAP_COMMENT, "store_card_comment_add (POST /v1/cards/{id}/comments)",
	 "Add a comment to a card.",
	 S_IN("\"id\":" S_ID ",\"body\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":65536}",
	      "\"id\",\"body\""),
	 S_CARD, run_add_comment},
};

#define N_TOOLS (sizeof tools / sizeof tools[0])

/* ---- runners: the REST routes' helpers and store calls ---- */

static enum core_rc card_json(struct core_card *c, json_t **out)
{
	*out = store_card_to_json(c);
	core_card_free(c);
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}

static enum core_rc run_list_cards(struct api_req *r, json_t **out)
{
	struct store_card_filter f = {0};
	struct core_card **cards = NULL;
	json_t *list = NULL;
	char *next = NULL;
	size_t n = 0, i;
	int64_t limit = 100;
	bool has_limit = false;
	enum core_rc rc;

	if ((rc = api_json_name(r, "board", false, &f.board)) != CORE_OK ||
	    (rc = api_json_name(r, "state", false, &f.state)) != CORE_OK ||
	    (rc = api_json_str(r, "label", false, 64, &f.label)) != CORE_OK ||
	    (rc = api_json_int(r, "limit", false, &limit, &has_limit)) != CORE_OK ||
	    (rc = api_json_str(r, "after", false, 512, &f.after)) != CORE_OK)
		return rc;
	if ((rc = api_list_after_check(r, f.after)) != CORE_OK)
		return rc;
	if (f.label && !core_label_valid(f.label))
		return api_fail(r, CORE_ERR_BAD_REQUEST, "label is not a valid label");
	if (limit < 1 || limit > 1000)
		return api_fail(r, CORE_ERR_BAD_REQUEST, "limit must be in [1, 1000]");
	if (f.board && (rc = api_auth_board(r, f.board)) != CORE_OK)
		return rc;
	f.boards = api_auth_boards(r);
	f.claimed = -1;
	f.limit = (size_t)limit;
	rc = api_card_page(r, &f, &cards, &n, &next);
	if (rc != CORE_OK)
		return rc;
	list = json_array();
	for (i = 0; list && i < n; i++)
		if (json_array_append_new(list, store_card_to_json(cards[i])) != 0) {
			json_decref(list);
			list = NULL;
		}
	*out = list ? json_pack("{s:o, s:s?}", "cards", list, "next", next) : NULL;
	if (*out && !next)
		json_object_set_new(*out, "next", json_null());
	store_cards_free(cards, n);
	free(next);
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}

static enum core_rc run_get_card(struct api_req *r, json_t **out)
{
	struct core_card *c = NULL;
	const char *id;
	enum core_rc rc = api_json_id(r, "id", true, &id);

	if (rc == CORE_OK)
		rc = api_card_load(r, id, &c);
	return rc == CORE_OK ? card_json(c, out) : rc;
}

static enum core_rc run_create_card(struct api_req *r, json_t **out)
{
	struct core_card *c = NULL;
	enum core_rc rc;

	if (json_object_get(r->json, "idempotency_key"))
		return api_mcp_create_keyed(r, out); /* DESIGN §18: idem.c */
	rc = api_card_create(r, true, &c); /* the same fields as POST /v1/cards */
	return rc == CORE_OK ? card_json(c, out) : rc;
}

/* SetStateFrom on card `id` into `to`, from `from` or (NULL) the column read now; the cap a
 * move into `to` needs is checked first (board.close into a terminal column). */
static enum core_rc state_write(struct api_req *r, const char *id, const char *from,
				const char *to, struct core_card *cur, json_t **out)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	enum core_rc rc = api_auth_cap(r, api_auth_state_cap(r, cur->board, to));

	if (rc != CORE_OK)
		return rc;
	/* No fallback: a refusal (terminal_state_exit, state_conflict) is the answer. */
	rc = store_card_set_state_from(r->api->st, id, from ? from : cur->state, to, NULL, &actor,
				       &c);
	if (core_rc_is_transition_rejected(rc))
		return api_column_detail(r, rc, cur->board, to);
	return rc == CORE_OK ? card_json(c, out) : rc;
}

static enum core_rc run_move_card(struct api_req *r, json_t **out)
{
	struct core_card *cur = NULL;
	const char *id, *to, *from;
	enum core_rc rc;

	if ((rc = api_json_id(r, "id", true, &id)) != CORE_OK ||
	    (rc = api_json_name(r, "to", true, &to)) != CORE_OK ||
	    (rc = api_json_name(r, "from", false, &from)) != CORE_OK ||
	    (rc = api_card_load(r, id, &cur)) != CORE_OK)
		return rc;
	rc = state_write(r, id, from, to, cur, out);
	core_card_free(cur);
	return rc;
}

static enum core_rc run_close_card(struct api_req *r, json_t **out)
{
	struct core_board b = {0};
	struct core_card *cur = NULL;
	const char *id, *to;
	char *dflt = NULL;
	enum core_rc rc;

	if ((rc = api_json_id(r, "id", true, &id)) != CORE_OK ||
	    (rc = api_json_name(r, "to", false, &to)) != CORE_OK ||
	    (rc = api_card_load(r, id, &cur)) != CORE_OK)
		return rc;
	rc = store_board_get(r->api->st, cur->board, &b);
	if (rc != CORE_OK)
		goto out;
	if (!to) {
		dflt = b.completed ? strdup(b.completed) : NULL;
		if (!dflt) {
			rc = b.completed ? CORE_ERR_NOMEM
					 : api_fail(r, CORE_ERR_TRANSITION_REJECTED,
						    "board %s has no completed column", b.name);
			goto out;
		}
		to = dflt;
	} else if (!core_board_is_terminal(&b, to)) {
		rc = api_fail(r, CORE_ERR_TRANSITION_REJECTED,
			      "close_card moves into a terminal column; %s is not one of board %s",
			      to, b.name);
		goto out;
	}
	rc = state_write(r, id, NULL, to, cur, out);
out:
	free(dflt);
	core_board_release(&b);
	core_card_free(cur);
	return rc;
}

static enum core_rc run_set_labels(struct api_req *r, json_t **out)
{
	struct core_strv labels = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	const char *id;
	enum core_rc rc;

	if ((rc = api_json_id(r, "id", true, &id)) != CORE_OK ||
	    (rc = api_json_labels(r, &labels)) != CORE_OK ||
	    (rc = api_card_scope_id(r, id)) != CORE_OK)
		goto out;
	rc = store_card_labels_set(r->api->st, id, &labels, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		rc = api_card_too_large_detail(r, id);
	rc = api_labels_detail(r, rc);
	if (rc == CORE_OK)
		rc = card_json(c, out);
out:
	core_strv_release(&labels);
	return rc;
}

static enum core_rc run_adjust_labels(struct api_req *r, json_t **out)
{
	struct core_strv add = {0}, remove = {0};
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	const char *id;
	enum core_rc rc;

	if ((rc = api_json_id(r, "id", true, &id)) != CORE_OK ||
	    (rc = api_json_labels_delta(r, &add, &remove)) != CORE_OK ||
	    (rc = api_card_scope_id(r, id)) != CORE_OK)
		goto out;
	rc = store_card_labels_adjust(r->api->st, id, &add, &remove, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		rc = api_card_too_large_detail(r, id);
	rc = api_labels_detail(r, rc);
	if (rc == CORE_OK)
		rc = card_json(c, out);
out:
	core_strv_release(&add);
	core_strv_release(&remove);
	return rc;
}

static enum core_rc run_add_comment(struct api_req *r, json_t **out)
{
	struct store_actor actor = api_auth_actor(r);
	struct core_card *c = NULL;
	const char *id, *body;
	enum core_rc rc;

	if ((rc = api_json_id(r, "id", true, &id)) != CORE_OK ||
	    (rc = api_json_comment(r, &body)) != CORE_OK ||
	    (rc = api_card_scope_id(r, id)) != CORE_OK)
		return rc;
	rc = store_card_comment_add(r->api->st, id, body, &actor, &c);
	if (rc == CORE_ERR_PAYLOAD_TOO_LARGE)
		return api_card_too_large_detail(r, id);
	return rc == CORE_OK ? card_json(c, out) : rc;
}

/* ---- renderings of the table ---- */

static json_t *tool_json(const struct mcp_tool *t)
{
	json_t *in = json_loads(t->input_schema, 0, NULL);
	json_t *outs = json_loads(t->output_schema, 0, NULL);

	if (!in || !outs) {
		json_decref(in);
		json_decref(outs);
		return NULL;
	}
	return json_pack("{s:s, s:s, s:o, s:o, s:{s:b, s:b}, s:{s:s}}", "name", t->name,
			 "description", t->description, "inputSchema", in, "outputSchema", outs,
			 "annotations", "readOnlyHint", t->cap == API_CAP_READ, "openWorldHint", 0,
			 "_meta", "boardd/capability", api_cap_name(t->cap));
}

json_t *api_mcp_tools_json(unsigned caps)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && i < N_TOOLS; i++)
		if ((caps & tools[i].cap) && json_array_append_new(a, tool_json(&tools[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

char *api_mcp_tools_render(bool markdown)
{
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f;

	if (!markdown) {
		json_t *a = api_mcp_tools_json(API_CAP_ALL);
		char *s = a ? json_dumps(a, JSON_INDENT(2)) : NULL;

		json_decref(a);
		return s;
	}
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fprintf(f, "| tool | capability | maps onto | arguments |\n|---|---|---|---|\n");
	for (i = 0; i < N_TOOLS; i++) {
		json_t *in = json_loads(tools[i].input_schema, 0, NULL);
		json_t *props = json_object_get(in, "properties"), *req = json_object_get(in, "required");
		const char *key, *sep = "";
		json_t *v;

		fprintf(f, "| `%s` | `%s` | `%s` | ", tools[i].name, api_cap_name(tools[i].cap),
			tools[i].store_call);
		json_object_foreach(props, key, v) {
			bool required = false;
			size_t k;
			json_t *rv;

			json_array_foreach(req, k, rv)
				if (strcmp(json_string_value(rv), key) == 0)
					required = true;
			fprintf(f, "%s`%s%s`", sep, key, required ? "" : "?");
			sep = ", ";
		}
		fprintf(f, " |\n");
		json_decref(in);
	}
	fprintf(f, "\nEach tool's full `inputSchema` and `outputSchema`: `boardd mcp-tools`.\n");
	fclose(f);
	return buf;
}

/* ---- tools/call ---- */

static const struct mcp_tool *tool_find(const char *name)
{
	size_t i;

	for (i = 0; name && i < N_TOOLS; i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

/* {code, status, detail}: the §8 problem of a refusal, detail as the REST route gives it. */
static json_t *refusal_json(struct api_req *r, enum core_rc rc)
{
	return json_pack("{s:s, s:i, s:s}", "code", core_rc_code(rc), "status",
			 (int)api_rc_status(rc), "detail",
			 r->detail[0] ? r->detail : api_rc_detail(rc));
}

/* The CallToolResult: structuredContent plus its text rendering. */
static json_t *call_result(json_t *structured, bool is_error)
{
	char *text = structured ? json_dumps(structured, JSON_COMPACT) : NULL;
	json_t *res = text ? json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text",
				       "text", text, "structuredContent", structured, "isError",
				       is_error)
			   : NULL;

	if (!text)
		json_decref(structured);
	free(text);
	return res;
}

/* Does a property's JSON Schema "type" ("string", or ["string","null"]) take null? */
static bool type_allows_null(const json_t *type)
{
	size_t i;
	json_t *x;

	if (json_is_string(type))
		return strcmp(json_string_value(type), "null") == 0;
	json_array_foreach(type, i, x)
		if (json_is_string(x) && strcmp(json_string_value(x), "null") == 0)
			return true;
	return false;
}

enum core_rc api_mcp_tool_call(struct api_req *r, const char *name, json_t *args,
			       json_t **result)
{
	const struct mcp_tool *t = tool_find(name);
	json_t *schema = NULL, *structured = NULL, *saved = r->json;
	const char *key;
	json_t *v;
	enum core_rc rc;

	*result = NULL;
	if (!t)
		return api_fail(r, CORE_ERR_NOT_FOUND, "unknown tool: %s", name ? name : "");
	if (!(r->tok->caps & t->cap))
		return api_fail(r, CORE_ERR_FORBIDDEN,
				"tool %s needs the capability %s, which token %s does not hold",
				t->name, api_cap_name(t->cap), r->tok->name);
	r->detail[0] = '\0';
	schema = json_loads(t->input_schema, 0, NULL);
	if (!schema)
		return CORE_ERR_NOMEM;
	/* The REST helpers read r->json: the arguments take the body's place for the call. */
	r->json = args;
	rc = CORE_OK;
	json_object_foreach(args, key, v) {
		const json_t *prop = json_object_get(json_object_get(schema, "properties"), key);

		if (!prop) {
			rc = api_fail(r, CORE_ERR_BAD_REQUEST, "unknown argument \"%s\" for %s",
				      key, t->name);
			break;
		}
		/* null only where the schema's type lists it (not_before), as REST's "may not
		 * be null": the helpers below read null as absent, and a move_card with
		 * from: null would then be a move without the compare it asked for. */
		if (json_is_null(v) && !type_allows_null(json_object_get(prop, "type"))) {
			rc = api_fail(r, CORE_ERR_BAD_REQUEST, "argument \"%s\" of %s may not be null",
				      key, t->name);
			break;
		}
	}
	json_decref(schema);
	if (rc == CORE_OK)
		rc = t->run(r, &structured);
	r->json = saved;
	/* A server failure is no tool's refusal: mcp.c answers it as a JSON-RPC error. */
	if (rc == CORE_ERR_NOMEM || rc == CORE_ERR_STORE_UNAVAILABLE || rc == CORE_ERR_INTERNAL)
		return rc;
	*result = rc == CORE_OK ? call_result(structured, false)
				: call_result(refusal_json(r, rc), true);
	return *result ? CORE_OK : CORE_ERR_NOMEM;
}
