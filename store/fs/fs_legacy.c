/* The JSON formats of earlier versions, still read so that their directories open: journal
 * lines "<crc32 as 8 hex> <json change>\n" and the single-document snapshot.json
 *   {"version":1,"gen":G,"ctr":{seq,card,run,ord},"boards":[..],
 *    "cards":[{"id","ord","card":{..}|null}],"runs":[..],"events":[..]}
 * (a journal line has the same keys without version and gen). Nothing writes them any more:
 * fs_codec.c is the format now. */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends v to a pointer array; false on OOM (v not taken). */
static bool ptr_push(void *arrp, size_t *n, size_t *cap, void *v)
{
	if (fs_ptrs_reserve(arrp, cap, *n + 1) != CORE_OK)
		return false;
	(*(void ***)arrp)[(*n)++] = v;
	return true;
}

static bool counters_from(const json_t *o, struct fs_counters *c)
{
	json_int_t seq, card, run, ord;

	if (json_unpack((json_t *)o, "{sIsIsIsI}", "seq", &seq, "card", &card, "run", &run, "ord",
			&ord))
		return false;
	c->seq = seq;
	c->card = (uint64_t)card;
	c->run = (uint64_t)run;
	c->ord = (uint64_t)ord;
	return true;
}

static bool decode_cards(const json_t *a, struct fs_change *ch)
{
	const json_t *v;
	size_t i;

	if (!json_is_array(a))
		return false;
	ch->cap_cards = json_array_size(a) + 1;
	ch->cards = calloc(ch->cap_cards, sizeof(*ch->cards));
	if (!ch->cards)
		return false;
	json_array_foreach(a, i, v)
	{
		struct fs_change_card *cc = &ch->cards[ch->n_cards];
		const json_t *doc = json_object_get(v, "card");
		json_int_t ord;
		const char *id;

		if (json_unpack((json_t *)v, "{sssI}", "id", &id, "ord", &ord) || !doc)
			return false;
		ch->n_cards++;
		cc->ord = (uint64_t)ord;
		cc->id = strdup(id);
		if (!cc->id || (!json_is_null(doc) && store_card_from_json(doc, &cc->card)))
			return false;
	}
	return true;
}

enum core_rc fs_change_decode(const char *json, size_t len, struct fs_change *ch)
{
	json_t *o = json_loadb(json, len, 0, NULL);
	enum core_rc rc = fs_change_from_json(o, ch);

	json_decref(o);
	return rc;
}

enum core_rc fs_change_from_json(const json_t *o, struct fs_change *ch)
{
	const json_t *v;
	size_t i;
	bool ok;

	memset(ch, 0, sizeof(*ch));
	ok = json_is_object(o) && counters_from(json_object_get(o, "ctr"), &ch->ctr) &&
	     decode_cards(json_object_get(o, "cards"), ch) &&
	     json_is_array(json_object_get(o, "runs")) &&
	     json_is_array(json_object_get(o, "boards")) &&
	     json_is_array(json_object_get(o, "events"));
	json_array_foreach(ok ? json_object_get(o, "runs") : NULL, i, v)
	{
		struct core_run *r = NULL;

		if (store_run_from_json(v, &r) ||
		    !ptr_push(&ch->runs, &ch->n_runs, &ch->cap_runs, r)) {
			core_run_free(r);
			ok = false;
			break;
		}
	}
	if (ok && json_array_size(json_object_get(o, "boards"))) {
		ch->boards = calloc(json_array_size(json_object_get(o, "boards")),
				    sizeof(*ch->boards));
		ok = ch->boards != NULL;
	}
	json_array_foreach(ok ? json_object_get(o, "boards") : NULL, i, v)
	{
		if (store_board_from_json(v, &ch->boards[i])) {
			ok = false;
			break;
		}
		ch->n_boards++;
	}
	json_array_foreach(ok ? json_object_get(o, "events") : NULL, i, v)
	{
		struct core_event *e = calloc(1, sizeof(*e));

		if (!e || store_event_from_json(v, e) ||
		    !ptr_push(&ch->events, &ch->n_events, &ch->cap_events, e)) {
			free(e);
			ok = false;
			break;
		}
	}
	if (!ok) {
		fs_change_release(ch);
		return CORE_ERR_BAD_REQUEST;
	}
	return CORE_OK;
}

/* ---- journal lines ---- */

/* Checks "<8 hex> <json>" and decodes it; false when the line is corrupt. */
bool fs_legacy_line_decode(const char *line, size_t len, struct fs_change *ch)
{
	char hex[9];
	char *end;
	unsigned long crc;

	if (len < 11 || line[8] != ' ')
		return false;
	memcpy(hex, line, 8);
	hex[8] = '\0';
	crc = strtoul(hex, &end, 16);
	if (*end || (uint32_t)crc != fs_crc32(line + 9, len - 9))
		return false;
	return fs_change_decode(line + 9, len - 9, ch) == CORE_OK;
}

/* ---- snapshot.json ---- */

/* snapshot.json of earlier versions: one JSON document (read when there is no .bin). */
enum core_rc fs_legacy_snapshot_load(struct fs *fs, const char *path, char *err,
				     size_t errlen)
{
	struct fs_change ch;
	json_error_t jerr;
	json_t *o;
	json_int_t version = 0, gen = 0;
	enum core_rc rc = CORE_OK;

	o = json_load_file(path, 0, &jerr);
	if (!o) {
		snprintf(err, errlen, "snapshot %s is unreadable: %s (line %d); refusing to open",
			 path, jerr.text, jerr.line);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	if (json_unpack(o, "{sIsI}", "version", &version, "gen", &gen) || version != 1 ||
	    gen < 1 || fs_change_from_json(o, &ch) != CORE_OK) {
		snprintf(err, errlen, "snapshot %s is not a boardd v1 snapshot; refusing to open",
			 path);
		rc = CORE_ERR_STORE_UNAVAILABLE;
		goto out;
	}
	rc = fs_change_reserve(fs, &ch);
	if (rc != CORE_OK) {
		fs_change_release(&ch);
		snprintf(err, errlen, "out of memory loading %s", path);
		goto out;
	}
	fs_change_apply(fs, &ch, NULL);
	fs->gen = (uint64_t)gen;
out:
	json_decref(o);
	return rc;
}
