/* Effects (DESIGN §14): which subscriptions an event fires, the one-shot label consumption,
 * and what a delivery attempt's answer means. Pure: time and randomness are arguments. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dim_names[] = {
#define CORE_SUB_NAME(id, name, doc) [id] = name,
	CORE_SUB_DIMENSIONS(CORE_SUB_NAME)
#undef CORE_SUB_NAME
};

static const char *const dim_docs[] = {
#define CORE_SUB_DOC(id, name, doc) [id] = doc,
	CORE_SUB_DIMENSIONS(CORE_SUB_DOC)
#undef CORE_SUB_DOC
};

static const char *const default_types[] = {CORE_SUB_DEFAULT_TYPES};

const char *core_sub_dimension_name(enum core_sub_dimension d)
{
	return (int)d >= 0 && d < CORE_SUB_DIM_COUNT_ ? dim_names[d] : "unknown";
}

const char *core_sub_dimension_doc(enum core_sub_dimension d)
{
	return (int)d >= 0 && d < CORE_SUB_DIM_COUNT_ ? dim_docs[d] : "";
}

void core_sub_filter_release(struct core_sub_filter *f)
{
	int d;

	for (d = 0; f && d < CORE_SUB_DIM_COUNT_; d++)
		core_strv_release(&f->dim[d]);
}

bool core_event_type_subscribable(int t)
{
	/* A delivery carries the card: board-level and run events have none to carry, and a
	 * deleted card has no effect left to fire. */
	return t >= 0 && t < CORE_EV_COUNT_ && t != CORE_EV_CARD_DELETED &&
	       strncmp(core_event_type_name((enum core_event_type)t), "card_", 5) == 0;
}

/* Is each value of dimension d well-formed? */
static bool dim_value_valid(enum core_sub_dimension d, const char *v)
{
	switch (d) {
	case CORE_SUB_TYPES:
		return core_event_type_subscribable(core_event_type_parse(v));
	case CORE_SUB_TO_STATES:
		return core_name_valid(v);
	case CORE_SUB_ALL_LABELS:
		return core_label_valid(v);
	case CORE_SUB_DIM_COUNT_:
		break;
	}
	return false;
}

enum core_rc core_sub_filter_validate(const struct core_sub_filter *f, char *detail,
				      size_t detail_len)
{
	int d;
	size_t i;

	for (d = 0; d < CORE_SUB_DIM_COUNT_; d++)
		for (i = 0; i < f->dim[d].n; i++)
			if (!f->dim[d].v[i] || !dim_value_valid(d, f->dim[d].v[i])) {
				snprintf(detail, detail_len, "on.%s: %s%s%s is not valid",
					 dim_names[d], f->dim[d].v[i] ? "\"" : "",
					 f->dim[d].v[i] ? f->dim[d].v[i] : "null",
					 f->dim[d].v[i] ? "\"" : "");
				return CORE_ERR_BAD_REQUEST;
			}
	return CORE_OK;
}

enum core_rc core_sub_filter_columns_check(const struct core_board *b,
					   const struct core_sub_filter *f, char *detail,
					   size_t detail_len)
{
	const struct core_strv *st = &f->dim[CORE_SUB_TO_STATES];
	size_t i, o = 0, bad = 0;

	for (i = 0; i < st->n; i++) {
		if (core_board_column(b, st->v[i]))
			continue;
		if (detail && o < detail_len)
			o += (size_t)snprintf(detail + o, detail_len - o, "%s%s",
					      bad ? ", " : "on.to_states: no column ", st->v[i]);
		bad++;
	}
	if (!bad)
		return CORE_OK;
	if (detail && o < detail_len)
		snprintf(detail + o, detail_len - o, " on board %s", b->name);
	return CORE_ERR_TRANSITION_REJECTED;
}

enum core_rc core_sub_filter_column_rename(struct core_sub_filter *f, const char *from,
					   const char *to, bool *changed)
{
	struct core_strv *st = &f->dim[CORE_SUB_TO_STATES];
	size_t i;

	*changed = false;
	for (i = 0; i < st->n; i++) {
		char *n;

		if (strcmp(st->v[i], from) != 0)
			continue;
		if (!(n = strdup(to)))
			return CORE_ERR_NOMEM;
		free(st->v[i]);
		st->v[i] = n;
		*changed = true;
	}
	if (*changed)
		core_strv_dedup(st);
	return CORE_OK;
}

/* Does dimension d hold for the event? An empty list is "any" (types: the default set). */
static bool dim_holds(enum core_sub_dimension d, const struct core_strv *want,
		      const struct core_effect_event *ev)
{
	const char *type = core_event_type_name(ev->type);
	size_t i;

	switch (d) {
	case CORE_SUB_TYPES:
		if (want->n == 0) {
			for (i = 0; i < sizeof default_types / sizeof default_types[0]; i++)
				if (strcmp(default_types[i], type) == 0)
					return true;
			return false;
		}
		return core_strv_contains(want, type);
	case CORE_SUB_TO_STATES:
		return want->n == 0 || (ev->to_state && core_strv_contains(want, ev->to_state));
	case CORE_SUB_ALL_LABELS:
		for (i = 0; i < want->n; i++)
			if (!core_strv_contains(ev->labels, want->v[i]))
				return false;
		return true;
	case CORE_SUB_DIM_COUNT_:
		break;
	}
	return false;
}

bool core_sub_matches(const struct core_sub_filter *f, const struct core_effect_event *ev)
{
	int d;

	/* A subscription is written for a person's or a bot's gesture: the watchdog's own
	 * decisions, a column rename, a migration flow to the audit tail and fire nothing. */
	if (ev->machine || !core_event_type_subscribable((int)ev->type))
		return false;
	for (d = 0; d < CORE_SUB_DIM_COUNT_; d++)
		if (!dim_holds(d, &f->dim[d], ev))
			return false;
	return true;
}

enum core_rc core_effect_consume(struct core_card *c, const struct core_strv *consume,
				 bool *changed)
{
	return core_labels_adjust(c, NULL, consume, changed);
}

/* Delay before the retry that follows a failed attempt n (1-based): Svix's schedule. */
static const int64_t retry_delay_ms[CORE_DELIVERY_ATTEMPTS - 1] = {
	5 * 1000LL,           /* after the first attempt */
	5 * 60 * 1000LL,      /* */
	30 * 60 * 1000LL,     /* */
	2 * 3600 * 1000LL,    /* */
	5 * 3600 * 1000LL,    /* */
	10 * 3600 * 1000LL,   /* before the last attempt */
};

enum core_delivery_verdict core_delivery_judge(int status, int attempt, int64_t now_ms,
					       double unit, int64_t retry_after_ms,
					       int64_t *next_at)
{
	int64_t delay;

	*next_at = 0;
	if (status >= 200 && status <= 299)
		return CORE_DELIVERY_DONE;
	if (status == 410)
		return CORE_DELIVERY_DISABLE;
	if (attempt < 1 || attempt >= CORE_DELIVERY_ATTEMPTS)
		return CORE_DELIVERY_DEAD;
	if (unit < 0 || unit >= 1)
		unit = 0.5;
	delay = retry_delay_ms[attempt - 1];
	delay = (int64_t)((double)delay * (0.9 + 0.2 * unit));
	if (retry_after_ms > delay)
		delay = retry_after_ms;
	*next_at = now_ms + delay;
	return CORE_DELIVERY_RETRY;
}
