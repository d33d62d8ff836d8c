/* Idempotency keys at the HTTP edge (idem.c, DESIGN §18): the Idempotency-Key header of the
 * routes flagged API_ROUTE_IDEM, and the pieces a batch's per-item keys reuse. */
#ifndef BOARDD_API_API_IDEM_H
#define BOARDD_API_API_IDEM_H

#include "api/api_req.h"
#include "core/core.h"
#include "store/store.h"

#include <stdbool.h>
#include <stddef.h>

#define API_IDEM_KEY_MAX 255 /* the client's key */
#define API_IDEM_SCOPED_MAX (API_IDEM_KEY_MAX + CORE_NAME_MAX + 512)
#define API_IDEM_FP_LEN 64 /* hex SHA-256 */

/* BAD_REQUEST (detail naming `what`) unless key is 1..255 printable ASCII bytes. */
enum core_rc api_idem_key_check(struct api_req *r, const char *key, const char *what);
/* The key as the store files it: the token's name, `scope` (the method and path, or a batch
 * item's) and the client's key, unambiguously joined. False when it does not fit. */
bool api_idem_scope(struct api_req *r, const char *scope, const char *key, char *out,
		    size_t n);
/* Hex SHA-256 of len bytes at data into out (API_IDEM_FP_LEN + 1 bytes). False on failure. */
bool api_idem_fp(const void *data, size_t len, char *out);
/* The answer a recorded key gives when it cannot be replayed (PENDING, LOST): its rc with
 * the detail set. */
enum core_rc api_idem_refusal(struct api_req *r, const struct store_idem *k, const char *key);

/* Runs r's handler under its Idempotency-Key, if it has one: a key seen before answers what
 * its first request answered (the handler does not run); a new one is reserved, bound to the
 * thread while the handler writes (the FS twin journals it with the write), then recorded
 * with the handler's answer (a 5xx drops it instead, so a retry may try again). */
enum core_rc api_idem_handle(struct api_req *r);

/* The MCP create_card tool with its `idempotency_key` argument (the arguments are r->json):
 * a repeat with the same arguments answers the card the first call created (*out: a new
 * reference); a refused call is not recorded (a retry runs again). */
enum core_rc api_mcp_create_keyed(struct api_req *r, json_t **out);

#endif
