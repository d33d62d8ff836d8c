/* POST /mcp (DESIGN §13): the Model Context Protocol's Streamable HTTP transport, one JSON
 * answer per POST, no session and no server-to-client stream (GET /mcp: 405).
 *
 * Two eras share the endpoint, told apart per request:
 * - handshake (2025-06-18, 2025-11-25): `initialize` negotiates the version (the client's when
 *   we speak it, else our newest handshake version), `notifications/initialized` is accepted,
 *   then `ping`, `tools/list`, `tools/call`. Being stateless, every request is served on its
 *   own; an MCP-Protocol-Version header that names no version we speak is refused (400).
 * - 2026-07-28 (the MCP Python SDK 2.3's default): no handshake, no session. A request is
 *   modern when its MCP-Protocol-Version header names a non-handshake version or its
 *   params._meta carries io.modelcontextprotocol/protocolVersion. It must carry that version
 *   and the client's capabilities in _meta, with MCP-Protocol-Version, Mcp-Method (and for
 *   tools/call Mcp-Name) headers that agree with the body (-32020 otherwise); a version we do
 *   not speak is -32022 naming the ones we do. `server/discover` advertises them; results
 *   carry resultType, and the cacheable ones ttlMs/cacheScope. ping and initialize are gone
 *   in this revision (-32601).
 * JSON-RPC batches were removed in 2025-06-18, the oldest version served: a batch is -32600.
 * Errors of the envelope answer 400 (404 for an unknown method in the 2026 era); tool
 * refusals are tool results with isError (mcp_tools.c). */
#include "api/api_answer.h"
#include "api/api_handlers.h"
#include "api/api_mcp.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603
#define RPC_HEADER_MISMATCH -32020
#define RPC_UNSUPPORTED_VERSION -32022

#define MODERN_VERSION "2026-07-28"
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

static const char *const handshake_versions[] = {"2025-06-18", "2025-11-25", NULL};
static const char *const all_versions[] = {"2025-06-18", "2025-11-25", MODERN_VERSION, NULL};

static bool version_in(const char *v, const char *const *set)
{
	size_t i;

	for (i = 0; v && set[i]; i++)
		if (strcmp(v, set[i]) == 0)
			return true;
	return false;
}

static json_t *strings_json(const char *const *v)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static const char *header(struct api_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* ---- answers ---- */

/* The HTTP status of a JSON-RPC error: the envelope's faults are 400, an unknown method 404
 * in the 2026 era (the table its SDKs share), anything else rides a 200. */
static unsigned error_status(int code, bool modern)
{
	switch (code) {
	case RPC_PARSE_ERROR:
	case RPC_INVALID_REQUEST:
	case RPC_HEADER_MISMATCH:
	case RPC_UNSUPPORTED_VERSION:
		return 400;
	case RPC_INVALID_PARAMS:
		return modern ? 400 : 200;
	case RPC_METHOD_NOT_FOUND:
		return modern ? 404 : 200;
	default:
		return 200;
	}
}

static enum core_rc rpc_error(struct api_req *r, const json_t *id, int code, bool modern,
			      json_t *data, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Answers a JSON-RPC error for request `id` (NULL: null); data is stolen (may be NULL). */
static enum core_rc rpc_error(struct api_req *r, const json_t *id, int code, bool modern,
			      json_t *data, const char *fmt, ...)
{
	char msg[API_DETAIL_MAX];
	json_t *err;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	api_text_utf8(msg); /* it may quote a header, cut anywhere */
	err = json_pack("{s:i, s:s}", "code", code, "message", msg);
	if (err && data)
		json_object_set(err, "data", data);
	json_decref(data);
	if (!err)
		return CORE_ERR_NOMEM;
	return api_reply(r, error_status(code, modern),
			 json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id, "error", err));
}

static json_t *server_info(void)
{
	return json_pack("{s:s, s:s}", "name", "boardd", "version", "0.1.0");
}

/* A 2026-era result: resultType, the server's info in _meta, and cache hints when asked. */
static json_t *modern_shape(json_t *result, bool cacheable)
{
	if (!result)
		return NULL;
	json_object_set_new(result, "resultType", json_string("complete"));
	json_object_set_new(result, "_meta", json_pack("{s:o}", META_SERVER_INFO, server_info()));
	if (cacheable) {
		json_object_set_new(result, "ttlMs", json_integer(0));
		json_object_set_new(result, "cacheScope", json_string("private"));
	}
	return result;
}

/* The data of -32022: the versions we speak and the one asked (a header: any bytes). */
static json_t *unsupported(const char *const *supported, const char *asked)
{
	char req[72];

	snprintf(req, sizeof req, "%s", asked);
	api_text_utf8(req);
	return json_pack("{s:o, s:s}", "supported", strings_json(supported), "requested", req);
}

static enum core_rc rpc_result(struct api_req *r, const json_t *id, json_t *result)
{
	if (!result)
		return CORE_ERR_NOMEM;
	return api_reply(r, 200, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
					   "result", result));
}

json_t *api_mcp_early_error(enum core_rc rc, const char *detail)
{
	unsigned status = api_rc_status(rc);

	return json_pack("{s:s, s:n, s:{s:i, s:s, s:{s:s, s:i, s:s}}}", "jsonrpc", "2.0", "id",
			 "error", "code", status >= 500 ? RPC_INTERNAL_ERROR : RPC_INVALID_REQUEST,
			 "message", api_rc_title(rc), "data", "code", core_rc_code(rc), "status",
			 (int)status, "detail", detail ? detail : "");
}

/* ---- methods ---- */

static const char instructions[] =
	"boardd: a board of cards in columns. Read with list_cards/get_card; move cards with "
	"move_card (a compare-and-swap on the source column), close them with close_card, label "
	"them with adjust_labels. A refused call returns isError with a problem code "
	"(state_conflict, terminal_state_exit, ...): read it rather than retry blindly; terminal "
	"columns are only left by an operator's reopen.";

static json_t *capabilities(void)
{
	return json_pack("{s:{s:b}}", "tools", "listChanged", 0);
}

static enum core_rc m_initialize(struct api_req *r, const json_t *id, const json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

	if (!json_is_object(params) || !asked)
		return rpc_error(r, id, RPC_INVALID_PARAMS, false, NULL,
				 "initialize needs params.protocolVersion (a string)");
	/* The client's version when we speak it, else our newest handshake one (it decides). */
	return rpc_result(r, id,
			  json_pack("{s:s, s:o, s:o, s:s}", "protocolVersion",
				    version_in(asked, handshake_versions) ? asked : "2025-11-25",
				    "capabilities", capabilities(), "serverInfo", server_info(),
				    "instructions", instructions));
}

static enum core_rc m_discover(struct api_req *r, const json_t *id)
{
	return rpc_result(r, id,
			  modern_shape(json_pack("{s:o, s:o, s:s}", "supportedVersions",
						 strings_json(all_versions), "capabilities",
						 capabilities(), "instructions", instructions),
				       true));
}

static enum core_rc m_tools_list(struct api_req *r, const json_t *id, bool modern)
{
	json_t *list = api_mcp_tools_json(r->tok->caps);
	json_t *res = list ? json_pack("{s:o}", "tools", list) : NULL;

	return rpc_result(r, id, modern ? modern_shape(res, true) : res);
}

static enum core_rc m_tools_call(struct api_req *r, const json_t *id, const json_t *params,
				 bool modern)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments"), *res = NULL, *empty = NULL;
	enum core_rc rc;

	if (!name)
		return rpc_error(r, id, RPC_INVALID_PARAMS, modern, NULL,
				 "tools/call needs params.name (a string)");
	if (args && !json_is_object(args))
		return rpc_error(r, id, RPC_INVALID_PARAMS, modern, NULL,
				 "params.arguments must be an object");
	if (!args && !(args = empty = json_object()))
		return CORE_ERR_NOMEM;
	rc = api_mcp_tool_call(r, name, args, &res);
	json_decref(empty);
	if (rc == CORE_ERR_NOT_FOUND || rc == CORE_ERR_FORBIDDEN)
		return rpc_error(r, id, RPC_INVALID_PARAMS, modern,
				 json_pack("{s:s, s:s}", "tool", name, "code", core_rc_code(rc)),
				 "%s", r->detail);
	if (rc != CORE_OK)
		return rc; /* a server failure (503, 500): errors.c answers it as a JSON-RPC error */
	return rpc_result(r, id, modern ? modern_shape(res, false) : res);
}

/* The 2026-era checks of a request's envelope, in the specification's order; CORE_OK when
 * it may be served (an error answer is set otherwise, and *answered is true). */
static enum core_rc modern_check(struct api_req *r, const json_t *id, const char *method,
				 const json_t *params, bool *answered)
{
	const json_t *meta = json_object_get(params, "_meta");
	const json_t *ver = json_object_get(meta, META_VERSION);
	const char *hv = header(r, "MCP-Protocol-Version"), *hm = header(r, "Mcp-Method");
	const char *hn = header(r, "Mcp-Name");
	const char *name = json_string_value(json_object_get(params, "name"));

	*answered = true;
	if (!json_is_object(meta) || !ver || !json_object_get(meta, META_CAPS))
		return rpc_error(r, id, RPC_INVALID_PARAMS, true, NULL,
				 "params._meta must carry \"" META_VERSION "\" and \"" META_CAPS
				 "\"");
	if (!hv || !json_is_string(ver) || strcmp(hv, json_string_value(ver)) != 0)
		return rpc_error(r, id, RPC_HEADER_MISMATCH, true, NULL,
				 "MCP-Protocol-Version header does not match the request's "
				 "protocol version");
	if (!hm || strcmp(hm, method) != 0)
		return rpc_error(r, id, RPC_HEADER_MISMATCH, true, NULL,
				 "Mcp-Method header does not match the request's method");
	if (strcmp(method, "tools/call") == 0 && name && (!hn || strcmp(hn, name) != 0))
		return rpc_error(r, id, RPC_HEADER_MISMATCH, true, NULL,
				 "Mcp-Name header does not match the request's tool name");
	if (strcmp(hv, MODERN_VERSION) != 0) {
		const char *const modern[] = {MODERN_VERSION, NULL};

		return rpc_error(r, id, RPC_UNSUPPORTED_VERSION, true, unsupported(modern, hv),
				 "Unsupported protocol version");
	}
	*answered = false;
	return CORE_OK;
}

/* The transport's DNS-rebinding rule: an Origin, when a browser sends one, must be this very
 * server (scheme://Host). Bearer tokens already keep a foreign page out; this refuses it
 * before any method runs. */
static bool origin_ok(struct api_req *r)
{
	const char *origin = header(r, "Origin"), *host = header(r, "Host"), *auth;

	if (!origin)
		return true;
	auth = strstr(origin, "://");
	return auth && host && strcasecmp(auth + 3, host) == 0;
}

static bool id_valid(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

enum core_rc api_h_mcp(struct api_req *r)
{
	const char *hv = header(r, "MCP-Protocol-Version");
	json_error_t jerr;
	json_t *msg = NULL, *params;
	const json_t *id, *jv;
	const char *method;
	bool modern, answered;
	enum core_rc rc;

	if (!origin_ok(r))
		return api_fail(r, CORE_ERR_FORBIDDEN, "Origin %s is not this server",
				header(r, "Origin"));
	if (!r->body || r->body_len == 0)
		return rpc_error(r, NULL, RPC_PARSE_ERROR, false, NULL,
				 "Parse error: the body must be one JSON-RPC message");
	msg = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!msg)
		return rpc_error(r, NULL, RPC_PARSE_ERROR, false, NULL, "Parse error: %s",
				 jerr.text);
	/* The answer may wait for the store (answer.c): keep the message for that error answer. */
	json_decref(r->json);
	r->json = msg;
	if (json_is_array(msg))
		return rpc_error(r, NULL, RPC_INVALID_REQUEST, false, NULL,
				 "Invalid Request: JSON-RPC batches are not supported (removed in "
				 "protocol version 2025-06-18)");
	if (!json_is_object(msg))
		return rpc_error(r, NULL, RPC_INVALID_REQUEST, false, NULL,
				 "Invalid Request: the body must be a JSON-RPC object");
	id = json_object_get(msg, "id");
	jv = json_object_get(msg, "jsonrpc");
	method = json_string_value(json_object_get(msg, "method"));
	params = json_object_get(msg, "params");
	if (id && !id_valid(id))
		return rpc_error(r, NULL, RPC_INVALID_REQUEST, false, NULL,
				 "Invalid Request: id must be a string or an integer");
	if (!json_is_string(jv) || strcmp(json_string_value(jv), "2.0") != 0)
		return rpc_error(r, id, RPC_INVALID_REQUEST, false, NULL,
				 "Invalid Request: \"jsonrpc\" must be \"2.0\"");
	if (!method)
		return rpc_error(r, id, RPC_INVALID_REQUEST, false, NULL,
				 json_object_get(msg, "result") || json_object_get(msg, "error")
					 ? "Invalid Request: this server sends no requests, so it "
					   "takes no responses"
					 : "Invalid Request: \"method\" must be a string");
	if (params && !json_is_object(params))
		return rpc_error(r, id, RPC_INVALID_REQUEST, false, NULL,
				 "Invalid Request: \"params\" must be an object");
	if (hv && !version_in(hv, all_versions)) {
		return rpc_error(r, id, RPC_UNSUPPORTED_VERSION, false,
				 unsupported(all_versions, hv),
				 "Unsupported protocol version (MCP-Protocol-Version: %.64s)", hv);
	}
	if (!id) {
		/* A notification (notifications/initialized, cancelled, ...): accepted, nothing
		 * to act on in a stateless server. */
		r->status = 202;
		return CORE_OK;
	}
	modern = (hv && !version_in(hv, handshake_versions)) ||
		 json_object_get(json_object_get(params, "_meta"), META_VERSION);
	if (modern) {
		rc = modern_check(r, id, method, params, &answered);
		if (answered || rc != CORE_OK)
			return rc;
	}
	if (strcmp(method, "server/discover") == 0)
		return m_discover(r, id);
	if (strcmp(method, "tools/list") == 0)
		return m_tools_list(r, id, modern);
	if (strcmp(method, "tools/call") == 0)
		return m_tools_call(r, id, params, modern);
	if (!modern && strcmp(method, "initialize") == 0)
		return m_initialize(r, id, params);
	if (!modern && strcmp(method, "ping") == 0)
		return rpc_result(r, id, json_object());
	return rpc_error(r, id, RPC_METHOD_NOT_FOUND, modern, NULL, "Method not found: %.100s",
			 method);
}
