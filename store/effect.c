/* Effects shared by both twins (DESIGN §14): the subscription and delivery codecs (one stored
 * form the FS journal and the Mongo documents both carry, one served form), the match a
 * mutation runs in its atomic step, and the delivery's request body. */
#include "store/store_twins.h"

#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
#define STORE_DLV_NAME(id, name) [id] = name,
	STORE_DELIVERY_STATUSES(STORE_DLV_NAME)
#undef STORE_DLV_NAME
};

const char *store_delivery_status_name(enum store_delivery_status s)
{
	return (int)s >= 0 && s < STORE_DELIVERY_STATUS_COUNT_ ? status_names[s] : "unknown";
}

int store_delivery_status_parse(const char *s)
{
	int i;

	for (i = 0; s && i < STORE_DELIVERY_STATUS_COUNT_; i++)
		if (strcmp(status_names[i], s) == 0)
			return i;
	return -1;
}

void store_sub_free(struct store_sub *s)
{
	if (!s)
		return;
	free(s->board);
	free(s->name);
	free(s->url);
	free(s->secret);
	core_sub_filter_release(&s->on);
	core_strv_release(&s->consume);
	free(s->disabled_reason);
	free(s);
}

void store_subs_free(struct store_sub **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		store_sub_free(v[i]);
	free(v);
}

struct store_sub *store_sub_dup(const struct store_sub *s)
{
	json_t *j = store_sub_to_json(s, true);
	struct store_sub *c = NULL;

	if (j && store_sub_from_json(j, &c) != CORE_OK)
		c = NULL;
	json_decref(j);
	return c;
}

struct store_sub *store_sub_put_merge(const struct store_sub *s, const struct store_sub *old,
				      const char *secret_if_new, int64_t now)
{
	struct store_sub *n = store_sub_dup(s);

	if (!n)
		return NULL;
	if (!s->secret) {
		free(n->secret);
		n->secret = strdup(old ? old->secret : secret_if_new);
		if (!n->secret) {
			store_sub_free(n);
			return NULL;
		}
	}
	free(n->disabled_reason);
	n->disabled_reason = NULL;
	n->created_at = old ? old->created_at : now;
	n->updated_at = now;
	return n;
}

void store_delivery_free(struct store_delivery *d)
{
	if (!d)
		return;
	free(d->id);
	free(d->board);
	free(d->sub);
	free(d->event_type);
	free(d->card_id);
	free(d->body);
	free(d->lease_owner);
	free(d->last_error);
	free(d);
}

void store_deliveries_free(struct store_delivery **v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		store_delivery_free(v[i]);
	free(v);
}

/* ---- codecs ---- */

static json_t *time_or_int(int64_t ms, bool stored)
{
	char buf[CORE_TIME_BUF];

	return stored ? json_integer(ms) : json_string(core_time_format(ms, buf));
}

json_t *store_sub_to_json(const struct store_sub *s, bool stored)
{
	json_t *o = json_object(), *on = json_object();
	bool ok = o && on;
	int d;

	for (d = 0; ok && d < CORE_SUB_DIM_COUNT_; d++)
		store_json_put(on, core_sub_dimension_name(d), store_json_strv(&s->on.dim[d]), &ok);
	if (ok) {
		store_json_put(o, "board", json_string(s->board), &ok);
		store_json_put(o, "name", json_string(s->name), &ok);
		store_json_put(o, "url", json_string(s->url), &ok);
		store_json_put(o, "on", on, &ok);
		on = NULL;
		store_json_put(o, "consume_labels", store_json_strv(&s->consume), &ok);
		store_json_put(o, "enabled", json_boolean(s->enabled), &ok);
		store_json_put(o, "disabled_reason", store_json_str_or_null(s->disabled_reason),
			       &ok);
		store_json_put(o, "created_at", time_or_int(s->created_at, stored), &ok);
		store_json_put(o, "updated_at", time_or_int(s->updated_at, stored), &ok);
		if (stored)
			store_json_put(o, "secret", store_json_str_or_null(s->secret), &ok);
	}
	json_decref(on);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static bool get_str(const json_t *o, const char *key, bool opt, char **dst)
{
	const json_t *v = json_object_get(o, key);

	*dst = NULL;
	if (!v || json_is_null(v))
		return opt;
	if (!json_is_string(v))
		return false;
	*dst = strdup(json_string_value(v));
	return *dst != NULL;
}

static bool get_int(const json_t *o, const char *key, int64_t *dst)
{
	const json_t *v = json_object_get(o, key);

	*dst = 0;
	if (!v)
		return true;
	if (!json_is_integer(v))
		return false;
	*dst = json_integer_value(v);
	return true;
}

enum core_rc store_sub_from_json(const json_t *j, struct store_sub **out)
{
	struct store_sub *s = calloc(1, sizeof(*s));
	const json_t *on = json_object_get(j, "on"), *en = json_object_get(j, "enabled");
	bool ok = s && json_is_object(j);
	int d;

	*out = NULL;
	ok = ok && get_str(j, "board", false, &s->board) && get_str(j, "name", false, &s->name) &&
	     get_str(j, "url", false, &s->url) && get_str(j, "secret", true, &s->secret) &&
	     get_str(j, "disabled_reason", true, &s->disabled_reason) &&
	     store_json_get_strv(j, "consume_labels", true, &s->consume) &&
	     get_int(j, "created_at", &s->created_at) && get_int(j, "updated_at", &s->updated_at) &&
	     (!on || json_is_object(on)) && (!en || json_is_boolean(en));
	for (d = 0; ok && on && d < CORE_SUB_DIM_COUNT_; d++)
		ok = store_json_get_strv(on, core_sub_dimension_name(d), true, &s->on.dim[d]);
	if (!ok) {
		store_sub_free(s);
		return s ? CORE_ERR_BAD_REQUEST : CORE_ERR_NOMEM;
	}
	s->enabled = !en || json_is_true(en);
	*out = s;
	return CORE_OK;
}

json_t *store_delivery_to_json(const struct store_delivery *d, bool stored)
{
	json_t *o = json_object(), *lease = NULL;
	bool ok = o != NULL;

	if (!ok)
		return NULL;
	store_json_put(o, "id", json_string(d->id), &ok);
	store_json_put(o, "board", json_string(d->board), &ok);
	store_json_put(o, "subscription", json_string(d->sub), &ok);
	store_json_put(o, "event_seq", json_integer(d->event_seq), &ok);
	store_json_put(o, "event_type", store_json_str_or_null(d->event_type), &ok);
	store_json_put(o, "card_id", store_json_str_or_null(d->card_id), &ok);
	store_json_put(o, "status", json_string(store_delivery_status_name(d->status)), &ok);
	store_json_put(o, "attempts", json_integer(d->attempts), &ok);
	store_json_put(o, "next_at",
		       d->status == STORE_DELIVERY_PENDING || stored
			       ? time_or_int(d->next_at, stored)
			       : json_null(),
		       &ok);
	store_json_put(o, "last_status",
		       d->last_status ? json_integer(d->last_status) : json_null(), &ok);
	store_json_put(o, "last_error", store_json_str_or_null(d->last_error), &ok);
	store_json_put(o, "created_at", time_or_int(d->created_at, stored), &ok);
	store_json_put(o, "updated_at", time_or_int(d->updated_at, stored), &ok);
	if (stored) {
		store_json_put(o, "body", store_json_str_or_null(d->body), &ok);
		store_json_put(o, "lease_owner", store_json_str_or_null(d->lease_owner), &ok);
		store_json_put(o, "lease_until", json_integer(d->lease_until), &ok);
		store_json_put(o, "lease_epoch", json_integer(d->lease_epoch), &ok);
	} else {
		if (d->lease_owner)
			lease = json_pack("{s:s, s:o}", "owner", d->lease_owner, "until",
					  time_or_int(d->lease_until, false));
		store_json_put(o, "lease", d->lease_owner ? lease : json_null(), &ok);
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

enum core_rc store_delivery_from_json(const json_t *j, struct store_delivery **out)
{
	struct store_delivery *d = calloc(1, sizeof(*d));
	char *status = NULL;
	int64_t attempts = 0, last_status = 0;
	int st = -1;
	bool ok = d && json_is_object(j);

	*out = NULL;
	ok = ok && get_str(j, "id", false, &d->id) && get_str(j, "board", false, &d->board) &&
	     get_str(j, "subscription", false, &d->sub) &&
	     get_str(j, "event_type", true, &d->event_type) &&
	     get_str(j, "card_id", true, &d->card_id) && get_str(j, "body", true, &d->body) &&
	     get_str(j, "lease_owner", true, &d->lease_owner) &&
	     get_str(j, "last_error", true, &d->last_error) &&
	     get_str(j, "status", false, &status) && get_int(j, "event_seq", &d->event_seq) &&
	     get_int(j, "attempts", &attempts) && get_int(j, "next_at", &d->next_at) &&
	     get_int(j, "lease_until", &d->lease_until) &&
	     get_int(j, "lease_epoch", &d->lease_epoch) &&
	     (json_is_null(json_object_get(j, "last_status")) ||
	      get_int(j, "last_status", &last_status)) &&
	     get_int(j, "created_at", &d->created_at) && get_int(j, "updated_at", &d->updated_at);
	if (ok)
		st = store_delivery_status_parse(status);
	free(status);
	if (!ok || st < 0 || attempts < 0 || attempts > 1000 || last_status < 0 ||
	    last_status > 999) {
		store_delivery_free(d);
		return d ? CORE_ERR_BAD_REQUEST : CORE_ERR_NOMEM;
	}
	d->status = (enum store_delivery_status)st;
	d->attempts = (int)attempts;
	d->last_status = (int)last_status;
	*out = d;
	return CORE_OK;
}

/* ---- matching ---- */

bool store_effect_match(const struct store_sub *s, enum core_event_type type, const char *reason,
			const char *to_state, const struct core_card *card)
{
	struct core_effect_event ev = {
		.type = type,
		.machine = core_is_machine_reason(reason),
		.to_state = to_state,
		.labels = card ? &card->labels : NULL,
	};

	if (!s->enabled)
		return false;
	if (!ev.to_state && type == CORE_EV_CARD_CREATED && card)
		ev.to_state = card->state;
	return core_sub_matches(&s->on, &ev);
}

void store_delivery_ekey(char *out, size_t cap, const struct core_event *e)
{
	snprintf(out, cap, "%s:%lld", e->board ? e->board : "", (long long)e->board_seq);
}

char *store_delivery_body(const struct core_event *e, const struct core_card *card)
{
	/* A subscription is a board's: its subscriber reads that board's sequence. */
	json_t *o = json_object(), *ej = store_event_to_json_as(e, true);
	json_t *cj = card ? store_card_to_json(card) : json_null();
	char *text = NULL;

	if (o && ej && cj && json_object_set_new(o, "type", json_string("board.event")) == 0 &&
	    json_object_set(o, "event", ej) == 0 && json_object_set(o, "card", cj) == 0)
		text = json_dumps(o, JSON_COMPACT);
	json_decref(cj);
	json_decref(ej);
	json_decref(o);
	return text;
}

struct store_delivery *store_delivery_new(const struct store_sub *s, const char *ekey,
					  int64_t seq, enum core_event_type type,
					  const char *card_id, char *body, int64_t now)
{
	struct store_delivery *d = calloc(1, sizeof(*d));
	size_t n = strlen(ekey) + strlen(s->name) + 2;

	if (!d || !body || !(d->id = malloc(n))) {
		free(body);
		store_delivery_free(d);
		return NULL;
	}
	snprintf(d->id, n, "%s.%s", ekey, s->name);
	d->body = body;
	d->board = strdup(s->board);
	d->sub = strdup(s->name);
	d->event_type = strdup(core_event_type_name(type));
	d->card_id = card_id ? strdup(card_id) : NULL;
	d->event_seq = seq;
	d->status = STORE_DELIVERY_PENDING;
	d->next_at = now;
	d->created_at = d->updated_at = now;
	if (!d->board || !d->sub || !d->event_type || (card_id && !d->card_id)) {
		store_delivery_free(d);
		return NULL;
	}
	return d;
}
