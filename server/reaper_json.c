/* The reaper's status and a pass's stats as JSON (GET and POST /v1/reaper through the api's
 * hooks); a pass's stats carry finished_at, when it ended (DESIGN §21). */
#include "server/reaper_int.h"

json_t *server_reaper_stats_json(const struct server_reaper_stats *s)
{
	json_t *actions = json_object(), *j;
	char at[CORE_TIME_BUF];
	int i;

	if (!actions)
		return NULL;
	for (i = 0; i < CORE_STUCK_ACTION_COUNT_; i++)
		json_object_set_new(actions, core_stuck_action_name((enum core_stuck_action)i),
				    json_integer((json_int_t)s->actions[i]));
	j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:I}", "gate", s->gate ? "on" : "off",
		      "listed", (json_int_t)s->listed, "transferred", (json_int_t)s->transferred,
		      "skipped", (json_int_t)s->skipped, "errors", (json_int_t)s->errors,
		      "duration_ms", (json_int_t)s->duration_ms, "actions", actions, "repaired",
		      (json_int_t)s->repaired);
	if (j && s->finished_at_ms > 0)
		json_object_set_new(j, "finished_at",
				    json_string(core_time_format(s->finished_at_ms, at)));
	return j;
}

json_t *server_reaper_status_json(struct server_reaper *r)
{
	struct server_reaper_stats last;
	bool have;
	size_t passes;

	pthread_mutex_lock(&r->lock);
	last = r->last;
	have = r->have_last;
	passes = r->passes;
	pthread_mutex_unlock(&r->lock);
	return json_pack("{s:s, s:I, s:I, s:s, s:I, s:o}", "gate", r->cfg.gate ? "on" : "off",
			 "interval_ms", (json_int_t)r->cfg.interval_ms, "batch",
			 (json_int_t)r->cfg.batch, "marker", r->marker, "passes",
			 (json_int_t)passes, "last_pass",
			 have ? server_reaper_stats_json(&last) : json_null());
}

json_t *server_reaper_hook_status(void *ctx)
{
	return server_reaper_status_json(ctx);
}

enum core_rc server_reaper_hook_pass(void *ctx, json_t **out)
{
	struct server_reaper_stats s;
	enum core_rc rc = server_reaper_pass(ctx, &s);

	*out = NULL;
	if (rc != CORE_OK)
		return rc;
	*out = server_reaper_stats_json(&s);
	return *out ? CORE_OK : CORE_ERR_NOMEM;
}
