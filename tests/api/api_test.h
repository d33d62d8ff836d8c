/* Shared helpers of the api suite: each test runs against a fresh in-process server. */
#ifndef BOARDD_TESTS_API_TEST_H
#define BOARDD_TESTS_API_TEST_H

#include "tests/common/harness.h"

#include <check.h>
#include <jansson.h>

#define W HARNESS_TOK_WORKER
#define W2 HARNESS_TOK_WORKER2
#define BOT HARNESS_TOK_BOT
#define OP HARNESS_TOK_OPERATOR
#define ALL HARNESS_TOK_ALL
#define SCOPED HARNESS_TOK_SCOPED

extern struct harness T;     /* the running server of the current test */
extern struct httpc *TC;     /* a keep-alive connection to it */
extern char *T_HDRS;         /* headers of the last answer */
extern char *T_BODY;         /* body of the last answer */

/* Checked fixtures: start/stop the harness around each test. */
void t_setup(void);
void t_setup_small_body(void); /* max_body 4096 */
void t_setup_one_thread(void); /* one HTTP thread */
void t_setup_short_lease(void); /* lease_min_ms 1 */
void t_setup_with(const struct harness_options *o);
void t_teardown(void);

/* One request; returns the status and parses the body (new reference in *out when
 * out != NULL and the body is JSON, else NULL). */
int t_call(const char *method, const char *path, const char *tok, const char *hdr,
	   const char *body, json_t **out);
/* Asserts the status; returns the parsed body (caller decrefs; may be NULL). */
json_t *t_must(int want, const char *method, const char *path, const char *tok, const char *hdr,
	       const char *body);
/* Asserts a problem+json answer with that status and code. */
void t_problem(int want, const char *code, const char *method, const char *path, const char *tok,
	       const char *hdr, const char *body);
/* Asserts a problem answer with that status and code whose detail contains `needle`. */
void t_problem_says(int want, const char *code, const char *needle, const char *method,
		    const char *path, const char *tok, const char *hdr, const char *body);
/* The card's raw JSON as served (for byte-identical comparisons); caller frees. */
char *t_card_raw(const char *id);
/* Creates a card (bot) with this JSON body; returns its id (caller frees). */
char *t_card_new(const char *body);
/* Claims card id for marker; returns the epoch. */
long long t_claim(const char *id, const char *marker);
/* Owned state move with If-Match. */
int t_owned_state(const char *tok, const char *id, const char *marker, long long epoch,
		  const char *to);
/* Creates board `name` as a copy of the default board (operator). */
void t_board_new(const char *name);

const char *t_str(const json_t *o, const char *key);
long long t_int(const json_t *o, const char *key);

TCase *api_tcase_life(void);
TCase *api_tcase_errors(void);
TCase *api_tcase_errors_small(void);
TCase *api_tcase_misc(void);
TCase *api_tcase_roles(void);
TCase *api_tcase_race(void);
TCase *api_tcase_units(void);
TCase *api_tcase_answer_text(void);
TCase *api_tcase_quiesce(void);
TCase *api_tcase_admin(void);
TCase *api_tcase_ack(void);
TCase *api_tcase_next(void);
TCase *api_tcase_next_start(void);
TCase *api_tcase_edge(void);
TCase *api_tcase_edge_reaper(void);
TCase *api_tcase_fence(void);
TCase *api_tcase_contract(void);
TCase *api_tcase_mcp(void);
TCase *api_tcase_mcp_small(void);
TCase *api_tcase_agent(void);
TCase *api_tcase_unix(void);
TCase *api_tcase_runs(void);
TCase *api_tcase_activity(void);
TCase *api_tcase_policy(void);
TCase *api_tcase_many(void);

#endif
