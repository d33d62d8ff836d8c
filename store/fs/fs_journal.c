/* The FS journal: one checksummed line per committed change, group commit, and recovery.
 *
 * Line: "<crc32 of JSON, 8 lower-case hex> <JSON>\n", JSON being
 *   {"ctr":{seq,card,run,ord}, "cards":[{"id","ord","card":{..}|null}], "runs":[..],
 *    "boards":[..], "events":[..]}
 * Each line carries the resulting whole documents, so replaying it is a plain upsert.
 *
 * Group commit: a writer appends its line with write(2) under the state lock (so lines are in
 * commit order), takes a line number, drops the lock, then either becomes the one flusher
 * (fdatasync for everybody appended so far) or waits on jcond until `synced` covers it.
 */
#include "store/fs/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- encoding ---- */

static json_t *ctr_json(const struct fs_counters *c)
{
	return json_pack("{sIsIsIsI}", "seq", (json_int_t)c->seq, "card", (json_int_t)c->card,
			 "run", (json_int_t)c->run, "ord", (json_int_t)c->ord);
}

/* Appends a new reference to a; false (and v dropped) on failure. */
static bool push(json_t *a, json_t *v)
{
	return v && json_array_append_new(a, v) == 0;
}

char *fs_change_encode(const struct fs_change *ch, size_t *len)
{
	json_t *o = json_object(), *cards = json_array(), *runs = json_array(),
	       *boards = json_array(), *events = json_array();
	char *json = NULL, *line = NULL;
	size_t i, n;
	bool ok = o && cards && runs && boards && events;

	for (i = 0; ok && i < ch->n_cards; i++) {
		const struct fs_change_card *cc = &ch->cards[i];
		json_t *doc = cc->card ? store_card_to_json(cc->card) : json_null();

		ok = doc && push(cards, json_pack("{sssIso}", "id", cc->id, "ord",
						  (json_int_t)cc->ord, "card", doc));
	}
	for (i = 0; ok && i < ch->n_runs; i++)
		ok = push(runs, store_run_to_json(ch->runs[i]));
	for (i = 0; ok && i < ch->n_boards; i++)
		ok = push(boards, store_board_to_json(&ch->boards[i]));
	for (i = 0; ok && i < ch->n_events; i++)
		ok = push(events, store_event_to_json(ch->events[i]));
	if (ok && (json_object_set_new(o, "ctr", ctr_json(&ch->ctr)) ||
		   json_object_set(o, "cards", cards) || json_object_set(o, "runs", runs) ||
		   json_object_set(o, "boards", boards) || json_object_set(o, "events", events)))
		ok = false;
	if (ok)
		json = json_dumps(o, JSON_COMPACT);
	if (json) {
		n = strlen(json);
		line = malloc(n + 11);
		if (line) {
			snprintf(line, 10, "%08" PRIx32 " ", fs_crc32(json, n));
			memcpy(line + 9, json, n);
			line[9 + n] = '\n';
			line[10 + n] = '\0';
			*len = n + 10;
		}
	}
	free(json);
	json_decref(cards);
	json_decref(runs);
	json_decref(boards);
	json_decref(events);
	json_decref(o);
	return line;
}

/* ---- decoding ---- */

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

/* ---- appending and group commit ---- */

int fs_dir_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int fs_journal_open(const struct fs *fs, uint64_t gen)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/journal.%" PRIu64, fs->dir, gen);
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

/* Marks the store failed: from now on writes are refused (reads keep working) until the
 * process reopens the directory and recovery decides what is on disk. Called with jmu held. */
static void fail_locked(struct fs *fs, const char *what, int err)
{
	if (!fs->failed)
		fprintf(stderr, "boardd: fs store %s: %s failed: %s; refusing writes until restart\n",
			fs->dir, what, strerror(err));
	fs->failed = true;
	fs->stats.failed = true;
}

enum core_rc fs_journal_append(struct fs *fs, const char *line, size_t len, uint64_t *seq)
{
	size_t done = 0;
	ssize_t w;
	int err = 0;

	*seq = 0;
	pthread_mutex_lock(&fs->jmu);
	if (fs->failed) {
		pthread_mutex_unlock(&fs->jmu);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	pthread_mutex_unlock(&fs->jmu);
	/* The fd only changes under the state write lock, which the caller holds. */
	while (done < len) {
		w = write(fs->jfd, line + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	pthread_mutex_lock(&fs->jmu);
	if (err) {
		/* Cut what did land, so no half line sits before the next good one; if even
		 * that fails, the file is unknown and the store stops taking writes. */
		if (done && ftruncate(fs->jfd, (off_t)fs->jbytes) != 0)
			fail_locked(fs, "journal truncate", errno);
		pthread_mutex_unlock(&fs->jmu);
		fprintf(stderr, "boardd: fs store %s: journal write failed: %s\n", fs->dir,
			strerror(err));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	fs->jbytes += len;
	fs->stats.journal_bytes = fs->jbytes;
	fs->stats.commits++;
	*seq = ++fs->appended;
	pthread_mutex_unlock(&fs->jmu);
	return CORE_OK;
}

enum core_rc fs_journal_wait(struct fs *fs, uint64_t seq)
{
	enum core_rc rc = CORE_OK;
	uint64_t target;
	int fd, *old, err;
	size_t n_old, i;

	pthread_mutex_lock(&fs->jmu);
	while (fs->synced < seq) {
		if (fs->failed) {
			rc = CORE_ERR_STORE_UNAVAILABLE;
			break;
		}
		if (fs->flushing) {
			pthread_cond_wait(&fs->jcond, &fs->jmu);
			continue;
		}
		/* Become the flusher for every line appended so far. */
		fs->flushing = true;
		target = fs->appended;
		fd = fs->jfd;
		old = fs->old_fds;
		n_old = fs->n_old_fds;
		fs->old_fds = NULL;
		fs->n_old_fds = 0;
		pthread_mutex_unlock(&fs->jmu);
		err = 0;
		for (i = 0; i < n_old; i++) {
			if (fdatasync(old[i]) != 0 && !err)
				err = errno;
			close(old[i]);
		}
		if (fdatasync(fd) != 0 && !err)
			err = errno;
		free(old);
		pthread_mutex_lock(&fs->jmu);
		fs->stats.syncs += 1 + n_old;
		fs->flushing = false;
		if (err)
			fail_locked(fs, "journal fdatasync", err);
		else if (target > fs->synced)
			fs->synced = target;
		pthread_cond_broadcast(&fs->jcond);
	}
	pthread_mutex_unlock(&fs->jmu);
	return rc;
}

void fs_events_publish(struct fs *fs, int64_t seq)
{
	pthread_mutex_lock(&fs->evmu);
	if (seq > fs->ev_visible) {
		fs->ev_visible = seq;
		pthread_cond_broadcast(&fs->evcond);
	}
	pthread_mutex_unlock(&fs->evmu);
}

/* ---- recovery ---- */

static char *file_read(const char *path, size_t *len, int *err)
{
	struct stat sb;
	char *buf = NULL;
	size_t done = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*len = 0;
	*err = 0;
	if (fd < 0 || fstat(fd, &sb) != 0)
		goto fail;
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		errno = ENOMEM;
		goto fail;
	}
	while (done < (size_t)sb.st_size) {
		r = read(fd, buf + done, (size_t)sb.st_size - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	buf[done] = '\0';
	*len = done;
	close(fd);
	return buf;
fail:
	*err = errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* Checks "<8 hex> <json>" and decodes it; false when the line is corrupt. */
static bool line_decode(const char *line, size_t len, struct fs_change *ch)
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

static off_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void gen_path(const struct fs *fs, uint64_t gen, char *buf, size_t len)
{
	snprintf(buf, len, "%s/journal.%" PRIu64, fs->dir, gen);
}

/* Replays one generation. `last`: no later generation holds data, so a torn or corrupt
 * final line is a write that never completed (never acknowledged) and is cut. */
static enum core_rc replay_gen(struct fs *fs, uint64_t gen, bool last, char *err, size_t errlen)
{
	char path[4096];
	struct fs_change ch;
	size_t len, pos = 0, lineno = 0;
	char *buf, *nl;
	int ferr;
	enum core_rc rc = CORE_OK;

	gen_path(fs, gen, path, sizeof(path));
	buf = file_read(path, &len, &ferr);
	if (!buf) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(ferr));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	while (pos < len) {
		lineno++;
		nl = memchr(buf + pos, '\n', len - pos);
		if (nl && line_decode(buf + pos, (size_t)(nl - (buf + pos)), &ch)) {
			if (fs_change_reserve(fs, &ch) != CORE_OK) {
				fs_change_release(&ch);
				snprintf(err, errlen, "out of memory replaying %s", path);
				rc = CORE_ERR_NOMEM;
				goto out;
			}
			fs_change_apply(fs, &ch, true);
			pos = (size_t)(nl - buf) + 1;
			continue;
		}
		/* A bad line is only forgivable as the very last thing ever written. */
		if (!last || (nl && (size_t)(nl - buf) + 1 < len)) {
			snprintf(err, errlen,
				 "corrupt journal line %zu in %s (not the last line: acknowledged "
				 "data would be lost; repair or restore the directory)",
				 lineno, path);
			rc = CORE_ERR_STORE_UNAVAILABLE;
			goto out;
		}
		fprintf(stderr,
			"boardd: fs store %s: cutting a torn last line (%zu bytes) at line %zu of %s\n",
			fs->dir, len - pos, lineno, path);
		if (truncate(path, (off_t)pos) != 0) {
			snprintf(err, errlen, "cannot truncate %s: %s", path, strerror(errno));
			rc = CORE_ERR_STORE_UNAVAILABLE;
			goto out;
		}
		break;
	}
out:
	free(buf);
	return rc;
}

/* The highest journal generation present, deleting those below fs->gen: leftovers of a
 * compaction that finished (the snapshot holds them). 0 when there is none. */
static uint64_t gens_scan(struct fs *fs)
{
	char path[4096];
	struct dirent *de;
	uint64_t g, max = 0;
	char *end;
	DIR *d = opendir(fs->dir);

	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "journal.", 8) != 0 || !de->d_name[8])
			continue;
		g = strtoull(de->d_name + 8, &end, 10);
		if (*end)
			continue;
		if (g < fs->gen) {
			gen_path(fs, g, path, sizeof(path));
			unlink(path);
		} else if (g > max) {
			max = g;
		}
	}
	if (d)
		closedir(d);
	return max;
}

enum core_rc fs_journal_recover(struct fs *fs, char *err, size_t errlen)
{
	char path[4096];
	uint64_t g, max = gens_scan(fs), later;
	enum core_rc rc;
	off_t sz;
	bool last;

	if (max < fs->gen)
		max = fs->gen; /* a fresh directory, or a snapshot with no journal yet */
	for (g = fs->gen; g <= max; g++) {
		gen_path(fs, g, path, sizeof(path));
		if (file_size(path) < 0) {
			if (g == max)
				break;
			snprintf(err, errlen, "journal generation %s is missing (generations %" PRIu64
				 "..%" PRIu64 " expected); refusing to open", path, fs->gen, max);
			return CORE_ERR_STORE_UNAVAILABLE;
		}
		last = true;
		for (later = g + 1; later <= max; later++) {
			gen_path(fs, later, path, sizeof(path));
			if (file_size(path) > 0)
				last = false;
		}
		rc = replay_gen(fs, g, last, err, errlen);
		if (rc != CORE_OK)
			return rc;
	}
	fs->gen = max;
	gen_path(fs, max, path, sizeof(path));
	fs->jfd = fs_journal_open(fs, max);
	if (fs->jfd < 0 || (sz = file_size(path)) < 0 || fs_dir_sync(fs->dir) != 0) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	fs->jbytes = (uint64_t)sz;
	fs->stats.generation = fs->gen;
	fs->stats.journal_bytes = fs->jbytes;
	fs->ev_visible = fs->ctr.seq;
	return CORE_OK;
}
