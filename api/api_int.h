/* Transitional umbrella: every api/ internal header at once, for a branch written before the
 * split (issue 25). No file in the tree includes it; include the per-concern headers below
 * instead (each says what it declares and which .c defines it). To be removed. */
#ifndef BOARDD_API_INT_H
#define BOARDD_API_INT_H

#include "api/api_answer.h"
#include "api/api_auth.h"
#include "api/api_cards.h"
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_events.h"
#include "api/api_handlers.h"
#include "api/api_mcp.h"
#include "api/api_req.h"
#include "api/api_request.h"

#endif
