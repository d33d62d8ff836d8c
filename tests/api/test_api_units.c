/* Unit tests of api internals that need no server: the error table maps every enum core_rc,
 * the control-byte scan matches its byte rule,
 * the tokens file round-trips and is matched by digest, the route table is well formed. */
#include "api/api_answer.h"
#include "api/api_conns.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"
#include "tests/api/api_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

/* api_has_ctl reads eight bytes at a time: every byte value, at every offset of a word and in
 * the tail, is judged as the byte-by-byte rule judges it (a control byte but HTAB, or DEL). */
START_TEST(has_ctl_matches_the_byte_rule)
{
	char buf[40];
	size_t len, at;
	int c;

	for (len = 1; len <= sizeof buf; len++) {
		for (at = 0; at < len; at++) {
			for (c = 0; c < 256; c++) {
				bool want = (c < 0x20 && c != '\t') || c == 0x7f;

				memset(buf, 'a', sizeof buf);
				buf[at] = (char)c;
				ck_assert_msg(api_has_ctl(buf, len) == want, "byte 0x%02x at %zu of %zu",
					      c, at, len);
			}
		}
		/* clean words around a high byte and a HTAB: no false alarm from the borrow */
		memset(buf, '\t', len);
		buf[0] = (char)0x80;
		buf[len - 1] = (char)0xff;
		ck_assert(!api_has_ctl(buf, len));
	}
	/* the byte right after the length is never read as part of it */
	memset(buf, 'a', sizeof buf);
	buf[9] = '\n';
	ck_assert(!api_has_ctl(buf, 9));
	ck_assert(api_has_ctl(buf, 10));
}
END_TEST

/* The JSON media type: application/json and parameters only, a charset only UTF-8. */
START_TEST(json_media_type_is_strict)
{
	static const char *const yes[] = {
		"application/json", "Application/JSON", " application/json ", "application/json;",
		"application/json; charset=utf-8", "application/json;charset=UTF-8",
		"application/json; charset=\"utf-8\"", "application/json; v=1; charset=utf-8",
		"application/json;\tq=\"a;b\\\"c\"", "application/json;;charset=utf-8"};
	static const char *const no[] = {
		NULL, "", "text/plain", "application/jsonx", "application/json-patch+json",
		"application/json ,text/plain", "application/json text/plain",
		"application/json; charset=latin1", "application/json; charset=\"latin1\"",
		"application/json; charset=utf-8x", "application/json; charset=\"utf-8",
		"application/json; v", "application/json; =x", "application/json; q=\"open"};
	size_t i;

	for (i = 0; i < sizeof yes / sizeof yes[0]; i++)
		ck_assert_msg(api_json_media_type(yes[i]), "%s", yes[i]);
	for (i = 0; i < sizeof no / sizeof no[0]; i++)
		ck_assert_msg(!api_json_media_type(no[i]), "%s", no[i] ? no[i] : "(none)");
}
END_TEST

/* The log's escape, one byte (or one whole UTF-8 character) at a time, as DESIGN's access
 * log asks: api_log_escape, which copies plain words eight bytes at a time, must match it. */
static void escape_ref(const unsigned char *p, char *out, size_t cap)
{
	size_t o = 0, k, i;

	while (*p && o + 5 < cap) {
		unsigned char c = *p;
		bool plain = c >= 0x20 && c < 0x7f && c != '\\' && c != '"';

		k = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
					       : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
		for (i = 1; i <= k && (p[i] & 0xc0) == 0x80; i++)
			;
		if (!plain && k && i > k && o + k + 1 < cap && !(c == 0xe0 && p[1] < 0xa0) &&
		    !(c == 0xed && p[1] >= 0xa0) && !(c == 0xf0 && p[1] < 0x90) &&
		    !(c == 0xf4 && p[1] >= 0x90)) {
			memcpy(out + o, p, k + 1);
			o += k + 1;
			p += k + 1;
			continue;
		}
		if (plain)
			out[o++] = (char)c;
		else
			o += (size_t)sprintf(out + o, "\\x%02x", c);
		p++;
	}
	out[o] = '\0';
}

START_TEST(log_escape_matches_the_byte_rule)
{
	/* Plain bytes mostly (long clean runs take the word path), then every kind of byte the
	 * rule tells apart, at every offset of a word. */
	static const unsigned char kinds[] = {'a', '/', '~', ' ', '"', '\\', 0x01, 0x1f, 0x7f,
					      0x80, 0xbf, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0,
					      0xf4, 0xf5, 0xff, 0xa0, 0x90};
	unsigned char s[80];
	char got[96], want[96];
	uint64_t x = 0x9e3779b97f4a7c15u;
	size_t i, j, n, cap;

	for (i = 0; i < 20000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = (size_t)(x % 70);
		for (j = 0; j < n; j++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			s[j] = x % 4 ? (unsigned char)('a' + x % 26)
				     : kinds[(x >> 8) % sizeof kinds];
		}
		s[n] = '\0';
		cap = 6 + (size_t)(x >> 20) % 90;
		api_log_escape((const char *)s, got, cap);
		escape_ref(s, want, cap);
		ck_assert_msg(strcmp(got, want) == 0, "case %zu cap %zu: %s != %s", i, cap, got,
			      want);
	}
}
END_TEST

/* The access log's text line is built by hand (api_log_text): byte for byte what the
 * snprintf it replaced wrote, the rounding of the milliseconds (ties included) and the cut of
 * an over-long line included. */
START_TEST(log_text_matches_snprintf)
{
	static const int64_t fixed[] = {0, 1, 49999, 50000, 50001, 99999, 100000, 150000,
					250000, 350000, 1050000, 2450000, 999950000,
					INT64_C(1234567890123)};
	char longtok[1500], longpath[260], got[API_LOG_LINE_MAX], want[API_LOG_LINE_MAX];
	const char *toks[] = {NULL, "bench-worker", longtok};
	const char *paths[] = {"/v1/cards/bench-1/claim", longpath};
	const char *bys[] = {"", "libmicrohttpd"};
	uint64_t x = 88172645463325252u;
	size_t i, t, p, b, n;

	memset(longtok, 't', sizeof longtok - 1);
	longtok[sizeof longtok - 1] = '\0';
	memset(longpath, 'p', sizeof longpath - 1);
	longpath[sizeof longpath - 1] = '\0';
	for (i = 0; i < 4000; i++) {
		int64_t ns;

		if (i < sizeof fixed / sizeof fixed[0]) {
			ns = fixed[i];
		} else {
			x ^= x << 13; /* xorshift: a fixed sequence */
			x ^= x >> 7;
			x ^= x << 17;
			ns = (int64_t)(x % 100000000u);
			if (i % 3 == 0) /* a tie of the tenths: the double decides */
				ns = ns / 100000 * 100000 + 50000;
		}
		for (t = 0; t < 3; t++)
			for (p = 0; p < 2; p++)
				for (b = 0; b < 2; b++) {
					n = api_log_text(got, "2026-12-03T13:45:01.123Z", "POST",
							 paths[p], 200 + (unsigned)i % 300, ns,
							 toks[t], bys[b]);
					snprintf(want, sizeof want, "%s %s %.200s %u %.1fms%s%s%s%s",
						 "2026-12-03T13:45:01.123Z", "POST", paths[p],
						 200 + (unsigned)i % 300, (double)ns / 1e6,
						 toks[t] ? " " : "", toks[t] ? toks[t] : "",
						 bys[b][0] ? " answered-by=" : "", bys[b]);
					ck_assert_str_eq(got, want);
					ck_assert_uint_eq(n, strlen(want));
				}
	}
}
END_TEST

START_TEST(error_table_maps_every_rc)
{
	static const struct {
		enum core_rc rc;
		unsigned status;
	} want[] = {
		{CORE_ERR_BAD_REQUEST, 400},		{CORE_ERR_UNAUTHORIZED, 401},
		{CORE_ERR_FORBIDDEN, 403},		{CORE_ERR_NOT_FOUND, 404},
		{CORE_ERR_METHOD_NOT_ALLOWED, 405},	{CORE_ERR_CLAIM_CONFLICT, 409},
		{CORE_ERR_STATE_CONFLICT, 409},		{CORE_ERR_DEPENDENTS_OUTSTANDING, 409},
		{CORE_ERR_BLOCKERS_PENDING, 409},	{CORE_ERR_RUN_FINAL, 409},
		{CORE_ERR_ALREADY_EXISTS, 409},		{CORE_ERR_PAYLOAD_TOO_LARGE, 413},
		{CORE_ERR_UNSUPPORTED_MEDIA_TYPE, 415}, {CORE_ERR_TERMINAL_STATE_EXIT, 422},
		{CORE_ERR_TRANSITION_REJECTED, 422},	{CORE_ERR_PRECONDITION_REQUIRED, 428},
		{CORE_ERR_URI_TOO_LONG, 414},		{CORE_ERR_NOT_IMPLEMENTED, 501},
		{CORE_ERR_INVALID_BOARD, 422},		{CORE_ERR_CAPACITY_REACHED, 409},
		{CORE_ERR_NOT_YET, 409},		{CORE_ERR_IDEMPOTENCY_KEY_REUSED, 422},
		{CORE_ERR_IDEMPOTENCY_KEY_IN_FLIGHT, 409},
		{CORE_ERR_STORE_UNAVAILABLE, 503},	{CORE_ERR_BUSY, 503},
		{CORE_ERR_NOMEM, 500},
		{CORE_ERR_INTERNAL, 500},
	};
	int rc;
	size_t i;

	ck_assert_int_eq(sizeof want / sizeof want[0], CORE_RC_COUNT_ - 1);
	for (rc = 0; rc < CORE_RC_COUNT_; rc++) {
		unsigned st = api_rc_status((enum core_rc)rc);

		ck_assert_ptr_nonnull(api_rc_title((enum core_rc)rc));
		ck_assert_str_ne(api_rc_title((enum core_rc)rc), "");
		ck_assert_str_ne(core_rc_code((enum core_rc)rc), "");
		if (rc == CORE_OK)
			ck_assert_uint_eq(st, 200);
		else
			ck_assert_msg(st >= 400 && st <= 599, "%s -> %u", core_rc_code(rc), st);
	}
	for (i = 0; i < sizeof want / sizeof want[0]; i++)
		ck_assert_msg(api_rc_status(want[i].rc) == want[i].status, "%s: want %u got %u",
			      core_rc_code(want[i].rc), want[i].status, api_rc_status(want[i].rc));
	ck_assert_uint_eq(api_rc_status((enum core_rc)999), 500);
}
END_TEST

START_TEST(tokens_file_round_trip)
{
	static const char *const boards[] = {"alpha", "beta", NULL};
	struct api_tokens t = {0}, back = {0};
	char dir[] = "/tmp/boardd-tok-XXXXXX", path[128], plain[API_TOKEN_PLAIN_BUF], err[256];
	const struct api_token *hit;
	struct stat sb;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/tokens.json", dir);
	ck_assert_int_eq(api_token_generate(plain), CORE_OK);
	ck_assert_uint_eq(strlen(plain), 64);
	ck_assert_int_eq(api_tokens_push(&t, "a", plain, API_ROLE_WORKER | API_ROLE_BOT, boards),
			 CORE_OK);
	ck_assert_int_eq(api_tokens_push(&t, "b", "secret-b", API_ROLE_OPERATOR, NULL), CORE_OK);
	ck_assert_int_eq(api_tokens_save(&t, path, err, sizeof err), CORE_OK);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	/* the plain token is not in the file */
	{
		char buf[4096];
		size_t n;

		f = fopen(path, "r");
		n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = '\0';
		fclose(f);
		ck_assert_ptr_null(strstr(buf, plain));
		ck_assert_ptr_null(strstr(buf, "secret-b"));
		ck_assert_ptr_nonnull(strstr(buf, "token_sha256"));
	}
	ck_assert_int_eq(api_tokens_load(path, &back, err, sizeof err), CORE_OK);
	ck_assert_uint_eq(back.n, 2);
	hit = api_tokens_find(&back, plain);
	ck_assert_ptr_nonnull(hit);
	ck_assert_str_eq(hit->name, "a");
	ck_assert_uint_eq(hit->roles, API_ROLE_WORKER | API_ROLE_BOT);
	ck_assert(api_token_board_allowed(hit, "beta"));
	ck_assert(!api_token_board_allowed(hit, "default"));
	hit = api_tokens_find(&back, "secret-b");
	ck_assert_ptr_nonnull(hit);
	ck_assert(hit->all_boards);
	ck_assert_ptr_null(api_tokens_find(&back, "secret-c"));
	ck_assert_ptr_null(api_tokens_find(&back, ""));
	api_tokens_release(&back);

	/* malformed files are refused with a reason */
	f = fopen(path, "w");
	fputs("{\"tokens\":[{\"name\":\"x\",\"token_sha256\":\"ABC\",\"roles\":[\"bot\"]}]}", f);
	fclose(f);
	ck_assert_int_ne(api_tokens_load(path, &back, err, sizeof err), CORE_OK);
	ck_assert_ptr_nonnull(strstr(err, "token_sha256"));
	f = fopen(path, "w");
	fputs("{\"tokens\":[{\"name\":\"x\",\"token_sha256\":\"", f);
	fputs("0000000000000000000000000000000000000000000000000000000000000000\",", f);
	fputs("\"roles\":[\"king\"]}]}", f);
	fclose(f);
	ck_assert_int_ne(api_tokens_load(path, &back, err, sizeof err), CORE_OK);
	ck_assert_uint_eq(back.n, 0);
	unlink(path);
	ck_assert_int_eq(api_tokens_load(path, &back, err, sizeof err), CORE_ERR_NOT_FOUND);
	rmdir(dir);
	api_tokens_release(&t);
	ck_assert_uint_eq(api_role_parse("operator"), API_ROLE_OPERATOR);
	ck_assert_uint_eq(api_role_parse("root"), 0);
}
END_TEST

START_TEST(route_table_well_formed)
{
	size_t n, i, k;
	const struct api_route *rt = api_router_table(&n);

	ck_assert_uint_gt(n, 30);
	for (i = 0; i < n; i++) {
		ck_assert(rt[i].handler != NULL);
		ck_assert_uint_ne(rt[i].roles, 0);
		ck_assert_int_eq(rt[i].pattern[0], '/');
		for (k = i + 1; k < n; k++)
			ck_assert_msg(strcmp(rt[i].method, rt[k].method) != 0 ||
					      strcmp(rt[i].pattern, rt[k].pattern) != 0,
				      "duplicate route %s %s", rt[i].method, rt[i].pattern);
	}
}
END_TEST

/* ---- a store that fails every call: a 5xx, never an empty success ---- */

/* A server on st (loopback, a free port, `threads` HTTP threads) with one token, "all-token",
 * holding every role, pushed into *tokens (the caller releases it after api_stop). */
static struct api *api_on(struct store *st, struct api_tokens *tokens, unsigned threads)
{
	struct api_config cfg;
	struct api *a = NULL;
	char err[256];

	ck_assert_int_eq(api_tokens_push(tokens, "all", "all-token", API_ROLE_ANY, NULL), CORE_OK);
	api_config_init(&cfg);
	cfg.listen = "127.0.0.1:0";
	cfg.threads = threads;
	cfg.tokens = tokens;
	cfg.log_format = API_LOG_NONE;
	ck_assert_msg(api_start(&cfg, st, &a, err, sizeof err) == CORE_OK, "api_start: %s", err);
	return a;
}

static enum core_rc broken_ping(struct store *st)
{
	return CORE_ERR_STORE_UNAVAILABLE;
}

static enum core_rc broken_card_get(struct store *st, const char *id, struct core_card **out)
{
	return CORE_ERR_STORE_UNAVAILABLE;
}

static enum core_rc broken_card_list(struct store *st, const struct store_card_filter *f,
				     struct core_card ***out, size_t *n, char **next)
{
	return CORE_ERR_STORE_UNAVAILABLE;
}

static enum core_rc broken_card_create(struct store *st, const struct store_card_create *in,
				       const struct store_actor *actor, struct core_card **out)
{
	return CORE_ERR_STORE_UNAVAILABLE;
}

/* The claim reads the card itself (api_card_scope_lazy skips the handler's own read). */
static enum core_rc broken_card_claim(struct store *st, const char *id, const char *marker,
				      int64_t lease_ms, const struct store_actor *actor,
				      struct store_claim_result *out)
{
	return CORE_ERR_STORE_UNAVAILABLE;
}

static enum core_rc broken_events(struct store *st, const char *board,
				  const char *const *boards, int64_t after, size_t limit,
				  int64_t wait_ms, struct core_event **out, size_t *n,
				  int64_t *next)
{
	return CORE_ERR_STORE_UNAVAILABLE;
}

static const struct store_ops broken_ops = {
	.name = "broken",
	.ping = broken_ping,
	.card_get = broken_card_get,
	.card_list = broken_card_list,
	.card_create = broken_card_create,
	.card_claim = broken_card_claim,
	.events_list = broken_events,
};

START_TEST(store_failure_is_never_a_success)
{
	static const struct {
		const char *method, *path, *body;
		int status;
	} cases[] = {
		{"GET", "/readyz", NULL, 503},
		{"GET", "/v1/cards", NULL, 503},
		{"GET", "/v1/cards/abc", NULL, 503},
		{"POST", "/v1/cards", "{\"title\":\"x\"}", 503},
		{"POST", "/v1/cards/abc/claim", "{\"marker\":\"m\"}", 503},
		{"GET", "/v1/events?wait_ms=100", NULL, 503},
		{"GET", "/v1/boards", NULL, 500}, /* an op the store lacks: internal */
	};
	struct store st = {.ops = &broken_ops};
	struct api_tokens tokens = {0};
	struct api *a = NULL;
	struct httpc *c;
	size_t i;

	a = api_on(&st, &tokens, 2);
	c = httpc_connect("127.0.0.1", api_port(a));
	ck_assert_ptr_nonnull(c);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *body = NULL, *hdrs = NULL, *ct;
		int stt = harness_call_h(c, cases[i].method, cases[i].path, "all-token", NULL,
					 cases[i].body, &hdrs, &body);

		ck_assert_msg(stt == cases[i].status, "%s %s: %d", cases[i].method, cases[i].path,
			      stt);
		ct = httpc_header(hdrs, "Content-Type");
		ck_assert_str_eq(ct, "application/problem+json");
		ck_assert_ptr_nonnull(strstr(body, stt == 503 ? "store_unavailable" : "internal"));
		free(ct);
		free(body);
		free(hdrs);
	}
	httpc_close(c);
	api_stop(a);
	api_tokens_release(&tokens);
}
END_TEST

/* A client that stops sending mid-request is dropped after the connection timeout, and the
 * server goes on answering others. */
START_TEST(slow_client_dropped)
{
	struct harness_options o = {.conn_timeout_s = 1};
	struct harness h;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct timeval tv = {5, 0};
	const char *partial = "POST /v1/cards HTTP/1.1\r\nHost: x\r\nContent-Le";
	char buf[256];
	ssize_t n;
	int fd;

	ck_assert(harness_start(&h, &o));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_port = htons(h.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	ck_assert_int_eq(send(fd, partial, strlen(partial), 0), (ssize_t)strlen(partial));
	{
		struct httpc *c = harness_connect(&h);
		char *body = NULL;

		ck_assert_int_eq(harness_call(c, "GET", "/healthz", NULL, NULL, NULL, &body), 200);
		free(body);
		httpc_close(c);
	}
	n = recv(fd, buf, sizeof buf, 0); /* EOF (or a reset) well before SO_RCVTIMEO */
	ck_assert_int_le(n, 0);
	ck_assert(n == 0 || errno != EAGAIN);
	close(fd);
	harness_stop(&h);
}
END_TEST

/* The flat body parser (api/body.c) answers every body exactly as json_loadb's path does: the
 * same code and detail for each malformed or refused body, the same readings for each
 * accepted one, on every API_ROUTE_FLAT route; and it does take the claim cycle's bodies. */
START_TEST(flat_bodies_match_the_tree)
{
	static const struct {
		const char *body;
		bool flat; /* the flat parser must take it (on every flat route) */
	} corpus[] = {
		{"{\"marker\":\"bench-w1\",\"lease_ms\":30000}", true},
		{"{\"marker\":\"bench-w1\",\"epoch\":3,\"lease_ms\":30000}", true},
		{"{\"marker\":\"bench-w1\",\"epoch\":3}", true},
		{"{\"marker\":\"bench-w1\",\"to\":\"review\"}", true},
		{"{\"marker\":\"w\",\"to\":\"done\",\"reason\":\"finished\",\"release\":true}", true},
		{" \t\r\n{ \"marker\" : \"w\" , \"epoch\" : 0 } \n", true},
		{"{}", true},
		{"{ }", true},
		{"{\"marker\":\"w\",\"run_id\":null}", true},
		{"{\"marker\":null}", true},
		{"{\"x\":1}", true},
		{"{\"\":1}", true},
		{"{\"marker\":\"w\",\"epoch\":-0}", true},
		{"{\"marker\":\"w\",\"epoch\":-5}", true},
		{"{\"marker\":\"w\",\"epoch\":999999999999999999}", true},
		{"{\"marker\":\"w\",\"epoch\":\"3\"}", true},
		{"{\"marker\":3}", true},
		{"{\"marker\":true,\"epoch\":false}", true},
		{"{\"release\":false,\"to\":\"x\"}", true},
		{"{\"marker\":\"w\",\"awaiting_input\":true}", true},
		{"{\"marker\":\"a b\"}", true},
		{"{\"marker\":\"~!@#$%^&*()_+{}[]|:;'<>,.?/`\"}", true},
		{"{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8}", true},
		/* strings read eight bytes at a time: the quote in and after a word */
		{"{\"marker\":\"abcdefghijklmnopqrstuvwxyz0123456789\"}", true},
		{"{\"marker\":\"0123456789abcdef\",\"epoch\":3}", true},
		{"{\"marker\":\"abcdefgh\",\"epoch\":3}", true},
		{"{\"lease_ms_and_more\":1}", true},
		/* declined: json_loadb judges them */
		{"{\"marker\":\"abcdefgh\\u0041\"}", false},
		{"{\"marker\":\"abcdefghij\x7fklmnopqrstu\"}", false},
		{"{\"marker\":\"abcdefgh\xc3\xa9ijklmnop\"}", false},
		{"{\"marker\":\"abcdefghij\tklmnop\"}", false},
		{"{\"abcdefghijkl\x01\":1}", false},
		{"{\"marker\":\"abcdefghijklmnopq", false},
		{"", false},
		{" ", false},
		{"{", false},
		{"}", false},
		{"[]", false},
		{"[{\"marker\":\"w\"}]", false},
		{"null", false},
		{"\"marker\"", false},
		{"3", false},
		{"{\"marker\":\"w\",}", false},
		{"{,}", false},
		{"{\"marker\"}", false},
		{"{\"marker\" \"w\"}", false},
		{"{\"marker\":}", false},
		{"{\"marker\":\"w\"", false},
		{"{\"marker\":\"w\"} x", false},
		{"{\"marker\":\"w\"}{}", false},
		{"{\"marker\":\"w\",\"marker\":\"v\"}", false},
		{"{\"marker\":\"w\",\"epoch\":1.0}", false},
		{"{\"marker\":\"w\",\"epoch\":1e3}", false},
		{"{\"marker\":\"w\",\"epoch\":1E3}", false},
		{"{\"marker\":\"w\",\"epoch\":01}", false},
		{"{\"marker\":\"w\",\"epoch\":-}", false},
		{"{\"marker\":\"w\",\"epoch\":+1}", false},
		{"{\"marker\":\"w\",\"epoch\":1x}", false},
		{"{\"marker\":\"w\",\"epoch\":9223372036854775807}", false},
		{"{\"marker\":\"w\",\"epoch\":9223372036854775808}", false},
		{"{\"marker\":\"w\",\"epoch\":-9223372036854775809}", false},
		{"{\"marker\":\"w\",\"epoch\":99999999999999999999999}", false},
		{"{\"marker\":\"w\\u0041\"}", false},
		{"{\"marker\":\"w\\\"\"}", false},
		{"{\"marker\":\"w\\x\"}", false},
		{"{\"marker\":\"\xc3\xa9\"}", false},
		{"{\"marker\":\"\xff\"}", false},
		{"{\"marker\":\"a\tb\"}", false},
		{"{\"marker\":\"a\x01\"}", false},
		{"{\"m\xc3\xa9\":1}", false},
		{"\xef\xbb\xbf{}", false},
		{"{\"marker\":tru}", false},
		{"{\"marker\":truex}", false},
		{"{\"marker\":nul}", false},
		{"{\"marker\":NULL}", false},
		{"{\"marker\":True}", false},
		{"{\"marker\":{}}", false},
		{"{\"marker\":[]}", false},
		{"{\"labels\":[\"a\"]}", false},
		{"{\"gave_up\":{\"reason\":\"x\"}}", false},
		{"{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9}", false},
		{"{'marker':'w'}", false},
		{"{marker:\"w\"}", false},
		{"{\"marker\":\"w\"}\f", false},
		{"{\"marker\":\"w\" /* c */}", false},
	};
	size_t n_routes, i, k, n_flat = 0;
	const struct api_route *routes = api_router_table(&n_routes);

	for (i = 0; i < n_routes; i++)
		n_flat += (routes[i].flags & API_ROUTE_FLAT) != 0;
	ck_assert_uint_ge(n_flat, 4); /* claim, renew, release, state at least */
	for (k = 0; k < n_flat; k++) {
		for (i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
			bool flat = false;
			const char *why = api_fuzz_body((unsigned)k, corpus[i].body,
							strlen(corpus[i].body), &flat);

			ck_assert_msg(!why, "body %zu (%s): %s", i, corpus[i].body, why);
			ck_assert_msg(flat == corpus[i].flat, "body %zu (%s): flat %d, want %d", i,
				      corpus[i].body, flat, corpus[i].flat);
		}
		{ /* a NUL inside: declined, and the same answer */
			static const char nul[] = "{\"marker\":\"w\0\"}";
			bool flat = true;
			const char *why = api_fuzz_body((unsigned)k, nul, sizeof nul - 1, &flat);

			ck_assert_msg(!why, "NUL body: %s", why);
			ck_assert(!flat);
		}
	}
}
END_TEST

/* ---- a store whose tail has a hole another writer is filling ---- */

/* Until `released`, a read that may not wait (STORE_EVENTS_NO_WAIT) is told the tail has a
 * hole (CORE_ERR_BUSY); any other read waits for the release, as the Mongo twin waits out a
 * hole (up to 2 s). Then: no event, next = after + 7. */
static struct {
	atomic_int waiting, released;
} holey;

static enum core_rc holey_events(struct store *st, const char *board,
				 const char *const *boards, int64_t after, size_t limit,
				 int64_t wait_ms, struct core_event **out, size_t *n,
				 int64_t *next)
{
	struct timespec nap = {0, 5 * 1000 * 1000};

	if (!atomic_load(&holey.released)) {
		if (wait_ms == STORE_EVENTS_NO_WAIT)
			return CORE_ERR_BUSY;
		atomic_store(&holey.waiting, 1);
		while (!atomic_load(&holey.released))
			nanosleep(&nap, NULL);
	}
	*out = calloc(1, sizeof(**out));
	*n = 0;
	*next = after + 7;
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}

static enum core_rc holey_ping(struct store *st)
{
	return CORE_OK;
}

static const struct store_ops holey_ops = {
	.name = "holey",
	.ping = holey_ping,
	.events_list = holey_events,
};

struct holey_call {
	uint16_t port;
	const char *path;
	int status;
	char *body;
	atomic_int done;
};

static void *holey_call_main(void *arg)
{
	struct holey_call *k = arg;
	struct httpc *c = httpc_connect("127.0.0.1", k->port);

	k->status = c ? harness_call(c, "GET", k->path, "all-token", NULL, NULL, &k->body) : -1;
	httpc_close(c);
	atomic_store(&k->done, 1);
	return NULL;
}

/* Waits up to 10 s for flag; whether it was set. */
static bool holey_await(atomic_int *flag)
{
	struct timespec nap = {0, 5 * 1000 * 1000};
	int i;

	for (i = 0; i < 2000 && !atomic_load(flag); i++)
		nanosleep(&nap, NULL);
	return atomic_load(flag);
}

/* A listing (or a stream) that meets a hole in the Mongo tail waits it out on a helper thread,
 * never on an HTTP thread: with one HTTP thread, /healthz answers while the listing waits (it
 * used to wait on that thread: /healthz took up to the 2 s of the hole's grace, and a few
 * such listings held every thread). */
static void hole_wait_case(const char *path)
{
	struct store st = {.ops = &holey_ops};
	struct api_tokens tokens = {0};
	struct api *a = NULL;
	struct holey_call list = {.path = path}, health = {.path = "/healthz"};
	pthread_t tl, th;
	bool answered;
	int fd = -1;

	atomic_store(&holey.waiting, 0);
	atomic_store(&holey.released, 0);
	a = api_on(&st, &tokens, 1);
	list.port = health.port = api_port(a);
	if (strstr(path, "/stream")) {
		/* A stream answers as it goes: its request is sent, its answer never read. */
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(list.port)};
		char req[256];
		int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n"
					      "Authorization: Bearer all-token\r\n\r\n", path);

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
		ck_assert_int_eq(send(fd, req, (size_t)len, 0), len);
	} else {
		ck_assert_int_eq(pthread_create(&tl, NULL, holey_call_main, &list), 0);
	}
	ck_assert(holey_await(&holey.waiting)); /* a read is waiting out the hole */
	ck_assert_int_eq(pthread_create(&th, NULL, holey_call_main, &health), 0);
	answered = holey_await(&health.done);
	ck_assert_int_eq(atomic_load(&list.done), 0); /* the listing was still waiting */
	atomic_store(&holey.released, 1);
	pthread_join(th, NULL);
	if (fd < 0)
		pthread_join(tl, NULL);
	else
		close(fd);
	ck_assert_msg(answered, "/healthz waited behind a listing's hole wait");
	ck_assert_int_eq(health.status, 200);
	if (fd < 0) {
		ck_assert_int_eq(list.status, 200); /* the hole's wait ended: the page */
		ck_assert_ptr_nonnull(strstr(list.body, "\"next\":10"));
	}
	free(list.body);
	free(health.body);
	api_stop(a);
	api_tokens_release(&tokens);
}

START_TEST(listing_hole_wait_holds_no_http_thread)
{
	hole_wait_case("/v1/events?after=3");
}
END_TEST

START_TEST(stream_hole_wait_holds_no_http_thread)
{
	hole_wait_case("/v1/events/stream?after=3");
}
END_TEST

TCase *api_tcase_units(void)
{
	TCase *tc = tcase_create("units");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, error_table_maps_every_rc);
	tcase_add_test(tc, log_text_matches_snprintf);
	tcase_add_test(tc, log_escape_matches_the_byte_rule);
	tcase_add_test(tc, has_ctl_matches_the_byte_rule);
	tcase_add_test(tc, json_media_type_is_strict);
	tcase_add_test(tc, tokens_file_round_trip);
	tcase_add_test(tc, route_table_well_formed);
	tcase_add_test(tc, store_failure_is_never_a_success);
	tcase_add_test(tc, slow_client_dropped);
	tcase_add_test(tc, flat_bodies_match_the_tree);
	tcase_add_test(tc, listing_hole_wait_holds_no_http_thread);
	tcase_add_test(tc, stream_hole_wait_holds_no_http_thread);
	return tc;
}
