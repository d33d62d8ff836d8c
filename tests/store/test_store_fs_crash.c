/* FS twin only: recovery from what a crash, a bad disk or an older binary leaves behind. */
#include "tests/store/test_store_fs.h"
#include "tests/store/fs_fixture.h"
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct store_actor bot = {.name = "bot"};

static void create(struct store *st, const char *id)
{
	struct store_card_create in = {.id = id, .state = "ready"};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

static bool exists(struct store *st, const char *id)
{
	struct core_card *c = NULL;
	enum core_rc rc = store_card_get(st, id, &c);

	core_card_free(c);
	return rc == CORE_OK;
}

static void append(const char *path, const char *bytes, size_t len)
{
	int fd = open(path, O_WRONLY | O_APPEND);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
	close(fd);
}

/* Closes st and returns the path of the journal it was writing. */
static char *close_journal(struct store *st, const char *dir)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	store_close(st);
	return fx_journal_path(dir, s.generation);
}

static enum core_rc try_open(const char *dir, char *err, size_t len)
{
	struct store_fs_options o = {.dir = dir};
	struct store *st = NULL;
	enum core_rc rc = store_fs_open(&o, &st, err, len);

	if (st)
		store_close(st);
	return rc;
}

START_TEST(torn_last_line_is_cut)
{
	static const char torn[] = "0badc0de {\"ctr\":{\"seq\":9";
	char *dir = fx_tmpdir(), *j;
	struct store *st = fx_open(dir, 0, 0, NULL);
	long size;

	create(st, "a");
	create(st, "b");
	j = close_journal(st, dir);
	size = fx_file_size(j);
	append(j, torn, sizeof(torn) - 1); /* a crash mid-write: no newline */
	st = fx_open(dir, 0, 0, NULL);
	ck_assert(exists(st, "a"));
	ck_assert(exists(st, "b"));
	ck_assert_int_eq(fx_file_size(j), size); /* the torn bytes are gone */
	create(st, "c");
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert(exists(st, "c"));
	store_close(st);
	free(j);
	fx_rmdir(dir);
}
END_TEST

START_TEST(corrupt_last_line_is_cut)
{
	char *dir = fx_tmpdir(), *j;
	struct store *st = fx_open(dir, 0, 0, NULL);
	char *buf;
	long size, last;
	FILE *f;

	create(st, "a");
	j = close_journal(st, dir);
	size = fx_file_size(j);
	st = fx_open(dir, 0, 0, NULL);
	create(st, "b");
	store_close(st);
	/* Flip a byte inside the last complete line: its checksum no longer matches. */
	buf = calloc(1, (size_t)fx_file_size(j) + 1);
	f = fopen(j, "r+");
	ck_assert_ptr_nonnull(f);
	last = fx_file_size(j);
	ck_assert_int_eq(fread(buf, 1, (size_t)last, f), last);
	buf[size + 20] ^= 0x01;
	rewind(f);
	ck_assert_int_eq(fwrite(buf, 1, (size_t)last, f), last);
	fclose(f);
	free(buf);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert(exists(st, "a"));
	ck_assert(!exists(st, "b")); /* never acknowledged as far as the disk can prove */
	ck_assert_int_eq(fx_file_size(j), size);
	store_close(st);
	free(j);
	fx_rmdir(dir);
}
END_TEST

START_TEST(corrupt_middle_line_refuses)
{
	char *dir = fx_tmpdir(), *j, err[512];
	struct store *st = fx_open(dir, 0, 0, NULL);
	long size;
	int fd;
	char ch;

	create(st, "a");
	create(st, "b");
	create(st, "c");
	j = close_journal(st, dir);
	size = fx_file_size(j);
	/* Line 1 is the default board; damage a byte of line 1's JSON. */
	fd = open(j, O_RDWR);
	ck_assert_int_eq(pread(fd, &ch, 1, 30), 1);
	ch ^= 0x02;
	ck_assert_int_eq(pwrite(fd, &ch, 1, 30), 1);
	close(fd);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_msg(strstr(err, "corrupt journal line 1") != NULL, "err: %s", err);
	ck_assert_int_eq(fx_file_size(j), size); /* nothing was cut */
	free(j);
	fx_rmdir(dir);
}
END_TEST

START_TEST(missing_generation_refuses)
{
	char *dir = fx_tmpdir(), *j, *moved, *away, err[512];
	struct store *st = fx_open(dir, 0, 0, NULL);

	create(st, "a");
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	create(st, "b");
	j = close_journal(st, dir);
	moved = fx_journal_path(dir, 99);
	ck_assert_int_eq(rename(j, moved), 0);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_msg(strstr(err, "is missing") != NULL, "err: %s", err);
	/* The snapshot's own generation gone and none after it: refused as well (it opened,
	 * with the cards written since silently missing). */
	ck_assert_int_gt(asprintf(&away, "%s.journal", dir), 0); /* beside the directory */
	ck_assert_int_eq(rename(moved, away), 0);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_msg(strstr(err, "journal.2 is missing") && strstr(err, "generation 2"),
		      "err: %s", err);
	ck_assert_int_eq(rename(away, j), 0);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_OK);
	free(away);
	free(j);
	free(moved);
	fx_rmdir(dir);
}
END_TEST

START_TEST(corrupt_snapshot_refuses)
{
	char *dir = fx_tmpdir(), *snap, err[512];
	struct store *st = fx_open(dir, 0, 0, NULL);

	create(st, "a");
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	store_close(st);
	ck_assert_int_gt(asprintf(&snap, "%s/snapshot.bin", dir), 0);
	ck_assert_int_eq(truncate(snap, fx_file_size(snap) / 2), 0);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_msg(strstr(err, "snapshot") != NULL, "err: %s", err);
	free(snap);
	fx_rmdir(dir);
}
END_TEST

/* A binary record cut anywhere (inside its header or its payload) at the end of the last
 * generation is a write that never completed: cut, and the store opens. */
START_TEST(torn_binary_record_is_cut)
{
	char *dir = fx_tmpdir(), *j;
	struct store *st = fx_open(dir, 0, 0, NULL);
	long size, full;
	size_t cut[] = {5, 30};
	int k;

	create(st, "a");
	j = close_journal(st, dir);
	size = fx_file_size(j);
	for (k = 0; k < 2; k++) {
		st = fx_open(dir, 0, 0, NULL);
		create(st, "b");
		store_close(st);
		full = fx_file_size(j);
		ck_assert_int_gt(full - size, (long)cut[k]);
		ck_assert_int_eq(truncate(j, size + (long)cut[k]), 0);
		st = fx_open(dir, 0, 0, NULL);
		ck_assert(exists(st, "a"));
		ck_assert(!exists(st, "b"));
		ck_assert_int_eq(fx_file_size(j), size);
		store_close(st);
	}
	/* A damaged header is not a torn write: its length cannot be trusted, so the open is
	 * refused rather than cutting what might follow. */
	st = fx_open(dir, 0, 0, NULL);
	create(st, "b");
	store_close(st);
	full = fx_file_size(j);
	{
		int fd = open(j, O_RDWR);
		char ch;
		char err[512];

		ck_assert_int_eq(pread(fd, &ch, 1, size + 5), 1);
		ch ^= 0x40;
		ck_assert_int_eq(pwrite(fd, &ch, 1, size + 5), 1);
		close(fd);
		ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
		ck_assert_msg(strstr(err, "header is damaged") != NULL, "err: %s", err);
		ck_assert_int_eq(fx_file_size(j), full);
	}
	free(j);
	fx_rmdir(dir);
}
END_TEST

/* A whole, checksummed record this binary cannot read (a newer writer's kind, say) was
 * written completely and may have been acknowledged: refused even at the tail, never cut. */
START_TEST(unreadable_whole_last_record_refuses)
{
	char *dir = fx_tmpdir(), *j, *rec, err[512];
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct fs_counters ctr = {0};
	size_t len;
	long size;
	int fd;

	create(st, "a");
	j = close_journal(st, dir);
	rec = fs_snap_end_encode(1, &ctr, 1, &len); /* sound framing, not a journal kind */
	ck_assert_ptr_nonnull(rec);
	fd = open(j, O_WRONLY | O_APPEND);
	ck_assert_int_eq(write(fd, rec, len), (ssize_t)len);
	close(fd);
	free(rec);
	size = fx_file_size(j);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_msg(strstr(err, "this binary cannot read") != NULL, "err: %s", err);
	ck_assert_int_eq(fx_file_size(j), size); /* nothing was cut */
	free(j);
	fx_rmdir(dir);
}
END_TEST

/* A snapshot with a flipped byte anywhere is refused (every record is checksummed), and so is
 * one that lost its end record. */
START_TEST(damaged_snapshot_refuses)
{
	char *dir = fx_tmpdir(), *snap, err[512], id[16];
	struct store *st = fx_open(dir, 0, 0, NULL);
	long size, at;
	int fd, i;
	char ch;

	for (i = 0; i < 20; i++) {
		snprintf(id, sizeof(id), "s%d", i);
		create(st, id);
	}
	ck_assert_int_eq(store_fs_compact(st), CORE_OK);
	store_close(st);
	ck_assert_int_gt(asprintf(&snap, "%s/snapshot.bin", dir), 0);
	size = fx_file_size(snap);
	for (at = 3; at < size; at += size / 7) {
		fd = open(snap, O_RDWR);
		ck_assert_int_eq(pread(fd, &ch, 1, at), 1);
		ch ^= 0x10;
		ck_assert_int_eq(pwrite(fd, &ch, 1, at), 1);
		ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
		ck_assert_msg(strstr(err, "snapshot") != NULL, "err: %s", err);
		ch ^= 0x10;
		ck_assert_int_eq(pwrite(fd, &ch, 1, at), 1);
		close(fd);
	}
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_OK);
	/* Without the end record (the last 16 + 48 bytes) the snapshot is incomplete. */
	ck_assert_int_eq(truncate(snap, size - 64), 0);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	free(snap);
	fx_rmdir(dir);
}
END_TEST

/* The decoder trusts no length: every byte of a real record's payload, damaged in turn (as
 * a record whose checksum was forged would be), decodes to a change or to BAD_REQUEST, and
 * ASan sees no read out of bounds. */
START_TEST(binary_decoder_survives_any_damage)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	const char *lv[] = {"l1", "l2"};
	struct core_strv labels = {.v = (char **)lv, .n = 2};
	struct store_card_create in = {.id = "d", .title = "t", .body = "b", .labels = &labels};
	struct fs_change ch = {0};
	struct core_card *c = NULL;
	const char *payload;
	unsigned kind, x;
	size_t len, plen, i;
	char *rec, *copy;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_comment_add(st, "d", "note", &bot, &c), CORE_OK);
	/* DESIGN §17's fields too: a claim taken from a column, a schedule, attempts. */
	c->not_before = 1234;
	c->attempts = 2;
	c->claim.present = true;
	c->claim.marker = strdup("m");
	c->claim.from = strdup("ready");
	ch.cards = calloc(1, sizeof(*ch.cards));
	ch.n_cards = ch.cap_cards = 1;
	ch.cards[0] = (struct fs_change_card){.id = strdup("d"), .card = c, .ord = 7};
	rec = fs_change_encode(&ch, &len);
	ck_assert_ptr_nonnull(rec);
	ck_assert_int_eq(fs_rec_check(rec, len, &kind, &payload, &plen), FS_REC_OK);
	ck_assert_uint_eq(kind, FS_REC_CHANGE4);
	fs_change_release(&ch);
	ck_assert_int_eq(fs_change_decode_bin(kind, payload, plen, NULL, &ch), CORE_OK);
	ck_assert_ptr_null(ch.cards[0].card); /* decoded whole: published form */
	ck_assert_str_eq(fs_card_more_of(ch.cards[0].pub)->comments[0].body, "note");
	ck_assert_int_eq(fs_card_more_of(ch.cards[0].pub)->not_before, 1234);
	ck_assert_int_eq(fs_card_more_of(ch.cards[0].pub)->attempts, 2);
	ck_assert_str_eq(fs_card_more_of(ch.cards[0].pub)->claim.from, "ready");
	fs_change_release(&ch);
	copy = malloc(plen);
	for (i = 0; i < plen; i++) {
		for (x = 1; x < 256; x <<= 1) {
			enum core_rc rc;

			memcpy(copy, payload, plen);
			copy[i] ^= (char)x;
			rc = fs_change_decode_bin(kind, copy, plen, NULL, &ch);
			ck_assert(rc == CORE_OK || rc == CORE_ERR_BAD_REQUEST);
			fs_change_release(&ch);
		}
		/* Cut short there, too. */
		ck_assert_int_eq(fs_change_decode_bin(kind, payload, i, NULL, &ch), CORE_ERR_BAD_REQUEST);
	}
	free(copy);
	free(rec);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A card with every field set, for the layout test below. */
static struct core_card *rich_card(void)
{
	struct core_card *c = core_card_new();

	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(core_str_set(&c->id, "rich"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->board, "default"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->title, "t"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->body, ""), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->state, "ready"), CORE_OK);
	ck_assert_int_eq(core_strv_push(&c->labels, "l1"), CORE_OK);
	ck_assert_int_eq(core_strv_push(&c->labels, "l2"), CORE_OK);
	ck_assert_int_eq(core_strv_push(&c->blockers, "b1"), CORE_OK);
	ck_assert_int_eq(core_comment_append(c, "alice", "hello", 5), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->claim.marker, "m"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->claim.holder, "h"), CORE_OK);
	c->claim = (struct core_claim){.marker = c->claim.marker, .holder = c->claim.holder,
				       .claimed_at = 1, .lease_until = 2, .lease_ms = 3,
				       .present = true, .has_lease = true};
	c->claim_epoch = 4;
	c->has_epoch = c->awaiting_input = true;
	ck_assert_int_eq(core_str_set(&c->last_run_id, "r1"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->state_reason, "why"), CORE_OK);
	c->gave_up.set = true;
	ck_assert_int_eq(core_str_set(&c->gave_up.reason, "x"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->gave_up.run_id, "r1"), CORE_OK);
	ck_assert_int_eq(core_str_set(&c->gave_up.state, "review"), CORE_OK);
	c->gave_up.at = 9;
	c->priority = -7;
	c->created_at = 10;
	c->updated_at = 11;
	c->state_at = 12;
	return c;
}

/* The published form (fs_flat.c) keeps every field: packed, viewed, copied and decoded from
 * a record, a card equals what it was; a card that sets none of the rare fields has no tail
 * and takes less memory than a core_card struct alone. */
START_TEST(published_card_keeps_every_field)
{
	struct fs_atoms atoms = {0};
	struct core_card *rich = rich_card(), *plain = core_card_new(), *dup, v;
	struct fs_change ch = {0};
	struct fs_card *p;
	const char *payload;
	unsigned kind;
	size_t len, plen;
	char *rec;

	ck_assert_ptr_nonnull(plain);
	ck_assert_int_eq(core_str_set(&plain->id, "plain"), CORE_OK);
	ck_assert_int_eq(core_str_set(&plain->board, "default"), CORE_OK);
	ck_assert_int_eq(core_str_set(&plain->title, "scale card"), CORE_OK);
	ck_assert_int_eq(core_str_set(&plain->body, ""), CORE_OK);
	ck_assert_int_eq(core_str_set(&plain->state, "ready"), CORE_OK);
	ck_assert_int_eq(core_strv_push(&plain->labels, "team-1"), CORE_OK);
	ck_assert_int_eq(core_strv_push(&plain->labels, "prio-2"), CORE_OK);
	plain->has_epoch = true;
	plain->created_at = plain->updated_at = plain->state_at = 20;

	p = fs_card_pack(&atoms, rich);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(p->more);
	ck_assert(fs_card_claimed(p));
	ck_assert(core_card_equal(rich, fs_card_view(p, &v)));
	ck_assert_str_eq(v.comments[0].author, "alice");
	dup = fs_card_dup(p);
	fs_card_free(p); /* the copy borrows nothing from it (ASan would see) */
	ck_assert(dup && !dup->flat && dup->one_block && core_card_equal(rich, dup));
	{
		/* An answer is one block: everything it points to but the shared empty string
		 * lies inside it. A copy of it is an ordinary card again, free to change. */
		struct core_card *again = core_card_dup(dup);
		const char *lo = (const char *)dup, *hi = lo + malloc_usable_size(dup);
		const char *in[] = {dup->id, dup->title, dup->claim.marker, dup->claim.holder,
				    dup->labels.v[1], dup->blockers.v[0], dup->comments[0].body,
				    (const char *)dup->comments, dup->gave_up.run_id,
				    dup->state_reason};

		for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
			ck_assert(in[i] > lo && in[i] < hi);
		ck_assert(again && !again->one_block && core_card_equal(rich, again));
		ck_assert_int_eq(core_str_set(&again->title, "changed"), CORE_OK);
		core_card_free(again);
	}
	core_card_free(dup);
	dup = fs_card_block(plain); /* no tail, an empty body */
	ck_assert(dup && dup->one_block && core_card_equal(plain, dup));
	core_card_free(dup);

	p = fs_card_pack(&atoms, plain);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_null(p->more);
	ck_assert(!fs_card_claimed(p));
	ck_assert(core_card_equal(plain, fs_card_view(p, &v)));
	ck_assert_ptr_eq(p->board, fs_atom(&atoms, "default", 7, false)); /* interned */
	ck_assert_uint_lt(malloc_usable_size(p), sizeof(struct core_card));
	fs_card_free(p);

	/* More interned fields than the packing walk remembers between its two passes, some
	 * too long to intern among them: every one still lands where it belongs. */
	{
		char label[FS_ATOM_LEN + 8];
		size_t i;

		for (i = 0; i < 40; i++) {
			memset(label, 'l', sizeof label - 1);
			label[sizeof label - 1] = '\0';
			if (i % 3)
				snprintf(label, sizeof label, "label-%zu", i);
			ck_assert_int_eq(core_strv_push(&plain->labels, label), CORE_OK);
		}
		p = fs_card_pack(&atoms, plain);
		ck_assert_ptr_nonnull(p);
		ck_assert(core_card_equal(plain, fs_card_view(p, &v)));
		for (i = 0; i < plain->labels.n; i++) {
			const char *at = fs_atom(&atoms, plain->labels.v[i], strlen(plain->labels.v[i]),
						 false);

			if (strlen(plain->labels.v[i]) < FS_ATOM_LEN)
				ck_assert_ptr_eq(p->labels.v[i], at);
			else
				ck_assert_ptr_null(at);
		}
		fs_card_free(p);
		while (plain->labels.n > 2)
			free(plain->labels.v[--plain->labels.n]);
	}

	/* What the decoder lays out equals the card encoded. */
	ch.cards = calloc(2, sizeof(*ch.cards));
	ck_assert_ptr_nonnull(ch.cards);
	ch.n_cards = ch.cap_cards = 2;
	ch.cards[0] = (struct fs_change_card){.id = strdup("rich"), .card = core_card_dup(rich)};
	ch.cards[1] = (struct fs_change_card){.id = strdup("plain"), .card = core_card_dup(plain),
					      .ord = 1};
	rec = fs_change_encode(&ch, &len);
	ck_assert_ptr_nonnull(rec);
	fs_change_release(&ch);
	ck_assert_int_eq(fs_rec_check(rec, len, &kind, &payload, &plen), FS_REC_OK);
	ck_assert_int_eq(fs_change_decode_bin(kind, payload, plen, &atoms, &ch), CORE_OK);
	ck_assert_uint_eq(ch.n_cards, 2);
	ck_assert(core_card_equal(rich, fs_card_view(ch.cards[0].pub, &v)));
	ck_assert(core_card_equal(plain, fs_card_view(ch.cards[1].pub, &v)));
	ck_assert_ptr_nonnull(ch.cards[0].pub->more);
	ck_assert_ptr_null(ch.cards[1].pub->more);
	/* A renew's card is the published block copied with new lease numbers (fs_card_reclaim),
	 * from a packed card and from a decoded one alike; it keeps nothing of the old block. */
	{
		struct fs_card *from[2] = {fs_card_pack(&atoms, rich), ch.cards[0].pub}, *q;
		bool nomem = true;
		int k;

		ck_assert_ptr_nonnull(from[0]);
		ch.cards[0].pub = NULL;
		rich->claim.lease_until = 777;
		rich->claim.lease_ms = 700;
		rich->claim.claimed_at = 70;
		rich->updated_at = 77;
		rich->claim_epoch = 5;
		for (k = 0; k < 2; k++) {
			q = fs_card_reclaim(from[k], rich, &nomem);
			ck_assert(q && !nomem);
			ck_assert_uint_eq(q->more->block_bytes, from[k]->more->block_bytes);
			fs_card_free(from[k]); /* ASan: q must not point into it */
			ck_assert(core_card_equal(rich, fs_card_view(q, &v)));
			ck_assert_str_eq(v.comments[0].body, "hello");
			ck_assert_str_eq(v.gave_up.state, "review");
			from[k] = q;
		}
		/* Another holder's marker is not a renew: the caller packs. */
		ck_assert_int_eq(core_str_set(&rich->claim.marker, "other"), CORE_OK);
		ck_assert_ptr_null(fs_card_reclaim(from[1], rich, &nomem));
		ck_assert(!nomem);
		fs_card_free(from[0]);
		fs_card_free(from[1]);
	}
	fs_change_release(&ch);
	free(rec);
	core_card_free(rich);
	core_card_free(plain);
	fs_atoms_release(&atoms);
}
END_TEST

/* The card id table (fs_ids): every id put is found, every id deleted is gone, whatever the
 * order of the deletes (backward-shift deletion keeps the probe runs whole), and the table
 * grows only on reserve. */
START_TEST(id_table_finds_what_it_holds)
{
	enum { N = 5000 };
	static struct fs_card cards[N];
	static struct fs_card_ent ents[N];
	static char ids[N][16];
	struct fs_ids t = {0};
	size_t i, k, cap;

	for (i = 0; i < N; i++) {
		snprintf(ids[i], sizeof ids[i], "c-%zu", i * 7919 % 100003);
		cards[i].id = ids[i];
		ents[i].card = &cards[i];
	}
	ck_assert_ptr_null(fs_ids_get(&t, "c-1"));
	ck_assert_ptr_null(fs_ids_del(&t, "c-1"));
	ck_assert_int_eq(fs_ids_reserve(&t, N), CORE_OK);
	cap = t.cap;
	ck_assert_uint_ge(cap, 2 * N);
	for (i = 0; i < N; i++)
		fs_ids_put_h(&t, &ents[i], fs_map_hash(ids[i]));
	ck_assert_uint_eq(t.n, N);
	ck_assert_int_eq(fs_ids_reserve(&t, 0), CORE_OK);
	ck_assert_uint_eq(t.cap, cap);
	for (i = 0; i < N; i++) {
		ck_assert_ptr_eq(fs_ids_get(&t, ids[i]), &ents[i]);
		ck_assert_ptr_eq(fs_ids_get_h(&t, ids[i], fs_map_hash(ids[i])), &ents[i]);
	}
	ck_assert_ptr_null(fs_ids_get(&t, "c-100004"));
	/* Delete two thirds in a scattered order, then check everything. */
	for (k = 0; k < N; k++) {
		i = k * 3001 % N;
		if (i % 3 != 0)
			ck_assert_ptr_eq(fs_ids_del(&t, ids[i]), &ents[i]);
	}
	for (i = 0; i < N; i++)
		ck_assert_ptr_eq(fs_ids_get(&t, ids[i]), i % 3 == 0 ? &ents[i] : NULL);
	ck_assert_uint_eq(t.n, (N + 2) / 3);
	/* Put back (the room is still there) and find them again. */
	for (i = 0; i < N; i++)
		if (i % 3 != 0)
			fs_ids_put(&t, &ents[i]);
	for (i = 0; i < N; i++)
		ck_assert_ptr_eq(fs_ids_get(&t, ids[i]), &ents[i]);
	fs_ids_release(&t);
}
END_TEST

/* A stray far generation (an operator's copy named by date, say) is a gap like any other:
 * refused at once, never walked number by number; a non-canonical name is not ours. */
START_TEST(far_generation_is_a_gap)
{
	char *dir = fx_tmpdir(), *p, err[512];
	struct store *st = fx_open(dir, 0, 0, NULL);
	int fd;

	create(st, "a");
	store_close(st);
	ck_assert_int_gt(asprintf(&p, "%s/journal.01", dir), 0);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "junk", 4), 4);
	close(fd);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_OK); /* ignored */
	ck_assert_int_eq(fx_file_size(p), 4);
	free(p);
	ck_assert_int_gt(asprintf(&p, "%s/journal.99999999999", dir), 0);
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_ERR_STORE_UNAVAILABLE);
	ck_assert_msg(strstr(err, "journal.2 is missing") != NULL, "err: %s", err);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(try_open(dir, err, sizeof(err)), CORE_OK);
	free(p);
	fx_rmdir(dir);
}
END_TEST

/* A snapshot whose counters lag behind its own data (an event seq 2 under ctr.seq 1) does
 * not hand a seq out twice: the counter is raised to what was loaded, and the next write's
 * event survives a restart. */
START_TEST(lagging_counters_are_raised)
{
	static const char snap[] =
		"{\"version\":1,\"gen\":1,\"ctr\":{\"seq\":1,\"card\":0,\"run\":0,\"ord\":0},"
		"\"boards\":[{\"name\":\"default\",\"columns\":["
		"{\"name\":\"ready\",\"terminal\":false,\"eligible\":true},"
		"{\"name\":\"done\",\"terminal\":true,\"eligible\":false}],"
		"\"running\":null,\"completed\":\"done\",\"failed\":null,\"waiting\":null}],"
		"\"cards\":[{\"id\":\"old\",\"ord\":5,\"card\":{\"id\":\"old\",\"board\":\"default\","
		"\"title\":\"\",\"body\":\"\",\"state\":\"ready\",\"labels\":[],\"blockers\":[],"
		"\"comments\":[],\"claim\":null,\"claim_epoch\":0,\"last_run_id\":null,"
		"\"awaiting_input\":false,\"gave_up\":null,\"state_reason\":null,"
		"\"created_at\":\"2026-01-01T00:00:00.000Z\",\"updated_at\":\"2026-01-01T00:00:00.000Z\","
		"\"state_at\":\"2026-01-01T00:00:00.000Z\"}}],\"runs\":[],"
		"\"events\":[{\"seq\":2,\"at\":\"2026-01-01T00:00:00.000Z\",\"board\":\"default\","
		"\"type\":\"board_updated\",\"card_id\":null,\"actor\":\"\",\"reason\":null,"
		"\"machine\":false,\"payload\":{\"created\":true}}]}\n";
	char *dir = fx_tmpdir(), *p;
	struct store *st;
	struct core_event *ev = NULL;
	struct store_card_filter f = {.claimed = -1, .limit = 10, .after = "5"};
	struct core_card **v = NULL;
	char *next = NULL;
	size_t n;
	int64_t nx;
	FILE *fp;

	ck_assert_int_gt(asprintf(&p, "%s/snapshot.json", dir), 0);
	fp = fopen(p, "w");
	ck_assert_ptr_nonnull(fp);
	ck_assert_int_ge(fputs(snap, fp), 0);
	ck_assert_int_eq(fclose(fp), 0);
	free(p);
	st = fx_open(dir, 0, 0, NULL);
	create(st, "a");
	store_close(st);
	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 10, 0, &ev, &n, &nx), CORE_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(ev[1].seq, 3);
	ck_assert_str_eq(ev[1].card_id, "a");
	store_events_free(ev, n);
	/* Its ordinal is past the snapshot's 5, so a cursor taken there still finds it. */
	ck_assert_int_eq(store_card_list(st, &f, &v, &n, &next), CORE_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0]->id, "a");
	store_cards_free(v, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

static void copy_file(const char *from, const char *to)
{
	char buf[8192];
	size_t n;
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");

	ck_assert_ptr_nonnull(in);
	ck_assert_ptr_nonnull(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
}

/* A directory written by the JSON version (tests/store/fixtures/fs-v1: snapshot.json at
 * generation 2 holding cards a, b and run r1, then journal.2 in JSON lines) opens as it was;
 * new writes append binary records to the same generation, the first compaction replaces
 * snapshot.json by snapshot.bin, and every state survives each step. */
START_TEST(json_directory_migrates)
{
	char *dir = fx_tmpdir(), *p;
	struct store *st;
	struct core_card *c = NULL;
	struct core_run *r = NULL;
	struct core_event *ev = NULL;
	size_t n, i, k;
	int64_t next;
	int round;

	ck_assert_int_gt(asprintf(&p, "%s/snapshot.json", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-v1/snapshot.json", p);
	free(p);
	ck_assert_int_gt(asprintf(&p, "%s/journal.2", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-v1/journal.2", p);
	free(p);
	for (round = 0; round < 3; round++) {
		st = fx_open(dir, 0, 0, "fixture");
		ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
		ck_assert_str_eq(c->title, "first");
		ck_assert_uint_eq(c->labels.n, 2);
		ck_assert_str_eq(c->labels.v[1], "team-a");
		ck_assert_uint_eq(c->n_comments, 1);
		ck_assert_str_eq(c->comments[0].body, "a comment");
		ck_assert(c->claim.present);
		ck_assert_str_eq(c->claim.marker, "w1");
		ck_assert_int_eq(c->claim_epoch, 1);
		ck_assert_str_eq(c->last_run_id, "r1");
		ck_assert(c->gave_up.set);
		ck_assert_str_eq(c->gave_up.reason, "stuck");
		core_card_free(c);
		ck_assert_int_eq(store_card_get(st, "b", &c), CORE_OK);
		ck_assert_str_eq(c->state, "waiting_deps");
		ck_assert_str_eq(c->blockers.v[0], "a");
		core_card_free(c);
		ck_assert_int_eq(store_card_get(st, "c", &c), CORE_ERR_NOT_FOUND);
		ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
		ck_assert_str_eq(r->owner, "w1");
		core_run_free(r);
		ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next),
				 CORE_OK);
		ck_assert_uint_ge(n, 10);
		ck_assert_int_eq(ev[9].seq, 10);
		ck_assert_str_eq(core_event_type_name(ev[9].type), "card_gave_up");
		/* The JSON version wrote no board_seq: derived in replay order, the same at
		 * every open, and continued by what this version writes. */
		for (i = 0, k = 0; i < n; i++)
			if (strcmp(ev[i].board, "default") == 0)
				ck_assert_int_eq(ev[i].board_seq, (int64_t)++k);
		ck_assert_uint_ge(k, 10);
		if (round > 0)
			ck_assert_str_eq(ev[n - 1].card_id, "new");
		store_events_free(ev, n);
		if (round == 0) {
			create(st, "new"); /* a binary record after the JSON lines */
		} else if (round == 1) {
			ck_assert(exists(st, "new"));
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
			ck_assert_int_gt(asprintf(&p, "%s/snapshot.json", dir), 0);
			ck_assert_int_eq(fx_file_size(p), -1);
			free(p);
		} else {
			ck_assert(exists(st, "new"));
		}
		store_close(st);
	}
	fx_rmdir(dir);
}
END_TEST

/* A directory written by the binary format before the cards were flat (tests/store/fixtures/
 * fs-v2, made by fixtures/fs-v2.c with main at 2c6ffd1: cards a, b, d and run r1 in
 * snapshot.bin, then journal.2 with a claim-only renewal of a, card c created, patched and
 * labelled, d deleted) opens with every field as it was written, its label and state lists
 * rebuilt; it stays so after a new write, a compaction by this version and reopens. */
START_TEST(binary_directory_loads)
{
	struct store_card_filter f = {.label = "team-a", .claimed = -1, .limit = 100};
	struct core_card *c = NULL, **cards = NULL;
	struct core_run *r = NULL;
	char *dir = fx_tmpdir(), *p, *next = NULL;
	struct store *st;
	size_t n;
	int round;

	ck_assert_int_gt(asprintf(&p, "%s/snapshot.bin", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-v2/snapshot.bin", p);
	free(p);
	ck_assert_int_gt(asprintf(&p, "%s/journal.2", dir), 0);
	copy_file(BOARDD_FIXTURES "/fs-v2/journal.2", p);
	free(p);
	for (round = 0; round < 3; round++) {
		st = fx_open(dir, 0, 0, "fixture");
		ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
		ck_assert_str_eq(c->title, "first");
		ck_assert_str_eq(c->body, "body of a");
		ck_assert_str_eq(c->board, "default");
		ck_assert_int_eq(c->priority, 5);
		ck_assert_uint_eq(c->labels.n, 2);
		ck_assert_str_eq(c->labels.v[0], "prio-1");
		ck_assert_str_eq(c->labels.v[1], "team-a");
		ck_assert_uint_eq(c->n_comments, 1);
		ck_assert_str_eq(c->comments[0].body, "a comment");
		ck_assert_str_eq(c->comments[0].author, "bot-1");
		ck_assert(c->claim.present && c->claim.has_lease && c->has_epoch);
		ck_assert_str_eq(c->claim.marker, "w1");
		ck_assert_str_eq(c->claim.holder, "tok-w1");
		ck_assert_int_eq(c->claim.lease_ms, 90000); /* the journal's claim-only renewal */
		ck_assert_int_eq(c->claim_epoch, 1);
		ck_assert_str_eq(c->last_run_id, "r1");
		ck_assert(!c->flat); /* a reader's copy is an ordinary card */
		core_card_free(c);
		ck_assert_int_eq(store_card_get(st, "b", &c), CORE_OK);
		ck_assert(!c->claim.present);
		ck_assert(c->gave_up.set);
		ck_assert_str_eq(c->gave_up.reason, "stuck");
		ck_assert_str_eq(c->gave_up.state, "backlog");
		core_card_free(c);
		ck_assert_int_eq(store_card_get(st, "c", &c), CORE_OK);
		ck_assert_str_eq(c->title, "third, renamed");
		ck_assert_uint_eq(c->blockers.n, 1);
		ck_assert_str_eq(c->blockers.v[0], "a");
		ck_assert_uint_eq(c->labels.n, 1);
		ck_assert_str_eq(c->labels.v[0], "team-c");
		core_card_free(c);
		ck_assert_int_eq(store_card_get(st, "d", &c), CORE_ERR_NOT_FOUND);
		ck_assert_int_eq(store_run_get(st, "r1", &r), CORE_OK);
		ck_assert_str_eq(r->status, "finished");
		ck_assert_str_eq(r->result, "{\"ok\":true}");
		core_run_free(r);
		ck_assert_int_eq(store_card_list(st, &f, &cards, &n, &next), CORE_OK);
		ck_assert_uint_eq(n, 2);
		ck_assert_str_eq(cards[0]->id, "a");
		ck_assert_str_eq(cards[1]->id, "b");
		store_cards_free(cards, n);
		free(next);
		next = NULL;
		if (round == 0)
			create(st, "new"); /* a record of this version after the old ones */
		else if (round == 1)
			ck_assert_int_eq(store_fs_compact(st), CORE_OK);
		ck_assert(round == 0 || exists(st, "new"));
		store_close(st);
	}
	fx_rmdir(dir);
}
END_TEST

/* A pid that existed and is gone. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* CRC-32 the bit-at-a-time way, straight from the polynomial: the reference both of
 * fs_crc32's implementations (carry-less multiplies, tables) must agree with. */
static uint32_t crc_bitwise(const unsigned char *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	int k;

	while (n--) {
		c ^= *p++;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xEDB88320u : c >> 1;
	}
	return ~c;
}

/* The checksum every record carries stays the one files were written with: known values,
 * and the fast path equal to the tables and to the bitwise reference at every length and
 * alignment around its 16- and 64-byte steps, and over a large buffer. */
START_TEST(crc32_vectors)
{
	static const char fox[] = "The quick brown fox jumps over the lazy dog";
	size_t big = 300000, len, off;
	unsigned char *buf = malloc(big + 16);
	uint32_t x = 12345;

	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fs_crc32("", 0), 0);
	ck_assert_uint_eq(fs_crc32("123456789", 9), 0xCBF43926u);
	ck_assert_uint_eq(fs_crc32_tables("123456789", 9), 0xCBF43926u);
	ck_assert_uint_eq(fs_crc32(fox, strlen(fox)), 0x414FA339u);
	for (len = 0; len < big + 16; len++) {
		x = x * 1103515245u + 12345u;
		buf[len] = (unsigned char)(x >> 16);
	}
	for (off = 0; off < 16; off++) {
		for (len = 0; len <= 300; len++) {
			uint32_t want = crc_bitwise(buf + off, len);

			ck_assert_msg(fs_crc32(buf + off, len) == want, "len %zu off %zu", len, off);
			ck_assert_msg(fs_crc32_tables(buf + off, len) == want, "len %zu off %zu", len,
				      off);
		}
	}
	ck_assert_uint_eq(fs_crc32(buf + 3, big), crc_bitwise(buf + 3, big));
	ck_assert_uint_eq(fs_crc32(buf, big + 16), fs_crc32_tables(buf, big + 16));
	memset(buf, 0, big);
	ck_assert_uint_eq(fs_crc32(buf, big), crc_bitwise(buf, big));
	free(buf);
}
END_TEST

/* A journal line giving `id` an un-leased legacy claim by `marker` at epoch 3: what an older
 * binary left on disk. Appended to *recs (*n bytes), for plant_append once st is closed (an
 * open store's journal ends in pre-allocated zeros, cut by its close). */
static void plant_legacy_claim(struct store *st, const char *id, const char *marker,
			       char **recs, size_t *n)
{
	struct fs_change ch = {0};
	struct core_card *got = NULL, *c;
	char *line;
	size_t len;

	ck_assert_int_eq(store_card_get(st, id, &got), CORE_OK);
	c = core_card_dup(got); /* an answer is read-only (one block): change a copy */
	core_card_free(got);
	ck_assert_ptr_nonnull(c);
	c->claim.present = true;
	c->claim.marker = strdup(marker);
	c->claim.claimed_at = c->created_at;
	c->claim_epoch = 3;
	ch.cards = calloc(1, sizeof(*ch.cards));
	ch.n_cards = ch.cap_cards = 1;
	ch.cards[0] = (struct fs_change_card){.id = strdup(id), .card = c,
					      .ord = fs_card_find(fs_of(st), id)->ord};
	line = fs_change_encode(&ch, &len);
	ck_assert_ptr_nonnull(line);
	*recs = realloc(*recs, *n + len);
	ck_assert_ptr_nonnull(*recs);
	memcpy(*recs + *n, line, len);
	*n += len;
	free(line);
	fs_change_release(&ch);
}

START_TEST(legacy_sweep_releases_dead_local_pids)
{
	char *dir = fx_tmpdir(), dead[64], live[64], other[64], *recs = NULL, *j;
	struct store *st = fx_open(dir, 0, 0, "testhost");
	size_t nrecs = 0;
	struct core_card *c = NULL, **v = NULL;
	struct core_event *ev = NULL;
	size_t n;
	int64_t next;
	pid_t gone = dead_pid();

	snprintf(dead, sizeof(dead), "testhost-%ld", (long)gone);
	snprintf(live, sizeof(live), "testhost-%ld", (long)getpid());
	snprintf(other, sizeof(other), "otherhost-%ld", (long)gone);
	create(st, "m2"); /* created before m1: swept before it, whatever the ids' order */
	create(st, "m1");
	create(st, "l1");
	create(st, "l2");
	create(st, "l3");
	plant_legacy_claim(st, "m1", dead, &recs, &nrecs);
	plant_legacy_claim(st, "m2", dead, &recs, &nrecs);
	plant_legacy_claim(st, "l1", dead, &recs, &nrecs);
	plant_legacy_claim(st, "l2", live, &recs, &nrecs);
	plant_legacy_claim(st, "l3", other, &recs, &nrecs);
	j = close_journal(st, dir);
	append(j, recs, nrecs);
	free(j);
	free(recs);

	st = fx_open(dir, 0, 0, "testhost");
	ck_assert_int_eq(store_card_get(st, "l1", &c), CORE_OK);
	ck_assert(!c->claim.present);
	ck_assert_int_eq(c->claim_epoch, 3); /* the fence generation survives */
	core_card_free(c);
	ck_assert_int_eq(store_card_get(st, "l2", &c), CORE_OK);
	ck_assert(c->claim.present); /* our own pid is alive */
	ck_assert(!c->claim.has_lease);
	core_card_free(c);
	ck_assert_int_eq(store_card_get(st, "l3", &c), CORE_OK);
	ck_assert(c->claim.present); /* another host's pid proves nothing here */
	core_card_free(c);
	ck_assert_int_eq(store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next), CORE_OK);
	ck_assert_str_eq(core_event_type_name(ev[n - 1].type), "card_released");
	ck_assert_str_eq(ev[n - 1].card_id, "l1");
	ck_assert_str_eq(ev[n - 1].reason, "legacy_sweep");
	{
		char want[128];
		snprintf(want, sizeof(want), "{\"marker\":\"%s\",\"epoch\":3}", dead);
		ck_assert_str_eq(ev[n - 1].payload, want);
	}
	/* Swept in creation order (the sweep's candidates come from the claimed set, whose
	 * un-leased members sit in id order). */
	ck_assert_uint_ge(n, 3);
	ck_assert_str_eq(ev[n - 3].card_id, "m2");
	ck_assert_str_eq(ev[n - 2].card_id, "m1");
	ck_assert_str_eq(ev[n - 2].reason, "legacy_sweep");
	next = ev[n - 1].seq;
	store_events_free(ev, n);
	/* The un-leased survivors are left to the pid sweep alone: the FS twin has no
	 * un-leased arm (ADR-096 §7), so the repair sweep does not list them. */
	ck_assert_int_eq(store_reaper_list_repair(st, 10, &v, &n), CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_cards_free(v, n);
	store_close(st);

	/* The release was journaled: a second boot has nothing left to sweep. */
	st = fx_open(dir, 0, 0, "testhost");
	ck_assert_int_eq(store_events_list(st, NULL, NULL, next, 1000, 0, &ev, &n, &next),
			 CORE_OK);
	ck_assert_uint_eq(n, 0);
	store_events_free(ev, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

TCase *store_fs_crash_tcase(void)
{
	TCase *tc = tcase_create("recovery");

	tcase_add_test(tc, torn_last_line_is_cut);
	tcase_add_test(tc, corrupt_last_line_is_cut);
	tcase_add_test(tc, corrupt_middle_line_refuses);
	tcase_add_test(tc, missing_generation_refuses);
	tcase_add_test(tc, corrupt_snapshot_refuses);
	tcase_add_test(tc, torn_binary_record_is_cut);
	tcase_add_test(tc, unreadable_whole_last_record_refuses);
	tcase_add_test(tc, damaged_snapshot_refuses);
	tcase_add_test(tc, json_directory_migrates);
	tcase_add_test(tc, binary_directory_loads);
	tcase_add_test(tc, crc32_vectors);
	tcase_add_test(tc, binary_decoder_survives_any_damage);
	tcase_add_test(tc, published_card_keeps_every_field);
	tcase_add_test(tc, id_table_finds_what_it_holds);
	tcase_add_test(tc, far_generation_is_a_gap);
	tcase_add_test(tc, lagging_counters_are_raised);
	tcase_add_test(tc, legacy_sweep_releases_dead_local_pids);
	return tc;
}
