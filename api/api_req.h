/* The request at the heart of api/ (api.c makes and frees it): struct api_req, the route a
 * request resolved to (struct api_route, router.c's table), its flat body (body.c) and the
 * limits every handler checks against. Every file of api/ that sees a request includes it.
 * Not a public header: api/api.h is. */
#ifndef BOARDD_API_API_REQ_H
#define BOARDD_API_API_REQ_H

#include "api/api.h"
#include "core/core.h"
#include "store/store.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct MHD_Response;
struct api;

#define API_MAX_PARAMS 4
#define API_DETAIL_MAX 256
#define API_STRING_MAX 65536 /* titles, bodies, comments */
#define API_REASON_MAX 256   /* state reasons, gave_up reasons */

struct api_req;

/* A handler returns CORE_OK after filling r->status/r->out, or an error code (with an
 * optional r->detail); it never renders an error itself. */
typedef enum core_rc (*api_handler_fn)(struct api_req *r);

enum api_route_flags {
	API_ROUTE_PUBLIC = 1u << 0, /* no token needed */
	API_ROUTE_BODY = 1u << 1,   /* expects a JSON body */
	API_ROUTE_JSONRPC = 1u << 2, /* errors before the handler answer as JSON-RPC (/mcp) */
	API_ROUTE_FLAT = 1u << 3,   /* the handler reads its body only through the api_json_*
				     * helpers: a flat body is parsed without a tree (body.c) */
	API_ROUTE_IDEM = 1u << 4,   /* honours Idempotency-Key (DESIGN §18, idem.c) */
	API_ROUTE_ARRAY = 1u << 5,  /* the body may also be a JSON array (a batch): the handler
				     * checks its items' fields */
};
/* A route's capability (enum api_cap) rides in its flags above this shift; a route whose
 * need depends on the body (PATCH state: move or close) checks in its handler. */
#define API_ROUTE_CAP_SHIFT 8
#define API_ROUTE_CAP(cap) ((unsigned)(cap) << API_ROUTE_CAP_SHIFT)

struct api_route {
	const char *method;
	const char *pattern; /* "/v1/cards/{id}/claim" */
	api_handler_fn handler;
	unsigned roles; /* enum api_role bits; checked before the handler (finer checks inside) */
	unsigned flags;
	const char *fields; /* API_ROUTE_BODY: the body's fields, "a b ?c" (?: may be null) */
	const char *query;  /* the query parameters it reads, "a b"; NULL: none */
};

/* A flat body (body.c): one object of scalar members, strings NUL-terminated in place in
 * r->body (borrowed from it). */
#define API_FLAT_MAX 8
enum api_flat_type {
	API_FLAT_NULL,
	API_FLAT_STR,
	API_FLAT_INT,
	API_FLAT_BOOL,
};

struct api_flat_field {
	const char *key;
	size_t klen;
	enum api_flat_type type;
	const char *str; /* API_FLAT_STR, len bytes of printable ASCII */
	size_t len;
	int64_t i;       /* API_FLAT_INT */
	bool b;          /* API_FLAT_BOOL */
};

struct api_flat {
	struct api_flat_field f[API_FLAT_MAX];
	size_t n;
	bool on; /* parsed: the body's members, in order */
};

enum api_poll_state {
	API_POLL_NONE,
	API_POLL_WAITING,
	API_POLL_DONE,
};

enum api_ack_state {
	API_ACK_NONE,
	API_ACK_WAITING,
	API_ACK_DONE,
};

/* The request headers api_req_header finds (one table: headers.c's head_names). */
enum api_hdr {
	API_HDR_CONTENT_LENGTH,
	API_HDR_TRANSFER_ENCODING,
	API_HDR_CONTENT_TYPE,
	API_HDR_AUTHORIZATION,
	API_HDR_IF_MATCH,
	API_HDR_IDEMPOTENCY_KEY, /* DESIGN §18 (idem.c) */
	API_HDR_HOST,            /* checked (api_host_check), not used */
	API_HDR_LAST_EVENT_ID,   /* the event stream's resume point (stream.c) */
	API_HDR_N,
};

/* Per-request state, allocated on the first callback into *req_cls and freed only in the
 * completion callback (api.c). */
struct api_req {
	struct api *api;
	struct MHD_Connection *conn;
	const char *method;          /* borrowed from MHD for the request */
	const char *uri_raw;         /* the request target as on_uri got it (borrowed from MHD; */
	size_t uri_len;              /* a NUL inside cuts it short: api_bytes_check) */
	bool uri_ctl;                /* a control byte in it (seen by on_uri: the library then
				      * writes NULs into the target as it splits the query) */
	char *path;                  /* owned: the raw (still escaped) path */
	int64_t t0_ns;               /* monotonic start */
	bool started;                /* headers checked, route resolved */
	bool close_after;            /* answer with Connection: close (framing in doubt) */
	bool raw_answered;           /* answered on the socket by api_problem_write_raw */
	bool accounted;              /* counted and logged (access_log.c's api_req_account) */
	bool answered;               /* a response was queued */
	unsigned final_status;

	/* body */
	char *body;                  /* owned, NUL-terminated, NULL when empty */
	size_t body_len, body_cap;
	bool body_too_large;
	size_t body_discarded;
	json_t *json;                /* owned: the parsed body (API_ROUTE_BODY routes) */
	struct api_flat flat;        /* or, API_ROUTE_FLAT routes, the flat body (body.c) */

	/* routing and auth */
	const struct api_route *route;
	char *params[API_MAX_PARAMS]; /* owned: percent-decoded path parameters */
	size_t n_params;
	enum core_rc early_rc;        /* an error found before the handler (CORE_OK: none) */
	char allow[64];               /* for 405 */
	const struct api_token *tok;  /* borrowed from api->tokens, or &agent_tok */
	struct api_token agent_tok;   /* owned: an agent token's identity (agent.c) */
	int64_t agent_epoch;          /* the claim epoch an agent token is bound to; 0: none */
	char *agent_idem;             /* owned: an agent token's Idempotency-Key scope (its
				       * name, card and epoch: each claim's agents their own) */
	char *qdec[8];                /* owned: decoded query values */
	size_t n_qdec;

	/* output (handlers fill these) */
	unsigned status;
	json_t *out;                 /* owned: the JSON body */
	const char *raw_body;        /* static text body (metrics, openapi) with raw_type */
	char *raw_owned;             /* owned raw body */
	size_t answer_held;          /* bytes of its answer counted in api.answer_bytes */
	size_t raw_len;
	const char *raw_type;
	char location[CORE_ID_MAX + 32];
	char detail[API_DETAIL_MAX];
	struct MHD_Response *resp;   /* owned: a handler's own answer (the event stream), queued
				      * as it is */
	const char *const *headers;  /* static NULL-terminated name, value, ... pairs added to
				      * the success answer (the UI's security headers) */
	const char *cache_control;   /* static; NULL: no-store */

	/* events long-poll (events.c); `suspended` is only touched by MHD's thread, the poll_*
	 * results only by the helper until it resumes the connection */
	bool suspended;
	enum api_poll_state poll;
	enum core_rc poll_rc;
	struct core_event *poll_ev;
	size_t poll_n;
	int64_t poll_next;
	int64_t poll_after;
	size_t poll_limit;
	int64_t poll_wait_ms;
	char *poll_board;            /* owned */
	bool poll_by_board;          /* the board's own seq (a token scoped to boards) */
	struct api_cred *poll_cred;  /* owned; checked again when the wait ends (a revoked
				      * token's poll answers 401, not the events written since) */

	/* claim-next long-poll (claimnext.c): next_link and next_parked are guarded by the
	 * waker's mutex while parked; the rest is only touched by MHD's thread */
	struct api_req *next_link;
	bool next_parked;
	bool next_woken;             /* resumed by the waker: the checks were made already */
	int64_t next_deadline;       /* monotonic ms */
	int64_t next_wake;           /* monotonic ms; 0: none. DESIGN §17: when the earliest
				      * not_before the store found passes, try again */
	char next_board[CORE_NAME_MAX + 1];

	/* deferred acknowledgement (answer.c): a write's answer waits, connection suspended, for
	 * the store to make it durable; ack_rc is set by the store's thread before it resumes */
	struct store_ack ack;
	enum api_ack_state ack_state;
	enum core_rc ack_rc;         /* the durability outcome */
	enum core_rc handler_rc;     /* what the handler returned, answered once durable */
	unsigned params_heap;        /* bit i: params[i] was malloc'd (else it is in inl.params) */
	/* The headers boardd reads, found in one pass over the request's (api_req_header) */
	struct {
		const char *v[API_HDR_N];  /* the first of each; borrowed from MHD for the request */
		bool cl_disagree;          /* two Content-Length headers that differ */
		bool auth_twice;           /* more than one Authorization header */
		bool te_twice;             /* more than one Transfer-Encoding header */
		bool host_twice;           /* more than one Host header */
		bool ct_twice;             /* more than one Content-Type header */
		unsigned twice;            /* bit h: header h came more than once (api_hdr_once) */
		const char *bad;           /* a header holding a NUL or a control byte (its name) */
		const char *bad_name;      /* a header name that is no token (a space before ':') */
		const char *line_end;      /* the scan: where the last line read ends (headers.c) */
		bool scanned;
	} hdr;

	/* Storage that lives as long as the struct, which a keep-alive connection reuses for its
	 * next request (api_conn.spare): the path, a small body and the decoded path parameters
	 * go here instead of in a malloc each; larger ones are malloc'd. Last in the struct:
	 * req_new clears only what is above (API_REQ_CLEAR). */
	struct {
		char path[256];
		char body[512];
		char params[256];      /* the decoded parameters, each NUL-terminated */
		size_t params_len;     /* bytes of `params` in use */
	} inl;
};
/* The part of struct api_req a new request starts zeroed. */
#define API_REQ_CLEAR offsetof(struct api_req, inl)

#endif
