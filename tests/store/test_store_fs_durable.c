/* FS twin: nothing is seen before it is durable (DESIGN §16, issue 31 item 1).
 *
 * A write is applied in memory before its group's fdatasync; a crash in between takes it back.
 * These tests hold a group at its sync (STORE_FS_FAULT_HOLD_SYNC: its records written, the
 * sync not made) and read meanwhile, the way the HTTP front end does (a store_ack bound to the
 * thread: the answer goes out at once when no wait is owed, else only once the ack is told
 * OK) and the way a plain thread does (the call itself returns the state). A card read by id
 * is shown as of its last durable version (it never waits); the other reads wait for the group.
 * Then the group
 * fails (STORE_FS_FAULT_SYNC) or the process is killed: whatever a reader was shown must
 * still be there, and nothing it was shown may be handed out again (a claim's epoch). The
 * events tail is held to the same: listed only once durable, the same after a restart.
 * Every wait here is on a condition the store reports (stats.sync_held, n_inflight), none
 * on a timer. */
#include "tests/store/fs_fixture.h"
#include "store/fs/fs.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const struct store_actor bot = {.name = "bot"};

static void create(struct store *st, const char *id)
{
	struct store_card_create in = {.id = id, .title = "old", .state = "ready"};
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
}

static void pause_ms(void)
{
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000 * 1000};

	nanosleep(&ms, NULL);
}

static bool sync_held(struct store *st)
{
	struct store_fs_stats s;

	ck_assert_int_eq(store_fs_stats_get(st, &s), CORE_OK);
	return s.sync_held;
}

/* Lines appended whose writer (or reader, fs_read_mark) was not yet told the outcome. */
static size_t inflight(struct store *st)
{
	struct fs *fs = fs_of(st);
	size_t n;

	pthread_mutex_lock(&fs->jmu);
	n = fs->n_inflight;
	pthread_mutex_unlock(&fs->jmu);
	return n;
}

static void wait_inflight(struct store *st, size_t n)
{
	int i;

	for (i = 0; i < 60000 && inflight(st) < n; i++)
		pause_ms();
	ck_assert_msg(inflight(st) >= n, "%zu in flight, want %zu", inflight(st), n);
}

/* ---- a write held at its group's sync, on its own thread (unbound: it waits inside) ---- */

struct held_write {
	pthread_t th;
	struct store *st;
	const char *id, *marker; /* marker: a claim, else a retitle to "pending" */
	const char *to;          /* else a move to this column */
	enum core_rc rc;
	int64_t epoch;
};

static void *held_main(void *arg)
{
	struct held_write *w = arg;

	if (w->to) {
		struct core_card *c = NULL;

		w->rc = store_card_set_state_from(w->st, w->id, NULL, w->to, NULL, &bot, &c);
		core_card_free(c);
	} else if (w->marker) {
		struct store_claim_result r = {0};

		w->rc = store_card_claim(w->st, w->id, w->marker, 60000, &bot, &r);
		w->epoch = w->rc == CORE_OK ? r.token.epoch : 0;
		core_card_free(r.card);
	} else {
		struct store_card_patch p = {.title = "pending"};
		struct core_card *c = NULL;

		w->rc = store_card_patch(w->st, w->id, &p, &bot, &c);
		core_card_free(c);
	}
	return NULL;
}

/* Starts w with the sync held, returns once its group waits at the sync: applied in memory,
 * not durable. */
static void held_go(struct held_write *w)
{
	int i;

	ck_assert_int_eq(store_fs_fault_set(w->st, STORE_FS_FAULT_HOLD_SYNC, true), CORE_OK);
	ck_assert_int_eq(pthread_create(&w->th, NULL, held_main, w), 0);
	for (i = 0; i < 60000 && !sync_held(w->st); i++)
		pause_ms();
	ck_assert_msg(sync_held(w->st), "the journal sync never reached its hold");
}

/* A claim (marker) or a retitle, held at its sync. */
static void held_start(struct held_write *w, struct store *st, const char *id,
		       const char *marker)
{
	*w = (struct held_write){.st = st, .id = id, .marker = marker};
	held_go(w);
}

/* A move to column `to`, held at its sync. */
static void held_move(struct held_write *w, struct store *st, const char *id, const char *to)
{
	*w = (struct held_write){.st = st, .id = id, .to = to};
	held_go(w);
}

/* Lets the held sync go on: made (fail false) or refused as by a failing disk. */
static void held_finish(struct held_write *w, bool fail)
{
	if (fail)
		ck_assert_int_eq(store_fs_fault_set(w->st, STORE_FS_FAULT_SYNC, true), CORE_OK);
	ck_assert_int_eq(store_fs_fault_set(w->st, STORE_FS_FAULT_HOLD_SYNC, false), CORE_OK);
	pthread_join(w->th, NULL);
	ck_assert_int_eq(w->rc, fail ? CORE_ERR_STORE_UNAVAILABLE : CORE_OK);
}

/* What the front end shows: a read with an ack bound is shown at once when no wait is owed,
 * else once the ack is told OK (never when told STORE_UNAVAILABLE: a 503 instead). */
struct front {
	struct store_ack ack;
	bool owed;
};

static void front_begin(struct front *f)
{
	store_ack_begin(&f->ack);
}

static void front_end(struct front *f)
{
	f->owed = store_ack_end(&f->ack);
}

/* The outcome once every held sync has gone on: true when the answer was shown. */
static bool front_shown(struct front *f)
{
	return !f->owed || store_ack_wait(&f->ack) == CORE_OK;
}

/* While a write waits at its sync, a card read and lists show the version before it (the
 * last durable one) at once; the attention lane owes that sync; a board read owes nothing for
 * a card's line. The write then fails: the waiting reader gets STORE_UNAVAILABLE, and nobody
 * was shown the title that was rolled back. */
START_TEST(read_of_a_pending_write_waits_for_its_group)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_card_filter lf = {.limit = 10}, sf = {.limit = 10, .state = "ready"};
	struct store_attention *att = NULL;
	struct core_card *c = NULL, **cards = NULL, **by_state = NULL;
	struct core_board b = {0};
	struct held_write w;
	struct front get, list, slist, attn, board;
	size_t n = 0, n_state = 0, n_att = 0;
	char *next = NULL, *snext = NULL;
	bool trunc = false;

	create(st, "a");
	/* nothing pending: a read owes nothing (the common case costs no wait) */
	front_begin(&get);
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	front_end(&get);
	ck_assert(!get.owed);
	core_card_free(c);

	held_start(&w, st, "a", NULL);
	front_begin(&get);
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	front_end(&get);
	front_begin(&list);
	ck_assert_int_eq(store_card_list(st, &lf, &cards, &n, &next), CORE_OK);
	front_end(&list);
	front_begin(&slist);
	ck_assert_int_eq(store_card_list(st, &sf, &by_state, &n_state, &snext), CORE_OK);
	front_end(&slist);
	front_begin(&attn);
	ck_assert_int_eq(store_attention_list(st, NULL, NULL, 10, &att, &n_att, &trunc), CORE_OK);
	front_end(&attn);
	front_begin(&board);
	ck_assert_int_eq(store_board_get(st, "default", &b), CORE_OK);
	front_end(&board);
	core_board_release(&b);
	ck_assert_msg(get.owed || strcmp(c->title, "old") == 0,
		      "a card read showed \"%s\", whose group has not synced", c->title);
	ck_assert_uint_eq(n, 1);
	ck_assert_msg(list.owed || strcmp(cards[0]->title, "old") == 0,
		      "a list showed \"%s\", whose group has not synced", cards[0]->title);
	ck_assert_uint_eq(n_state, 1);
	ck_assert_msg(slist.owed || strcmp(by_state[0]->title, "old") == 0,
		      "a list by state showed \"%s\", whose group has not synced",
		      by_state[0]->title);
	ck_assert_msg(attn.owed, "the attention lane read a write whose group has not synced");
	ck_assert_msg(!board.owed, "a board read waited for a card's line");

	held_finish(&w, true);
	ck_assert_msg(!front_shown(&get) || strcmp(c->title, "old") == 0,
		      "a reader was shown \"%s\", rolled back", c->title);
	ck_assert_msg(!front_shown(&list) || strcmp(cards[0]->title, "old") == 0,
		      "a list was shown \"%s\", rolled back", cards[0]->title);
	ck_assert_msg(!front_shown(&slist) || strcmp(by_state[0]->title, "old") == 0,
		      "a list by state was shown \"%s\", rolled back", by_state[0]->title);
	ck_assert(!front_shown(&attn));
	store_cards_free(by_state, n_state);
	free(snext);
	core_card_free(c);
	store_cards_free(cards, n);
	free(next);
	store_attention_free(att, n_att);
	c = NULL;
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	ck_assert_str_eq(c->title, "old");
	core_card_free(c);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A list by state walks the state's posting list, which holds the cards as they are now:
 * while a move out of "ready" and a move into it wait at their sync, the list by "ready"
 * shows the card that left (as it was) and not the one that came, at once; once durable, the
 * other way round. */
static const char *ids_in(struct store *st, const char *state, bool *owed)
{
	static char out[64];
	struct store_card_filter lf = {.limit = 10, .state = state};
	struct core_card **cards = NULL;
	struct front list;
	char *next = NULL;
	size_t n = 0, i, len = 0;

	front_begin(&list);
	ck_assert_int_eq(store_card_list(st, &lf, &cards, &n, &next), CORE_OK);
	front_end(&list);
	*owed = list.owed;
	ck_assert(!list.owed || front_shown(&list));
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		ck_assert_str_eq(cards[i]->state, state);
		len += (size_t)snprintf(out + len, sizeof out - len, "%s ", cards[i]->id);
	}
	store_cards_free(cards, n);
	free(next);
	return out;
}

START_TEST(list_by_state_shows_durable_membership)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_card_create in = {.id = "b", .title = "old", .state = "in_progress"};
	struct core_card *c = NULL;
	struct held_write w;
	struct front into;
	bool owed;

	create(st, "a");
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	core_card_free(c);
	c = NULL;
	ck_assert_str_eq(ids_in(st, "ready", &owed), "a ");
	held_move(&w, st, "a", "in_progress");
	front_begin(&into);
	ck_assert_int_eq(store_card_set_state_from(st, "b", NULL, "ready", NULL, &bot, &c),
			 CORE_OK);
	front_end(&into);
	core_card_free(c);
	ck_assert(into.owed);
	ck_assert_str_eq(ids_in(st, "ready", &owed), "a ");
	ck_assert_msg(!owed, "a list by state waited for a sync");
	ck_assert_str_eq(ids_in(st, "in_progress", &owed), "b ");
	held_finish(&w, false);
	ck_assert(front_shown(&into));
	ck_assert_str_eq(ids_in(st, "ready", &owed), "b ");
	ck_assert_str_eq(ids_in(st, "in_progress", &owed), "a ");
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A request that wrote reads its own write (and its answer waits with it); meanwhile another
 * thread's card read shows the version before, at once: it does not wait for that sync (it
 * would make it itself: nothing else flushes here). */
struct title_reader {
	struct store *st;
	char title[32];
};

static void *get_main(void *arg)
{
	struct title_reader *r = arg;
	struct core_card *c = NULL;

	ck_assert_int_eq(store_card_get(r->st, "a", &c), CORE_OK);
	snprintf(r->title, sizeof r->title, "%s", c->title);
	core_card_free(c);
	return NULL;
}

START_TEST(a_request_reads_its_own_writes)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_card_patch p = {.title = "mine"};
	struct title_reader other = {.st = st};
	struct core_card *c = NULL;
	struct front req;
	pthread_t th;

	create(st, "a");
	front_begin(&req);
	ck_assert_int_eq(store_card_patch(st, "a", &p, &bot, &c), CORE_OK);
	core_card_free(c);
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	front_end(&req);
	ck_assert(req.owed);
	ck_assert_str_eq(c->title, "mine");
	core_card_free(c);
	ck_assert_int_eq(pthread_create(&th, NULL, get_main, &other), 0);
	pthread_join(th, NULL);
	ck_assert_str_eq(other.title, "old");
	ck_assert(front_shown(&req));
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	ck_assert_str_eq(c->title, "mine");
	core_card_free(c);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* The last durable version through deletes and re-creations not yet durable: a card deleted,
 * then made again under the same id, reads (and lists) as it was before both; one only
 * created reads as absent; once the group syncs, as they left them. */
static const char *title_of(struct store *st, const char *id)
{
	static char title[32];
	struct core_card *c = NULL;
	enum core_rc rc = store_card_get(st, id, &c);

	ck_assert(rc == CORE_OK || rc == CORE_ERR_NOT_FOUND);
	snprintf(title, sizeof title, "%s", rc == CORE_OK ? c->title : "(none)");
	core_card_free(c);
	return title;
}

/* "id:title " for each card of the list in creation order, as a plain thread reads it. */
static const char *list_of(struct store *st)
{
	static char out[256];
	struct store_card_filter lf = {.limit = 10};
	struct core_card **cards = NULL;
	char *next = NULL;
	size_t n = 0, i, len = 0;

	ck_assert_int_eq(store_card_list(st, &lf, &cards, &n, &next), CORE_OK);
	out[0] = '\0';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(out + len, sizeof out - len, "%s:%s ", cards[i]->id,
					cards[i]->title);
	store_cards_free(cards, n);
	free(next);
	return out;
}

START_TEST(card_read_through_pending_delete_and_recreate)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_card_create in = {.id = "a", .title = "again", .state = "ready"};
	struct store_card_create in_c = {.id = "c", .title = "fresh", .state = "ready"};
	struct core_card *c = NULL;
	struct front del, mk, mk_c;
	struct held_write w;

	create(st, "a");
	create(st, "b");
	held_start(&w, st, "b", NULL);
	front_begin(&del);
	ck_assert_int_eq(store_card_delete(st, "a", &bot), CORE_OK);
	front_end(&del);
	ck_assert(del.owed);
	ck_assert_str_eq(title_of(st, "a"), "old");
	front_begin(&mk);
	ck_assert_int_eq(store_card_create(st, &in, &bot, &c), CORE_OK);
	front_end(&mk);
	core_card_free(c);
	c = NULL;
	front_begin(&mk_c);
	ck_assert_int_eq(store_card_create(st, &in_c, &bot, &c), CORE_OK);
	front_end(&mk_c);
	core_card_free(c);
	ck_assert(mk.owed && mk_c.owed);
	ck_assert_str_eq(title_of(st, "a"), "old");
	ck_assert_str_eq(title_of(st, "c"), "(none)");
	ck_assert_str_eq(title_of(st, "b"), "old"); /* the held retitle's own card */
	ck_assert_str_eq(list_of(st), "a:old b:old "); /* not c, not the second a */
	held_finish(&w, false);
	ck_assert(front_shown(&del) && front_shown(&mk) && front_shown(&mk_c));
	ck_assert_str_eq(title_of(st, "a"), "again");
	ck_assert_str_eq(title_of(st, "b"), "pending");
	ck_assert_str_eq(title_of(st, "c"), "fresh");
	ck_assert_str_eq(list_of(st), "b:pending a:again c:fresh ");
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* ---- a plain thread's read: the call itself waits ---- */

/* A claim refused on another claim whose group has not synced: an unbound caller's call
 * waits for that group, and when it fails answers STORE_UNAVAILABLE, never "taken" (or,
 * arriving after the rollback, takes the card). */
struct claimer {
	pthread_t th;
	struct store *st;
	enum core_rc rc;
};

static void *claimer_main(void *arg)
{
	struct claimer *r = arg;
	struct store_claim_result res = {0};

	r->rc = store_card_claim(r->st, "a", "m2", 60000, &bot, &res);
	core_card_free(res.card);
	return NULL;
}

START_TEST(unbound_refusal_waits_then_fails_with_the_group)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct held_write w;
	struct claimer r = {0};

	create(st, "a");
	held_start(&w, st, "a", "m1");
	r.st = st;
	ck_assert_int_eq(pthread_create(&r.th, NULL, claimer_main, &r), 0);
	/* the held claim's line, then the refusal's mark on it: it waits for the same sync
	 * (today's code answers 409 at once and never marks) */
	for (int i = 0; i < 2000 && inflight(st) < 2; i++)
		pause_ms(); /* bounded: on today's code the count never reaches 2 */
	held_finish(&w, true);
	pthread_join(r.th, NULL);
	ck_assert_msg(r.rc == CORE_ERR_STORE_UNAVAILABLE || r.rc == CORE_OK,
		      "a claim was refused (%s) on a claim that was rolled back",
		      core_rc_code(r.rc));
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* A refusal decided on a pending write is held too: a claim refused because of a claim
 * whose group then fails would tell a worker "taken" of a card nobody holds. Claim-next's
 * "nothing available" waits on its own thread (its request may park next). */
struct next_try {
	pthread_t th;
	struct store *st;
	enum core_rc rc;
	bool got;
};

static void *next_main(void *arg)
{
	struct next_try *t = arg;
	struct store_claim_next in = {.board = "default", .marker = "m2", .lease_ms = 60000};
	struct store_claim_result r = {0};

	t->rc = store_card_claim_next(t->st, &in, &bot, &r);
	t->got = r.card != NULL;
	core_card_free(r.card);
	return NULL;
}

START_TEST(refusal_from_a_pending_claim_waits_for_its_group)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_claim_result r = {0};
	struct next_try nt = {0};
	struct held_write w;
	struct front claim;
	enum core_rc rc;

	create(st, "a");
	held_start(&w, st, "a", "m1");
	front_begin(&claim);
	rc = store_card_claim(st, "a", "m2", 60000, &bot, &r);
	front_end(&claim);
	ck_assert_int_eq(rc, CORE_ERR_CLAIM_CONFLICT);
	ck_assert_msg(claim.owed, "a claim was refused on a claim whose group has not synced");
	nt.st = st;
	ck_assert_int_eq(pthread_create(&nt.th, NULL, next_main, &nt), 0);
	wait_inflight(st, 2); /* the held claim's line and claim-next's mark on it */
	held_finish(&w, true);
	ck_assert(!front_shown(&claim));
	pthread_join(nt.th, NULL);
	ck_assert_msg(nt.rc == CORE_ERR_STORE_UNAVAILABLE || (nt.rc == CORE_OK && nt.got),
		      "claim-next answered %s%s on a claim that was rolled back",
		      core_rc_code(nt.rc), nt.rc == CORE_OK ? " with nothing" : "");
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* ---- kill -9 while a group is held: what a reader was shown survives ---- */

/* The epoch 182: a claim whose record never reached the disk is read, the process
 * dies, and after the restart the same epoch is handed out again. In a child: a retitle held
 * at its sync (its group written, not synced), then a claim appended behind it (in memory
 * only), then a front-end read of the card; the child reports the epoch it was shown (-1:
 * shown nothing yet) and dies by SIGKILL. The parent reopens: the card is as the reader was
 * shown it, and a fresh claim's epoch is above the one shown. */
static void child_claim_read_then_die(const char *dir, int fd)
{
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_claim_result r = {0};
	struct core_card *c = NULL;
	struct store_ack wack;
	struct held_write w;
	struct front get;
	int64_t shown = -1;

	create(st, "a");
	create(st, "b");
	held_start(&w, st, "b", NULL);
	store_ack_begin(&wack); /* a front-end claim: not answered before durable */
	ck_assert_int_eq(store_card_claim(st, "a", "m3", 60000, &bot, &r), CORE_OK);
	ck_assert(store_ack_end(&wack));
	core_card_free(r.card);
	front_begin(&get);
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	front_end(&get);
	if (!get.owed) /* shown at once */
		shown = c->claim_epoch;
	core_card_free(c);
	ck_assert_int_eq(write(fd, &shown, sizeof shown), (ssize_t)sizeof shown);
	raise(SIGKILL);
}

START_TEST(kill_before_the_sync_takes_back_nothing_a_reader_saw)
{
	char *dir = fx_tmpdir();
	struct store_claim_result r = {0};
	struct core_card *c = NULL;
	struct store *st;
	int64_t shown = -2;
	int fds[2], status;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		child_claim_read_then_die(dir, fds[1]);
		_exit(1);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &shown, sizeof shown), (ssize_t)sizeof shown);
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	st = fx_open(dir, 0, 0, NULL);
	ck_assert_int_eq(store_card_get(st, "a", &c), CORE_OK);
	ck_assert_msg(shown < 0 || c->claim_epoch == shown,
		      "a reader was shown claim epoch %lld; after the restart the card has %lld",
		      (long long)shown, (long long)c->claim_epoch);
	core_card_free(c);
	ck_assert_int_eq(store_card_claim(st, "a", "m4", 60000, &bot, &r), CORE_OK);
	ck_assert(r.fresh);
	ck_assert_msg(r.token.epoch > shown,
		      "a reader was shown epoch %lld of a claim lost in the crash; after the "
		      "restart the same epoch was handed out fresh (%lld)",
		      (long long)shown, (long long)r.token.epoch);
	core_card_free(r.card);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* ---- concurrency: writers and readers together (for TSan too) ---- */

/* Each writer retitles its own card v1, v2, ... (each write waits for its sync, as an
 * unbound caller does); readers read every card by id and in lists meanwhile. A reader's view
 * of a card never goes back (each read shows a durable prefix, and that only grows), and never
 * runs ahead of what its writer has been told is durable, plus the one write in flight. */
#define MIX_WRITERS 3
#define MIX_WRITES 150
#define MIX_READS 400

struct mix {
	struct store *st;
	int told[MIX_WRITERS]; /* writes acknowledged (atomic) */
};

struct mix_writer {
	struct mix *m;
	int idx;
};

static void *mix_writer_main(void *arg)
{
	struct mix_writer *w = arg;
	char id[8], title[16];
	int k;

	snprintf(id, sizeof id, "w%d", w->idx);
	for (k = 1; k <= MIX_WRITES; k++) {
		struct store_card_patch p = {.title = title};
		struct core_card *c = NULL;

		snprintf(title, sizeof title, "v%d", k);
		ck_assert_int_eq(store_card_patch(w->m->st, id, &p, &bot, &c), CORE_OK);
		core_card_free(c);
		__atomic_store_n(&w->m->told[w->idx], k, __ATOMIC_RELEASE);
	}
	return NULL;
}

static int version_of(const struct core_card *c)
{
	return strcmp(c->title, "old") == 0 ? 0 : atoi(c->title + 1);
}

static void *mix_reader_main(void *arg)
{
	struct mix *m = arg;
	struct store_card_filter lf = {.limit = 10}, sf = {.limit = 10, .state = "ready"};
	int seen[MIX_WRITERS] = {0}, r, i, told, v;
	char id[8];

	for (r = 0; r < MIX_READS; r++) {
		for (i = 0; i < MIX_WRITERS; i++) {
			struct core_card *c = NULL;

			told = __atomic_load_n(&m->told[i], __ATOMIC_ACQUIRE);
			snprintf(id, sizeof id, "w%d", i);
			ck_assert_int_eq(store_card_get(m->st, id, &c), CORE_OK);
			v = version_of(c);
			core_card_free(c);
			ck_assert_msg(v >= seen[i], "w%d read back from v%d to v%d", i, seen[i], v);
			ck_assert_msg(v >= told, "w%d: v%d acknowledged, v%d read after", i, told, v);
			seen[i] = v;
		}
		if (r % 4 == 0) {
			struct core_card **cards = NULL;
			char *next = NULL;
			size_t n = 0, j;

			ck_assert_int_eq(store_card_list(m->st, r % 8 ? &lf : &sf, &cards, &n, &next),
					 CORE_OK); /* in creation order, or by state's posting list */
			ck_assert_uint_eq(n, MIX_WRITERS);
			for (j = 0; j < n; j++) {
				i = cards[j]->id[1] - '0';
				v = version_of(cards[j]);
				ck_assert_msg(v >= seen[i], "w%d listed back from v%d to v%d", i,
					      seen[i], v);
				seen[i] = v;
			}
			store_cards_free(cards, n);
			free(next);
		}
	}
	return NULL;
}

START_TEST(concurrent_readers_never_go_back)
{
	char *dir = fx_tmpdir();
	struct mix m = {.st = fx_open(dir, 0, 0, NULL)};
	struct mix_writer w[MIX_WRITERS];
	pthread_t wt[MIX_WRITERS], rt[2];
	char id[8];
	int i;

	for (i = 0; i < MIX_WRITERS; i++) {
		snprintf(id, sizeof id, "w%d", i);
		create(m.st, id);
	}
	for (i = 0; i < MIX_WRITERS; i++) {
		w[i] = (struct mix_writer){.m = &m, .idx = i};
		ck_assert_int_eq(pthread_create(&wt[i], NULL, mix_writer_main, &w[i]), 0);
	}
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&rt[i], NULL, mix_reader_main, &m), 0);
	for (i = 0; i < MIX_WRITERS; i++)
		pthread_join(wt[i], NULL);
	for (i = 0; i < 2; i++)
		pthread_join(rt[i], NULL);
	store_close(m.st);
	fx_rmdir(dir);
}
END_TEST

/* ---- events ---- */

static int64_t list_events(struct store *st, int64_t after, struct core_event **ev, size_t *n)
{
	int64_t next = 0;

	ck_assert_int_eq(store_events_list(st, NULL, NULL, after, 100, 0, ev, n, &next), CORE_OK);
	return next;
}

/* An event is listed only once its group has synced, and never if that group fails. */
START_TEST(event_listed_only_once_its_group_synced)
{
	char *dir = fx_tmpdir();
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct core_event *ev = NULL;
	struct held_write w;
	int64_t last;
	size_t n = 0;

	create(st, "a");
	last = list_events(st, 0, &ev, &n); /* the creation (and the default board's) */
	ck_assert_uint_ge(n, 1);
	store_events_free(ev, n);

	held_start(&w, st, "a", NULL);
	list_events(st, last, &ev, &n);
	ck_assert_uint_eq(n, 0); /* the held retitle's card.updated is not durable */
	store_events_free(ev, n);
	held_finish(&w, false);
	list_events(st, last, &ev, &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(ev[0].type, CORE_EV_CARD_UPDATED);
	last = ev[0].seq;
	store_events_free(ev, n);

	held_start(&w, st, "a", NULL);
	list_events(st, last, &ev, &n);
	ck_assert_uint_eq(n, 0);
	store_events_free(ev, n);
	held_finish(&w, true);
	list_events(st, last, &ev, &n);
	ck_assert_uint_eq(n, 0); /* rolled back: never listed */
	store_events_free(ev, n);
	ck_assert_int_eq(store_fs_fault_set(st, STORE_FS_FAULT_SYNC, false), CORE_OK);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

/* Events a reader listed while a group was held, and the process killed: after the restart
 * every one of them is there, the same (seq, type, card). In a child: durable events, a
 * retitle held at its sync, a claim appended behind it; the child lists the tail, sends what
 * it saw and dies by SIGKILL. */
struct seen_event {
	int64_t seq, board_seq;
	int type;
	char card[32];
};

static void child_list_then_die(const char *dir, int fd)
{
	struct store *st = fx_open(dir, 0, 0, NULL);
	struct store_claim_result r = {0};
	struct core_event *ev = NULL;
	struct store_ack wack;
	struct held_write w;
	struct seen_event s;
	size_t n = 0, i;

	create(st, "a");
	create(st, "b");
	held_start(&w, st, "b", NULL);
	store_ack_begin(&wack);
	ck_assert_int_eq(store_card_claim(st, "a", "m3", 60000, &bot, &r), CORE_OK);
	ck_assert(store_ack_end(&wack));
	core_card_free(r.card);
	list_events(st, 0, &ev, &n);
	for (i = 0; i < n; i++) {
		memset(&s, 0, sizeof s);
		s.seq = ev[i].seq;
		s.board_seq = ev[i].board_seq;
		s.type = (int)ev[i].type;
		snprintf(s.card, sizeof s.card, "%s", ev[i].card_id ? ev[i].card_id : "");
		ck_assert_int_eq(write(fd, &s, sizeof s), (ssize_t)sizeof s);
	}
	store_events_free(ev, n);
	raise(SIGKILL);
}

START_TEST(kill_keeps_every_event_a_reader_listed)
{
	char *dir = fx_tmpdir();
	struct core_event *ev = NULL;
	struct seen_event seen[16], s;
	struct store *st;
	size_t n_seen = 0, n = 0, i, j;
	int fds[2], status;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		child_list_then_die(dir, fds[1]);
		_exit(1);
	}
	close(fds[1]);
	while (n_seen < 16 && read(fds[0], &s, sizeof s) == (ssize_t)sizeof s)
		seen[n_seen++] = s;
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	ck_assert_uint_ge(n_seen, 2); /* the two creations */

	st = fx_open(dir, 0, 0, NULL);
	list_events(st, 0, &ev, &n);
	for (i = 0; i < n_seen; i++) {
		for (j = 0; j < n && ev[j].seq != seen[i].seq; j++)
			;
		ck_assert_msg(j < n, "event %lld was listed, and is gone after the restart",
			      (long long)seen[i].seq);
		ck_assert_int_eq((int)ev[j].type, seen[i].type);
		ck_assert_int_eq(ev[j].board_seq, seen[i].board_seq);
		ck_assert_str_eq(ev[j].card_id ? ev[j].card_id : "", seen[i].card);
	}
	store_events_free(ev, n);
	store_close(st);
	fx_rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store-fs-durable");
	TCase *tc = tcase_create("read-barrier");
	SRunner *sr;
	int nfailed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, read_of_a_pending_write_waits_for_its_group);
	tcase_add_test(tc, list_by_state_shows_durable_membership);
	tcase_add_test(tc, a_request_reads_its_own_writes);
	tcase_add_test(tc, card_read_through_pending_delete_and_recreate);
	tcase_add_test(tc, concurrent_readers_never_go_back);
	tcase_add_test(tc, unbound_refusal_waits_then_fails_with_the_group);
	tcase_add_test(tc, refusal_from_a_pending_claim_waits_for_its_group);
	tcase_add_test(tc, kill_before_the_sync_takes_back_nothing_a_reader_saw);
	tcase_add_test(tc, event_listed_only_once_its_group_synced);
	tcase_add_test(tc, kill_keeps_every_event_a_reader_listed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nfailed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfailed ? EXIT_FAILURE : EXIT_SUCCESS;
}
