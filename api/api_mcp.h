/* POST /mcp (DESIGN §13): what mcp.c and mcp_tools.c share, and the JSON-RPC error answer.c
 * renders for a /mcp request refused before its handler. */
#ifndef BOARDD_API_API_MCP_H
#define BOARDD_API_API_MCP_H

#include "api/api_req.h"
#include "core/core.h"

#include <jansson.h>

/* ---- mcp.c, mcp_tools.c: POST /mcp (DESIGN §13) ---- */
/* tools/list's `tools` for a token holding `caps` (new reference; NULL on OOM). */
json_t *api_mcp_tools_json(unsigned caps);
/* Runs tool `name` with `args` (an object) for r's token. OUT: *result, the CallToolResult
 * (new reference) also for a refusal (isError). NOT_FOUND: no such tool; FORBIDDEN: not
 * granted (detail set); NOMEM, STORE_UNAVAILABLE, INTERNAL: no answer to give. */
enum core_rc api_mcp_tool_call(struct api_req *r, const char *name, json_t *args,
			       json_t **result);
/* Renders a JSON-RPC error answer for an error found before the /mcp handler ran. */
json_t *api_mcp_early_error(enum core_rc rc, const char *detail);
/* The token's board list for store filters: NULL for all boards (borrowed). */

#endif
