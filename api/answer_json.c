/* The hot answers written as text, without a jansson tree (each byte for byte what json_dumps
 * wrote of the json_pack tree its handler built before): a claim's token (POST claim), the
 * card with its token (claim-next) and a renewal (POST renew). Built from the store's text
 * writers (store_card_json_text, store_json_members_text). */
#include "api/api_answer.h"

#include <stdlib.h>
#include <string.h>

char *api_claim_json_text(const struct core_card *c, const struct core_token *t, bool fresh,
			  bool with_card, size_t *len)
{
	const struct core_claim *cl = &c->claim;
	char ca[CORE_TIME_BUF], lu[CORE_TIME_BUF], *tok, *card, *text;
	const struct store_json_member m[] = {
		{"marker", STORE_JSON_STR, t->marker ? t->marker : "", 0},
		{"epoch", STORE_JSON_INT, NULL, t->epoch},
		{"claimed_at", STORE_JSON_STR, core_time_format(cl->claimed_at, ca), 0},
		{"lease_until", STORE_JSON_STR, core_time_format(cl->lease_until, lu), 0},
		{"lease_ms", STORE_JSON_INT, NULL, cl->lease_ms},
		{"renew_after_ms", STORE_JSON_INT, NULL, cl->lease_ms / 3},
		{"fresh", STORE_JSON_BOOL, NULL, fresh},
	};
	size_t tlen = 0, clen = 0;

	tok = store_json_members_text(m, sizeof m / sizeof m[0], &tlen);
	if (!with_card || !tok) {
		*len = tlen;
		return tok;
	}
	card = store_card_json_text(c, &clen);
	{
		const struct store_json_member both[] = {
			{"card", STORE_JSON_RAW, card, 0},
			{"token", STORE_JSON_RAW, tok, 0},
		};

		text = card ? store_json_members_text(both, 2, len) : NULL;
	}
	free(card);
	free(tok);
	return text;
}

char *api_renew_json_text(const struct core_card *c, const char *marker, size_t *len)
{
	char lu[CORE_TIME_BUF];
	const struct store_json_member m[] = {
		{"marker", STORE_JSON_STR, marker ? marker : "", 0},
		{"epoch", STORE_JSON_INT, NULL, c->claim_epoch},
		{"lease_until", STORE_JSON_STR, core_time_format(c->claim.lease_until, lu), 0},
		{"lease_ms", STORE_JSON_INT, NULL, c->claim.lease_ms},
	};

	return store_json_members_text(m, sizeof m / sizeof m[0], len);
}
