/* The long-lived requests and their threads: the events long-poll (events.c), the event
 * stream's hub (stream.c) and claim-next's waker (claimnext.c); api.c starts, stops and frees
 * them. */
#ifndef BOARDD_API_API_EVENTS_H
#define BOARDD_API_API_EVENTS_H

#include "api/api_req.h"
#include "core/core.h"

#include <stdbool.h>

/* stream.c: GET /v1/events/stream (Server-Sent Events) and its hub. */
enum core_rc api_streams_init(struct api *a);
/* Ends every stream and stops the hub thread (before MHD_stop_daemon). */
void api_streams_stop(struct api *a);
/* Streams open now (the metrics gauge). */
unsigned api_streams_open(struct api *a);
/* Frees the hub (after MHD_stop_daemon: the last streams are freed by it). */
void api_streams_free(struct api *a);
/* Long-poll plumbing for api.c (a request freed). */
void api_poll_release(struct api_req *r);
/* A request that waits (a long-poll, a waiting claim-next) keeps its credential once
 * (NOMEM only), and checks it again when the wait ends: revoked, expired, removed or changed
 * by a reload meanwhile (or its agent's claim ended), 401 as a new request would get. */
enum core_rc api_poll_cred_keep(struct api_req *r);
enum core_rc api_poll_cred_check(struct api_req *r);
/* The events a request reads (GET /v1/events and its stream): an unscoped token reads every
 * board, or *board, in the global seq (*by_board false); a token scoped to boards reads one
 * board in that board's own seq (board_seq, DESIGN §11): *board, else its only board
 * (borrowed from the token), else 400 naming `board`. Checks *board's name and access. */
enum core_rc api_events_scope(struct api_req *r, const char **board, bool *by_board);
void api_polls_stop(struct api *a);
/* claim-next's waker thread: started with the daemon; stop resumes every waiter (they answer
 * 204) and joins it; free after the daemon stopped. */
enum core_rc api_next_start(struct api *a);
void api_next_stop(struct api *a);
void api_next_free(struct api *a);

#endif
