/* The operator UI (DESIGN §15): its static files, compiled into the binary (ui/gen_c.py), and
 * GET /v1/whoami, which tells the UI what the token may do (it shows no button the server
 * would refuse; the server refuses anyway).
 *
 * Every UI answer carries a strict Content-Security-Policy (no inline script or style, no
 * other origin, no framing), X-Content-Type-Options and Referrer-Policy. Fingerprinted assets
 * are cached for a year; index.html is revalidated every time. */
#include "api/api_answer.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"
#include "api/ui_assets.h"

#include <stdio.h>
#include <string.h>

static const char *const ui_headers[] = {
	"Content-Security-Policy",
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options", "nosniff",
	"Referrer-Policy", "no-referrer",
	"X-Frame-Options", "DENY",
	NULL,
};

static enum core_rc ui_serve(struct api_req *r, const char *name)
{
	size_t i;

	for (i = 0; i < api_ui_assets_n; i++) {
		const struct api_ui_asset *f = &api_ui_assets[i];

		if (strcmp(f->name, name) != 0)
			continue;
		r->raw_body = (const char *)f->data;
		r->raw_len = f->len;
		r->raw_type = f->type;
		r->status = 200;
		r->headers = ui_headers;
		r->cache_control = f->immutable ? "public, max-age=31536000, immutable" : "no-cache";
		return CORE_OK;
	}
	return api_fail(r, CORE_ERR_NOT_FOUND, "no UI file %s", name);
}

/* GET /: a person who opens the server's address lands on the UI, not on a 404 (issue 30). */
enum core_rc api_h_root(struct api_req *r)
{
	static const char body[] = "See /ui/\n";

	snprintf(r->location, sizeof r->location, "%s", "/ui/");
	r->raw_body = body;
	r->raw_len = sizeof body - 1;
	r->raw_type = "text/plain; charset=utf-8";
	r->status = 302;
	r->headers = ui_headers;
	return CORE_OK;
}

enum core_rc api_h_ui_root(struct api_req *r)
{
	return ui_serve(r, "index.html");
}

enum core_rc api_h_ui_index(struct api_req *r)
{
	return ui_serve(r, "index.html");
}

enum core_rc api_h_ui_asset(struct api_req *r)
{
	return ui_serve(r, api_param(r));
}

enum core_rc api_h_whoami(struct api_req *r)
{
	static const struct {
		unsigned bit;
		const char *name;
	} roles[] = {{API_ROLE_WORKER, "worker"}, {API_ROLE_BOT, "bot"},
		     {API_ROLE_OPERATOR, "operator"}};
	json_t *rl = json_array(), *bl = json_array(), *cl = json_array();
	size_t i;
	bool ok = rl && bl && cl;

	for (i = 0; ok && i < sizeof roles / sizeof roles[0]; i++)
		if (r->tok->roles & roles[i].bit)
			ok = json_array_append_new(rl, json_string(roles[i].name)) == 0;
	if (ok && r->tok->all_boards)
		ok = json_array_append_new(bl, json_string("*")) == 0;
	for (i = 0; ok && !r->tok->all_boards && i < r->tok->n_boards; i++)
		ok = json_array_append_new(bl, json_string(r->tok->boards[i])) == 0;
	for (i = 0; ok && i < 32; i++)
		if ((r->tok->caps & (1u << i)) && api_cap_name(1u << i))
			ok = json_array_append_new(cl, json_string(api_cap_name(1u << i))) == 0;
	if (!ok) {
		json_decref(rl);
		json_decref(bl);
		json_decref(cl);
		return CORE_ERR_NOMEM;
	}
	return api_reply(r, 200, json_pack("{s:s, s:o, s:o, s:o}", "name", r->tok->name, "roles",
					   rl, "boards", bl, "caps", cl));
}
