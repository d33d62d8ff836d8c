/* Fuzz target B: FS store recovery from arbitrary bytes on disk.
 *
 * The first byte picks what the rest becomes in a fresh data directory (mode = byte % 8):
 *   0  journal.1, no snapshot
 *   1  a valid snapshot (generation G), then journal.G
 *   2  a valid snapshot, then journal.G = valid records followed by the bytes
 *   3  snapshot.json (the JSON snapshot of earlier versions, read when there is no .bin)
 *   4  a valid snapshot, journal.G = the bytes up to the first 0xff, and the rest as
 *      journal.G+1+k, k = (first byte >> 3) & 31 (k > 0 leaves generations missing)
 *   5  journal.1 made of records framed here with valid CRCs around fuzzed payloads
 *   6  snapshot.bin made the same way
 *   7  snapshot.bin, raw
 * In modes 5 and 6 the bytes are chunks separated by "\xfb\xfb\xfb\xfb"; a chunk's first byte
 * is the record kind (1 change, 2 snapshot end), the rest its payload: the CRCs cannot stop
 * the decoder from seeing arbitrary payloads (fs_decode.c promises an error, never an
 * out-of-bounds read). The frame is the documented one: magic 0xFB, version 1, u16 kind, u32
 * length, CRC-32 of the payload, CRC-32 of the first 12 bytes, little-endian.
 * (The valid snapshot and records come from a template store built at start-up.)
 *
 * Oracles: store_fs_open either opens or refuses with a readable error -- never a crash, a
 * leak, or a hang (libFuzzer -timeout). When it opens, the store must be usable and stable:
 * reading every card, event and board works, a write is answered, and after a clean close a
 * second open succeeds and shows exactly the same state (recovery converged: a cut torn
 * record stays cut, nothing replays twice).
 *
 * Generation gaps stay small (k < 32) so that most inputs exercise replay rather than the
 * refusal of a gap; a huge gap once made recovery spin (regress_journal_gap.c). */
#include "store/store_twins.h"
#include "tests/fuzz/fuzz.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct {
	char base[256];
	char dir[300];
	char *snap;
	size_t snap_len;
	const char *snap_name; /* snapshot.bin, or snapshot.json from an older store */
	char *journal;
	size_t journal_len;
	uint64_t gen;
} g;

static const struct store_actor fuzz_actor = {.name = "fuzz"};

static void file_put(const char *dir, const char *name, const void *a, size_t an,
		     const void *b, size_t bn)
{
	char path[512];
	int fd;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || (an && write(fd, a, an) != (ssize_t)an) ||
	    (bn && write(fd, b, bn) != (ssize_t)bn))
		fuzz_die("write %s", path);
	close(fd);
}

static char *file_get(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n)
		fuzz_die("read %s", path);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void must(enum core_rc rc, const char *what)
{
	if (rc != CORE_OK)
		fuzz_die("template: %s: %s", what, core_rc_code(rc));
}

/* A store with a bit of everything: labels, blockers, a claim, a run, a comment, a release,
 * then compacted, then a few more commits in the new journal generation. */
static void template_build(void)
{
	struct store_fs_options o = {0};
	struct store_fs_stats stats;
	struct store *st = NULL;
	struct core_card *c = NULL;
	struct core_run *r = NULL;
	struct store_claim_result cr = {0};
	struct core_strv labels = {0}, blockers = {0};
	struct store_card_create in = {.id = "c1", .title = "one", .state = "ready"};
	struct store_run_create rin = {.id = "r1", .card_id = "c2", .marker = "host-1",
				       .status = "running", .lease_ms = 60000};
	char err[512], tmpl[300], path[600];

	snprintf(tmpl, sizeof tmpl, "%s/template", g.base);
	o.dir = tmpl;
	if (store_fs_open(&o, &st, err, sizeof err) != CORE_OK)
		fuzz_die("template store: %s", err);
	must(core_strv_push(&labels, "l1"), "labels");
	must(core_strv_push(&blockers, "c1"), "blockers");
	in.labels = &labels;
	must(store_card_create(st, &in, &fuzz_actor, &c), "create c1");
	core_card_free(c);
	in = (struct store_card_create){.id = "c2", .title = "two", .blockers = &blockers};
	must(store_card_create(st, &in, &fuzz_actor, &c), "create c2");
	core_card_free(c);
	/* c2 is claimable once its blocker is done (DESIGN §11: blockers_pending otherwise). */
	must(store_card_set_state_from(st, "c1", "ready", "done", "fuzz", &fuzz_actor, &c),
	     "state");
	core_card_free(c);
	must(store_card_claim(st, "c2", "host-1", 600000, &fuzz_actor, &cr), "claim");
	core_card_free(cr.card);
	must(store_run_create(st, &rin, &fuzz_actor, &r), "run");
	core_run_free(r);
	/* An id deleted once keeps an epoch floor: the snapshot carries it. */
	in = (struct store_card_create){.id = "c4", .title = "four"};
	must(store_card_create(st, &in, &fuzz_actor, &c), "create c4");
	core_card_free(c);
	must(store_card_claim(st, "c4", "host-1", 600000, &fuzz_actor, &cr), "claim c4");
	core_card_free(cr.card);
	must(store_card_delete(st, "c4", &fuzz_actor), "delete c4");
	must(store_fs_compact(st), "compact");
	/* A claim-only line (a renew) in the new generation. */
	{
		struct core_token t = {.marker = "host-1", .epoch = 1};

		must(store_card_renew(st, "c2", &t, 0, &fuzz_actor, &c), "renew");
		core_card_free(c);
	}
	must(store_card_comment_add(st, "c1", "a comment", &fuzz_actor, &c), "comment");
	core_card_free(c);
	in = (struct store_card_create){.id = "c3", .title = "three"};
	must(store_card_create(st, &in, &fuzz_actor, &c), "create c3");
	core_card_free(c);
	must(store_card_set_state_from(st, "c3", NULL, "ready", "fuzz", &fuzz_actor, &c),
	     "state");
	core_card_free(c);
	must(store_fs_stats_get(st, &stats), "stats");
	g.gen = stats.generation;
	store_close(st);
	core_strv_release(&labels);
	core_strv_release(&blockers);
	g.snap_name = "snapshot.bin";
	snprintf(path, sizeof path, "%s/%s", tmpl, g.snap_name);
	if (access(path, R_OK) != 0) {
		g.snap_name = "snapshot.json";
		snprintf(path, sizeof path, "%s/%s", tmpl, g.snap_name);
	}
	g.snap = file_get(path, &g.snap_len);
	snprintf(path, sizeof path, "%s/journal.%" PRIu64, tmpl, g.gen);
	g.journal = file_get(path, &g.journal_len);
	fuzz_rmtree(tmpl);
}

static void at_exit(void)
{
	fuzz_rmtree(g.base);
	free(g.snap);
	free(g.journal);
}

/* FUZZ_JOURNAL_SEEDS=DIR: writes seed inputs made from the template (what a real store
 * writes) into DIR, for tests/fuzz/corpus/journal. */
static void seeds_write(const char *dir)
{
	const uint8_t m1 = 1, m2 = 2, m7 = 7, m0 = 0;
	size_t half = g.journal_len / 2;

	file_put(dir, "template-journal", &m1, 1, g.journal, g.journal_len);
	file_put(dir, "template-journal-torn", &m1, 1, g.journal, g.journal_len - 3);
	file_put(dir, "template-journal-as-first", &m0, 1, g.journal, g.journal_len);
	file_put(dir, "template-snapshot", &m7, 1, g.snap, g.snap_len);
	file_put(dir, "template-append-garbage", &m2, 1, "\xfb\x01\x01\x00garbage", 11);
	file_put(dir, "template-journal-half", &m1, 1, g.journal, half);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_tmpdir(g.base, sizeof g.base, "journal");
	snprintf(g.dir, sizeof g.dir, "%s/case", g.base);
	template_build();
	atexit(at_exit);
	if (getenv("FUZZ_JOURNAL_SEEDS"))
		seeds_write(getenv("FUZZ_JOURNAL_SEEDS"));
	return 0;
}

/* Appends v (stolen) to a; false on OOM. */
static bool push(json_t *a, json_t *v)
{
	return v && json_array_append_new(a, v) == 0;
}

/* Everything the store serves, as one canonical JSON text (caller frees); NULL when a read
 * fails. */
static char *state_dump(struct store *st)
{
	struct store_card_filter f = {.claimed = -1, .limit = 1000};
	json_t *o = json_object(), *cards = json_array(), *events = json_array(),
	       *boards = json_array();
	struct core_board *bv = NULL;
	char *next = NULL, *text = NULL, *after = NULL;
	int64_t ev_after = 0, ev_next = 0;
	bool ok = o && cards && events && boards;
	size_t n, i;

	while (ok) {
		struct core_card **cv = NULL;

		f.after = after;
		ok = store_card_list(st, &f, &cv, &n, &next) == CORE_OK;
		for (i = 0; ok && i < n; i++)
			ok = push(cards, store_card_to_json(cv[i]));
		store_cards_free(cv, n);
		free(after);
		after = next;
		next = NULL;
		if (!after || !n)
			break;
	}
	free(after);
	while (ok) {
		struct core_event *ev = NULL;

		ok = store_events_list(st, NULL, NULL, ev_after, 1000, 0, &ev, &n, &ev_next) ==
		     CORE_OK;
		for (i = 0; ok && i < n; i++)
			ok = push(events, store_event_to_json(&ev[i]));
		store_events_free(ev, n);
		if (!ok || !n)
			break;
		ev_after = ev_next;
	}
	if (ok && store_board_list(st, &bv, &n) == CORE_OK) {
		for (i = 0; ok && i < n; i++)
			ok = push(boards, store_board_to_json(&bv[i]));
		store_boards_free(bv, n);
	} else {
		ok = false;
	}
	if (ok && json_object_set(o, "cards", cards) == 0 &&
	    json_object_set(o, "events", events) == 0 && json_object_set(o, "boards", boards) == 0)
		text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(cards);
	json_decref(events);
	json_decref(boards);
	json_decref(o);
	return text;
}

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	int k;

	while (n--) {
		c ^= *p++;
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
	}
	return c ^ 0xFFFFFFFFu;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* The chunks of data (separated by 0xfb x4) as framed records with valid CRCs. */
static uint8_t *records_frame(const uint8_t *data, size_t size, size_t *out_len)
{
	static const uint8_t sep[4] = {0xfb, 0xfb, 0xfb, 0xfb};
	uint8_t *out = malloc(size / 2 * 16 + size + 64), *h;
	size_t off = 0, o = 0;

	if (!out)
		fuzz_die("out of memory");
	while (off <= size) {
		size_t end = off, n;
		unsigned kind;

		while (end + 4 <= size && memcmp(data + end, sep, 4) != 0)
			end++;
		if (end + 4 > size)
			end = size;
		n = end - off;
		kind = n ? data[off] : 1;
		h = out + o;
		h[0] = 0xFB;
		h[1] = 1;
		h[2] = (uint8_t)kind;
		h[3] = 0;
		put_u32(h + 4, (uint32_t)(n ? n - 1 : 0));
		if (n > 1)
			memcpy(h + 16, data + off + 1, n - 1);
		put_u32(h + 8, crc32_ieee(h + 16, n ? n - 1 : 0));
		put_u32(h + 12, crc32_ieee(h, 12));
		o += 16 + (n ? n - 1 : 0);
		off = end + 4;
	}
	*out_len = o;
	return out;
}

/* Do the events of a state_dump() text have strictly increasing seqs? */
static bool seqs_increasing(const char *dump)
{
	json_t *o = json_loads(dump, 0, NULL), *e;
	json_int_t prev = 0;
	bool ok = o != NULL;
	size_t i;

	json_array_foreach(ok ? json_object_get(o, "events") : NULL, i, e)
	{
		json_int_t seq = json_integer_value(json_object_get(e, "seq"));

		if (seq <= prev) {
			ok = false;
			break;
		}
		prev = seq;
	}
	json_decref(o);
	return ok;
}

static void case_write(const uint8_t *data, size_t size, unsigned mode)
{
	char name[64];
	const uint8_t *cut;
	uint8_t *framed;
	size_t n;

	fuzz_rmtree(g.dir);
	if (mkdir(g.dir, 0755) != 0)
		fuzz_die("mkdir %s", g.dir);
	switch (mode % 8) {
	case 0:
		file_put(g.dir, "journal.1", data, size, NULL, 0);
		return;
	case 3:
		file_put(g.dir, "snapshot.json", data, size, NULL, 0);
		return;
	case 5:
	case 6:
		framed = records_frame(data, size, &n);
		file_put(g.dir, mode % 8 == 5 ? "journal.1" : "snapshot.bin", framed, n, NULL, 0);
		free(framed);
		return;
	case 7:
		file_put(g.dir, "snapshot.bin", data, size, NULL, 0);
		return;
	default:
		break;
	}
	file_put(g.dir, g.snap_name, g.snap, g.snap_len, NULL, 0);
	snprintf(name, sizeof name, "journal.%" PRIu64, g.gen);
	if (mode % 8 == 1) {
		file_put(g.dir, name, data, size, NULL, 0);
		return;
	}
	if (mode % 8 == 2) {
		file_put(g.dir, name, g.journal, g.journal_len, data, size);
		return;
	}
	cut = memchr(data, 0xff, size);
	n = cut ? (size_t)(cut - data) : size;
	file_put(g.dir, name, data, n, NULL, 0);
	snprintf(name, sizeof name, "journal.%" PRIu64, g.gen + 1 + ((mode >> 3) & 31));
	file_put(g.dir, name, cut ? cut + 1 : NULL, cut ? size - n - 1 : 0, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_fs_options o = {.dir = g.dir};
	struct store_card_create in = {.id = "zz-fuzz-probe", .title = "probe"};
	struct store *st = NULL;
	struct core_card *c = NULL;
	char err[512] = "", *first = NULL, *second = NULL;
	enum core_rc rc;
	unsigned mode = size ? data[0] : 0;

	case_write(size ? data + 1 : data, size ? size - 1 : 0, mode);
	rc = store_fs_open(&o, &st, err, sizeof err);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "  mode %u: open %s%s%s\n", mode % 8, core_rc_code(rc),
			err[0] ? ": " : "", err);
	if (rc != CORE_OK) {
		if (st)
			fuzz_fail(data, size, "store_fs_open failed (%s) but returned a store",
				  core_rc_code(rc));
		if (!err[0])
			fuzz_fail(data, size, "store_fs_open refused (%s) without saying why",
				  core_rc_code(rc));
		return 0;
	}
	/* It opened: it must be readable, writable, and reopen to the same state. */
	rc = store_card_create(st, &in, &fuzz_actor, &c);
	core_card_free(c);
	if (rc != CORE_OK && rc != CORE_ERR_ALREADY_EXISTS && rc != CORE_ERR_BAD_REQUEST &&
	    rc != CORE_ERR_NOT_FOUND)
		fuzz_fail(data, size, "a write to the recovered store failed: %s",
			  core_rc_code(rc));
	first = state_dump(st);
	if (!first)
		fuzz_fail(data, size, "reading the recovered store failed");
	store_close(st);
	st = NULL;
	err[0] = '\0';
	rc = store_fs_open(&o, &st, err, sizeof err);
	if (rc != CORE_OK)
		fuzz_fail(data, size, "the store opened once, closed cleanly, then refused: %s",
			  err);
	second = state_dump(st);
	if (!second)
		fuzz_fail(data, size, "reading the reopened store failed");
	/* Counters loaded behind the data once made the store hand a seq out twice, and the
	 * reopen then dropped that event (regress_snapshot_counters.c). */
	if (!seqs_increasing(first))
		fuzz_fail(data, size, "a seq is repeated or out of order in the recovered log: "
				      "%.2000s", first);
	if (strcmp(first, second) != 0)
		fuzz_fail(data, size, "the state differs after a clean reopen:\nfirst:  %.2000s\n"
				      "second: %.2000s",
			  first, second ? second : "(unreadable)");
	store_close(st);
	free(first);
	free(second);
	return 0;
}
