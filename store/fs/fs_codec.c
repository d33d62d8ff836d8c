/* The FS twin's binary record: its layout, and how a change (a journal record, or a chunk of
 * a snapshot) is written; fs_decode.c reads it back. It replaced JSON on the write path
 * because parsing JSON dominated recovery (3.9 s for a 56 MB snapshot, mostly jansson and
 * malloc churn) and encoding it a good part of every commit; the old JSON lines and
 * snapshot.json are still read.
 *
 * Framing (all integers little-endian):
 *   [0]      FS_REC_MAGIC (0xFB: never the first byte of a JSON line, which is a hex digit)
 *   [1]      format version (1)
 *   [2..3]   record kind (FS_REC_CHANGE, FS_REC_SNAP_END)
 *   [4..7]   payload length
 *   [8..11]  CRC-32 of the payload
 *   [12..15] CRC-32 of bytes 0..11, so a damaged length is detected, never followed
 * A torn write leaves a prefix of a record; a complete header whose CRC fails is damage.
 *
 * Payload of a change: counters (i64 seq, u64 card, run, ord), then u32-counted arrays of
 * cards ({str id, u64 ord, u8 present, card}), runs, boards and events. A string is u32 length
 * + bytes (0xFFFFFFFF: NULL). FS_REC_CHANGE2 adds the claim's
 * holder after its marker, a run's claim_epoch after its owner, and three kinds of card
 * entry: present 2 = deleted, i64 epoch floor; 3 = claim only (u8 flags, str marker, str
 * holder, i64 claimed_at, lease_until, lease_ms, claim_epoch, updated_at); 4 = epoch floor
 * only (a snapshot's), i64. FS_REC_CHANGE3 adds each event's
 * i64 board_seq after its seq, always counts the effect records, and ends with the boards'
 * counters (u32 count, {str board, i64 last}: a snapshot's; none in a journal line).
 * FS_REC_CHANGE4 (DESIGN §17; what this version writes) adds a claim's str from after its
 * holder (in a card record and a claim-only entry), card flag 64 with i64 not_before and
 * i64 attempts after the priority, column flag 4 with u32 limit after the column's flag
 * byte, and after a board's `waiting` a u8 (1: u32 max_claims follows; 2: retry follows:
 * u32 max_attempts, i64 backoff_ms, i64 max_backoff_ms).
 * Decoding checks every length against what is left, so arbitrary
 * bytes with a valid CRC still decode to an error, never to a read out of bounds. */
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_map.h"

#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

struct wbuf {
	unsigned char *p;
	size_t n, cap;
	bool oom;
};

static void w_room(struct wbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 1024;
	unsigned char *np;

	if (b->oom || b->n + more <= b->cap)
		return;
	while (cap < b->n + more)
		cap *= 2;
	np = realloc(b->p, cap);
	if (!np) {
		b->oom = true;
		return;
	}
	b->p = np;
	b->cap = cap;
}

static void w_bytes(struct wbuf *b, const void *v, size_t n)
{
	w_room(b, n);
	if (b->oom)
		return;
	memcpy(b->p + b->n, v, n);
	b->n += n;
}

static void w_u8(struct wbuf *b, unsigned v)
{
	unsigned char c = (unsigned char)v;

	w_bytes(b, &c, 1);
}

static void put_u32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

/* A number's n bytes straight into the buffer when it has room (a record is mostly numbers:
 * ~15 a claim cycle's write; n is a constant, the copy one store), through w_bytes only to
 * grow it. */
static inline void w_fixed(struct wbuf *b, const unsigned char *c, size_t n)
{
	if (b->n + n <= b->cap) {
		memcpy(b->p + b->n, c, n);
		b->n += n;
		return;
	}
	w_bytes(b, c, n);
}

static void w_u32(struct wbuf *b, uint32_t v)
{
	unsigned char c[4];

	put_u32(c, v);
	w_fixed(b, c, 4);
}

static void w_u64(struct wbuf *b, uint64_t v)
{
	unsigned char c[8];
	int i;

	for (i = 0; i < 8; i++)
		c[i] = (unsigned char)(v >> (8 * i));
	w_fixed(b, c, 8);
}

static void w_i64(struct wbuf *b, int64_t v)
{
	w_u64(b, (uint64_t)v);
}

static void w_str(struct wbuf *b, const char *s)
{
	size_t n;

	if (!s) {
		w_u32(b, FS_REC_STR_NULL);
		return;
	}
	n = strlen(s);
	if (n >= FS_REC_STR_NULL) {
		b->oom = true;
		return;
	}
	w_u32(b, (uint32_t)n);
	w_bytes(b, s, n);
}

static void w_strv(struct wbuf *b, const struct core_strv *sv)
{
	size_t i;

	w_u32(b, (uint32_t)sv->n);
	for (i = 0; i < sv->n; i++)
		w_str(b, sv->v[i]);
}

/* A card's claim fields, in the order a card record and a claim-only entry both carry them
 * (after their flag byte). */
static void w_claim(struct wbuf *b, const struct core_card *c)
{
	w_str(b, c->claim.marker);
	w_str(b, c->claim.holder);
	w_str(b, c->claim.from);
	w_i64(b, c->claim.claimed_at);
	w_i64(b, c->claim.lease_until);
	w_i64(b, c->claim.lease_ms);
	w_i64(b, c->claim_epoch);
}

static void w_card(struct wbuf *b, const struct core_card *c)
{
	size_t i;

	w_str(b, c->id);
	w_str(b, c->board);
	w_str(b, c->title);
	w_str(b, c->body);
	w_str(b, c->state);
	w_strv(b, &c->labels);
	w_strv(b, &c->blockers);
	w_u32(b, (uint32_t)c->n_comments);
	for (i = 0; i < c->n_comments; i++) {
		w_str(b, c->comments[i].id);
		w_str(b, c->comments[i].author);
		w_str(b, c->comments[i].body);
		w_i64(b, c->comments[i].created_at);
	}
	w_u8(b, (c->claim.present ? 1u : 0u) | (c->claim.has_lease ? 2u : 0u) |
			(c->has_epoch ? 4u : 0u) | (c->awaiting_input ? 8u : 0u) |
			(c->gave_up.set ? 16u : 0u) | (c->priority ? 32u : 0u) |
			(c->not_before || c->attempts ? 64u : 0u));
	w_claim(b, c);
	w_str(b, c->last_run_id);
	w_str(b, c->gave_up.reason);
	w_str(b, c->gave_up.run_id);
	w_str(b, c->gave_up.state);
	w_i64(b, c->gave_up.at);
	w_str(b, c->state_reason);
	w_i64(b, c->created_at);
	w_i64(b, c->updated_at);
	w_i64(b, c->state_at);
	if (c->priority) /* flag 32: written only when set, so older records read the same */
		w_i64(b, c->priority);
	if (c->not_before || c->attempts) { /* flag 64 (DESIGN §17), likewise */
		w_i64(b, c->not_before);
		w_i64(b, c->attempts);
	}
}

static void w_run(struct wbuf *b, const struct core_run *r)
{
	w_str(b, r->id);
	w_str(b, r->card_id);
	w_str(b, r->board);
	w_str(b, r->status);
	w_str(b, r->continuation);
	w_str(b, r->failure_code);
	w_str(b, r->owner);
	w_i64(b, r->claim_epoch);
	w_i64(b, r->lock_until);
	w_i64(b, r->lease_ms);
	w_i64(b, r->created_at);
	w_i64(b, r->updated_at);
	/* bit 0: pruned; bit 1: result and error follow (DESIGN §12; absent in older records);
	 * bit 2: output follows (DESIGN §20; likewise) */
	w_u8(b, (r->pruned ? 1u : 0u) | (r->result || r->error ? 2u : 0u) |
			(r->output ? 4u : 0u));
	if (r->result || r->error) {
		w_str(b, r->result);
		w_str(b, r->error);
	}
	if (r->output)
		w_str(b, r->output);
}

static void w_board(struct wbuf *b, const struct core_board *bd)
{
	size_t i;

	w_str(b, bd->name);
	w_u32(b, (uint32_t)bd->n_cols);
	for (i = 0; i < bd->n_cols; i++) {
		w_str(b, bd->cols[i].name);
		w_u8(b, (bd->cols[i].terminal ? 1u : 0u) | (bd->cols[i].eligible ? 2u : 0u) |
				(bd->cols[i].limit > 0 ? 4u : 0u));
		if (bd->cols[i].limit > 0)
			w_u32(b, (uint32_t)bd->cols[i].limit);
	}
	w_str(b, bd->running);
	w_str(b, bd->completed);
	w_str(b, bd->failed);
	w_str(b, bd->waiting);
	/* DESIGN §17: the board's own policy */
	w_u8(b, (bd->max_claims > 0 ? 1u : 0u) | (bd->has_retry ? 2u : 0u));
	if (bd->max_claims > 0)
		w_u32(b, (uint32_t)bd->max_claims);
	if (bd->has_retry) {
		w_u32(b, (uint32_t)bd->retry.max_attempts);
		w_i64(b, bd->retry.backoff_ms);
		w_i64(b, bd->retry.max_backoff_ms);
	}
}

static void w_event(struct wbuf *b, const struct core_event *e)
{
	w_i64(b, e->seq);
	w_i64(b, e->board_seq);
	w_i64(b, e->at);
	w_str(b, e->board);
	w_u32(b, (uint32_t)e->type);
	w_str(b, e->card_id);
	w_str(b, e->actor);
	w_str(b, e->reason);
	w_u8(b, e->machine);
	w_str(b, e->payload);
}

/* The effect records ride after the events (counted, 0 included), then the boards'
 * counters (a snapshot's; 0 in a journal line, whose events carry their board_seq). */
static void w_kvs(struct wbuf *b, const struct fs_kv *kvs, size_t n)
{
	size_t i;

	w_u32(b, (uint32_t)n);
	for (i = 0; i < n; i++) {
		w_str(b, kvs[i].key);
		w_str(b, kvs[i].val);
		w_i64(b, kvs[i].due);
	}
}

static void w_bctrs(struct wbuf *b, const struct fs_bctr *v, size_t n)
{
	size_t i;

	w_u32(b, (uint32_t)n);
	for (i = 0; i < n; i++) {
		w_str(b, v[i].board);
		w_i64(b, v[i].last);
	}
}

static void w_begin(struct wbuf *b)
{
	w_room(b, FS_REC_HDR);
	if (!b->oom)
		b->n = FS_REC_HDR; /* filled by w_finish */
}

/* Frames the payload written after w_begin; returns the record (caller frees) or NULL. */
static char *w_finish(struct wbuf *b, unsigned kind, size_t *len)
{
	size_t plen = b->n - FS_REC_HDR;

	if (b->oom || plen >= FS_REC_STR_NULL) {
		free(b->p);
		return NULL;
	}
	b->p[0] = FS_REC_MAGIC;
	b->p[1] = 1;
	if (kind == FS_REC_CHANGE)
		kind = FS_REC_CHANGE4; /* this version writes only the fourth layout */
	b->p[2] = (unsigned char)kind;
	b->p[3] = (unsigned char)(kind >> 8);
	put_u32(b->p + 4, (uint32_t)plen);
	put_u32(b->p + 8, fs_crc32(b->p + FS_REC_HDR, plen));
	put_u32(b->p + 12, fs_crc32(b->p, 12));
	*len = b->n;
	return (char *)b->p;
}

static void w_counters(struct wbuf *b, const struct fs_counters *c)
{
	w_i64(b, c->seq);
	w_u64(b, c->card);
	w_u64(b, c->run);
	w_u64(b, c->ord);
}

/* A claim-only entry: the claim fields alone, whatever the size of the card. */
static void w_claim_patch(struct wbuf *b, const struct core_card *c)
{
	w_u8(b, (c->claim.present ? 1u : 0u) | (c->claim.has_lease ? 2u : 0u) |
			(c->has_epoch ? 4u : 0u));
	w_claim(b, c);
	w_i64(b, c->updated_at);
}

static void w_change_card(struct wbuf *b, const struct fs_change_card *cc)
{
	w_str(b, cc->id);
	w_u64(b, cc->ord);
	if (cc->card && cc->claim_only && !cc->is_new) {
		w_u8(b, 3);
		w_claim_patch(b, cc->card);
	} else if (cc->card) {
		w_u8(b, 1);
		w_card(b, cc->card);
	} else if (cc->floor > 0) {
		w_u8(b, cc->floor_only ? 4 : 2);
		w_i64(b, cc->floor);
	} else {
		w_u8(b, 0);
	}
}

char *fs_change_encode(const struct fs_change *ch, size_t *len)
{
	char *buf = NULL;
	size_t cap = 0;

	return fs_change_encode_in(ch, &buf, &cap, len);
}

char *fs_change_encode_in(const struct fs_change *ch, char **buf, size_t *cap, size_t *len)
{
	struct wbuf b = {.p = (unsigned char *)*buf, .cap = *buf ? *cap : 0};
	size_t i;

	w_begin(&b);
	w_counters(&b, &ch->ctr);
	w_u32(&b, (uint32_t)ch->n_cards);
	for (i = 0; i < ch->n_cards; i++)
		w_change_card(&b, &ch->cards[i]);
	w_u32(&b, (uint32_t)ch->n_runs);
	for (i = 0; i < ch->n_runs; i++)
		w_run(&b, ch->runs[i]);
	w_u32(&b, (uint32_t)ch->n_boards);
	for (i = 0; i < ch->n_boards; i++)
		w_board(&b, &ch->boards[i]);
	w_u32(&b, (uint32_t)ch->n_events);
	for (i = 0; i < ch->n_events; i++)
		w_event(&b, ch->events[i]);
	w_kvs(&b, ch->kvs, ch->n_kvs);
	w_bctrs(&b, ch->bctrs, ch->n_bctrs);
	*buf = w_finish(&b, FS_REC_CHANGE, len);
	*cap = *buf ? b.cap : 0;
	return *buf;
}

char *fs_snap_chunk_encode(const struct fs_counters *ctr, const struct core_board *boards,
			   size_t n_boards, const struct fs_card *const *cards,
			   const uint64_t *ords, size_t n_cards, const struct core_run *const *runs,
			   size_t n_runs, const struct core_event *const *events, size_t n_events,
			   const struct fs_snap_floor *floors, size_t n_floors,
			   const struct fs_bctr *bctrs, size_t n_bctrs,
			   const struct fs_kv *kvs, size_t n_kvs, size_t *len)
{
	struct wbuf b = {0};
	size_t i;

	w_begin(&b);
	w_counters(&b, ctr);
	w_u32(&b, (uint32_t)(n_cards + n_floors));
	for (i = 0; i < n_cards; i++) {
		struct core_card v;

		w_str(&b, cards[i]->id);
		w_u64(&b, ords[i]);
		w_u8(&b, 1);
		w_card(&b, fs_card_view(cards[i], &v));
	}
	for (i = 0; i < n_floors; i++) {
		w_str(&b, floors[i].id);
		w_u64(&b, 0);
		w_u8(&b, 4);
		w_i64(&b, floors[i].epoch);
	}
	w_u32(&b, (uint32_t)n_runs);
	for (i = 0; i < n_runs; i++)
		w_run(&b, runs[i]);
	w_u32(&b, (uint32_t)n_boards);
	for (i = 0; i < n_boards; i++)
		w_board(&b, &boards[i]);
	w_u32(&b, (uint32_t)n_events);
	for (i = 0; i < n_events; i++)
		w_event(&b, events[i]);
	w_kvs(&b, kvs, n_kvs);
	w_bctrs(&b, bctrs, n_bctrs);
	return w_finish(&b, FS_REC_CHANGE, len);
}

char *fs_snap_end_encode(uint64_t gen, const struct fs_counters *ctr, uint64_t n_records,
			 size_t *len)
{
	struct wbuf b = {0};

	w_begin(&b);
	w_u64(&b, gen);
	w_counters(&b, ctr);
	w_u64(&b, n_records);
	return w_finish(&b, FS_REC_SNAP_END, len);
}
