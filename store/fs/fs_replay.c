/* The FS journal's recovery at open: replays the generations journal.G.. after the snapshot,
 * in order, each record a plain upsert (fs_change_apply with no undo), and cuts a torn or
 * damaged tail of the last generation so that appends resume after its last sound record.
 *
 * Record: the binary frame of fs_codec.c. Earlier versions wrote a JSON line instead,
 *   "<crc32 of JSON, 8 lower-case hex> <JSON>\n", JSON being
 *   {"ctr":{seq,card,run,ord}, "cards":[{"id","ord","card":{..}|null}], "runs":[..],
 *    "boards":[..], "events":[..]}
 * and recovery still replays those (a generation may hold both: the first byte tells).
 * Each record carries the resulting whole documents, so replaying it is a plain upsert.
 */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_io.h"
#include "store/fs/fs_journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- recovery ---- */

static off_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void gen_path(const struct fs *fs, uint64_t gen, char *buf, size_t len)
{
	snprintf(buf, len, "%s/journal.%" PRIu64, fs->dir, gen);
}

/* Applies a decoded change; NOMEM is the only failure. */
static enum core_rc replay_change(struct fs *fs, struct fs_change *ch)
{
	if (fs_change_resolve(fs, ch) != CORE_OK || fs_change_reserve(fs, ch) != CORE_OK) {
		fs_change_release(ch);
		return CORE_ERR_NOMEM;
	}
	fs_change_apply(fs, ch, NULL);
	return CORE_OK;
}

/* Decodes the record at buf + pos (binary or an old JSON line). Returns true with *ch filled
 * and *end past the record; false when it is torn or damaged: then *torn_tail says whether
 * the damage runs to the end of the data, `dend` (past the last non-zero byte of the file:
 * what follows is the pre-allocated zero tail, never data), so the record may be the last
 * thing ever written, torn by a crash. A torn write over the zeros leaves zeros where its
 * sectors did not land: a record cut short by them, or one whose first sector is zeros.
 * *why says what the damage is when the record is refused (not cut) as the last one. */
static bool record_next(struct fs_atoms *atoms, const char *buf, size_t len, size_t dend,
			size_t pos, struct fs_change *ch, size_t *end, bool *torn_tail,
			const char **why)
{
	const char *payload, *nl;
	unsigned kind = 0;
	size_t plen = 0;

	*torn_tail = false;
	*why = "not the last line: acknowledged data would be lost";
	if (!buf[pos]) {
		*torn_tail = true; /* non-zero data follows (dend > pos): its start never landed */
		return false;
	}
	if ((unsigned char)buf[pos] == FS_REC_MAGIC) {
		switch (fs_rec_check(buf + pos, len - pos, &kind, &payload, &plen)) {
		case FS_REC_OK:
			*end = pos + FS_REC_HDR + plen;
			if (fs_change_decode_bin(kind, payload, plen, atoms, ch) == CORE_OK)
				return true;
			/* Whole and checksummed, so it was written completely and may have been
			 * acknowledged: a record this binary cannot read (a newer writer's) is
			 * refused, never cut as if torn, even at the tail. */
			*torn_tail = false;
			*why = "a whole, checksummed record this binary cannot read: it may have "
			       "been acknowledged";
			return false;
		case FS_REC_BAD_PAYLOAD:
			*torn_tail = pos + FS_REC_HDR + plen >= dend;
			return false;
		case FS_REC_TORN:
			*torn_tail = true;
			return false;
		case FS_REC_BAD:
			/* A complete header that fails its CRC is damage, not a torn write (its
			 * length cannot be trusted to say what follows), unless the data ends
			 * inside it: then the rest of it is zeros that never got written. */
			*torn_tail = dend - pos < FS_REC_HDR;
			*why = "its header is damaged: its length cannot be trusted, so whether "
			       "acknowledged data follows cannot be told";
			return false;
		}
		return false;
	}
	nl = memchr(buf + pos, '\n', dend - pos);
	if (nl && fs_legacy_line_decode(buf + pos, (size_t)(nl - (buf + pos)), ch)) {
		*end = (size_t)(nl - buf) + 1;
		return true;
	}
	*torn_tail = !nl || (size_t)(nl - buf) + 1 == dend;
	return false;
}

/* Past the last non-zero byte of buf. */
static size_t data_end(const char *buf, size_t len)
{
	while (len && !buf[len - 1])
		len--;
	return len;
}

/* Whether a sound record (both checksums) starts in (pos, dend): a later write that a torn
 * tail cannot explain. The log is never replayed past a bad record, and such a file is
 * refused rather than cut (the bad one may be damage in the middle of acknowledged data).
 * A change whose event counter is below `seq` (what the replay reached) is not a later
 * write but stale bytes: blocks of an older, deleted generation that a crash exposed past
 * the synced end of the file, never data this one needs. */
static bool sound_record_after(const char *buf, size_t len, size_t dend, size_t pos,
			       int64_t seq, size_t *at)
{
	const char *p = buf + pos + 1, *q, *payload;
	const unsigned char *u;
	unsigned kind;
	size_t plen;
	uint64_t rseq;
	int i;

	while (p < buf + dend && (q = memchr(p, FS_REC_MAGIC, (size_t)(buf + dend - p)))) {
		p = q + 1;
		if (fs_rec_check(q, len - (size_t)(q - buf), &kind, &payload, &plen) != FS_REC_OK)
			continue;
		if ((kind == FS_REC_CHANGE || kind == FS_REC_CHANGE2 || kind == FS_REC_CHANGE3 ||
		     kind == FS_REC_CHANGE4) &&
		    plen >= 8) {
			u = (const unsigned char *)payload;
			for (rseq = 0, i = 7; i >= 0; i--)
				rseq = rseq << 8 | u[i];
			if ((int64_t)rseq < seq)
				continue;
		}
		*at = (size_t)(q - buf);
		return true;
	}
	return false;
}

/* Cuts the file at path to `at` bytes, durably (writers go on from there). 0 or an errno. */
static int cut_file(const char *path, size_t at)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	if (ftruncate(fd, (off_t)at) != 0 || fdatasync(fd) != 0)
		err = errno;
	close(fd);
	return err;
}

/* Replays one generation. `last`: no later generation holds data, so a torn or corrupt
 * final record is a write that never completed (never acknowledged) and is cut. The log of
 * a generation ends at its zero tail (the pre-allocated space, fs_segment.c) or at the end of
 * the file; *valid is where its records end (where the next one goes). */
static enum core_rc replay_gen(struct fs *fs, uint64_t gen, bool last, size_t *valid, char *err,
			       size_t errlen)
{
	char path[4096];
	struct fs_change ch;
	size_t len, dend, pos = 0, end = 0, lineno = 0, at;
	const char *why;
	char *buf;
	bool torn_tail;
	int ferr;
	enum core_rc rc = CORE_OK;

	gen_path(fs, gen, path, sizeof(path));
	buf = fs_file_read(path, &len, &ferr);
	if (!buf) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(ferr));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	dend = data_end(buf, len);
	while (pos < dend) {
		lineno++;
		if (record_next(&fs->atoms, buf, len, dend, pos, &ch, &end, &torn_tail, &why)) {
			if (replay_change(fs, &ch) != CORE_OK) {
				snprintf(err, errlen, "out of memory replaying %s", path);
				rc = CORE_ERR_NOMEM;
				goto out;
			}
			pos = end;
			continue;
		}
		/* A bad record is only forgivable as the very last thing ever written. */
		if (last && sound_record_after(buf, len, dend, pos, fs->ctr.seq, &at)) {
			snprintf(err, errlen,
				 "corrupt journal line %zu in %s (a sound record follows at byte "
				 "%zu: the log is never replayed past a bad record, and acknowledged "
				 "data may follow it; repair or restore the directory)",
				 lineno, path, at);
			rc = CORE_ERR_STORE_UNAVAILABLE;
			goto out;
		}
		if (!last || !torn_tail) {
			snprintf(err, errlen,
				 "corrupt journal line %zu in %s (%s; repair or restore the "
				 "directory)",
				 lineno, path,
				 last ? why : "not the last line: acknowledged data would be lost");
			rc = CORE_ERR_STORE_UNAVAILABLE;
			goto out;
		}
		fprintf(stderr,
			"boardd: fs store %s: cutting a torn last line (%zu bytes) at line %zu of %s\n",
			fs->dir, dend - pos, lineno, path);
		if ((ferr = cut_file(path, pos)) != 0) {
			snprintf(err, errlen, "cannot truncate %s: %s", path, strerror(ferr));
			rc = CORE_ERR_STORE_UNAVAILABLE;
			goto out;
		}
		break;
	}
	*valid = pos;
out:
	free(buf);
	return rc;
}

/* Whether a generation holds data: its first byte is not a zero of the pre-allocated tail.
 * Unreadable counts as data (its replay says why it cannot be read). */
static bool gen_has_data(const char *path)
{
	unsigned char b = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool data;

	if (fd < 0)
		return errno != ENOENT;
	data = pread(fd, &b, 1, 0) != 0 && b != 0;
	close(fd);
	return data;
}

static int cmp_gen(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The journal generations present at or above fs->gen, sorted: *out is a new array (caller
 * frees). Those below fs->gen are deleted: leftovers of a compaction that finished (the
 * snapshot holds them). Only canonical names count ("journal.7", not "journal.07"). */
static enum core_rc gens_scan(struct fs *fs, uint64_t **out, size_t *n)
{
	char path[4096], canon[32];
	struct dirent *de;
	uint64_t g, *v = NULL, *nv;
	size_t cap = 0;
	char *end;
	DIR *d = opendir(fs->dir);

	*n = 0;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "journal.", 8) != 0 || !de->d_name[8])
			continue;
		g = strtoull(de->d_name + 8, &end, 10);
		snprintf(canon, sizeof(canon), "%" PRIu64, g);
		if (*end || strcmp(canon, de->d_name + 8) != 0)
			continue;
		if (g < fs->gen) {
			gen_path(fs, g, path, sizeof(path));
			unlink(path);
			continue;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(d);
				return CORE_ERR_NOMEM;
			}
			v = nv;
		}
		v[(*n)++] = g;
	}
	if (d)
		closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_gen);
	*out = v;
	return CORE_OK;
}

/* Syncs the file at path: what a replay read may be in the page cache only (written by a
 * process killed before its sync), and once served it must be durable. 0 or an errno. */
static int gen_sync(struct fs *fs, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno;
	if (fs_io_sync(fs, fd) != 0)
		err = errno;
	else
		fs->stats.syncs++;
	close(fd);
	return err;
}

/* Removes what a crash leaves that nothing reads: a snapshot.bin.tmp (a snapshot is installed
 * by renaming it, so one still under that name was never installed, and the journals it would
 * have replaced are all still there), and the empty generations after the last one holding
 * records (*n is lowered): a compaction killed after creating its generation, or recoveries
 * that failed on a full disk (older binaries left one per attempt). Removed from the top
 * down, each durably before the next, so that no crash leaves a gap; gens[0], the snapshot's,
 * always stays. */
static void leftovers_remove(struct fs *fs, const uint64_t *gens, size_t *n, size_t top)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/snapshot.bin.tmp", fs->dir);
	if (unlink(path) == 0)
		fprintf(stderr, "boardd: fs store %s: removed %s, a snapshot never installed\n",
			fs->dir, path);
	while (*n > top + 1) {
		gen_path(fs, gens[*n - 1], path, sizeof(path));
		if (unlink(path) != 0 || fs_dir_sync(fs->dir) != 0)
			break;
		(*n)--;
	}
}

enum core_rc fs_journal_recover(struct fs *fs, char *err, size_t errlen)
{
	char path[4096];
	uint64_t *gens = NULL, max, total = 0;
	size_t n = 0, i, last_data = 0, top = 0, valid = 0, top_valid = 0;
	enum core_rc rc;
	off_t sz;
	int ferr;

	/* The snapshot just loaded may have been renamed into place by a process killed before
	 * its directory sync: durable first, before the journals below it are deleted. */
	if (fs_dir_sync(fs->dir) != 0) {
		snprintf(err, errlen, "cannot sync %s: %s", fs->dir, strerror(errno));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	rc = gens_scan(fs, &gens, &n);
	if (rc != CORE_OK) {
		snprintf(err, errlen, "out of memory listing %s", fs->dir);
		return rc;
	}
	/* Generations run gapless from the snapshot's: a hole is data that is gone. A snapshot
	 * (fs->gen > 1: the first compaction writes generation 2) with no journal at all is
	 * one too: a compaction creates journal.G and syncs the directory before it writes
	 * snapshot G, so only a lost or deleted file leaves the snapshot alone. */
	if (!n && fs->gen > 1) {
		gen_path(fs, fs->gen, path, sizeof(path));
		snprintf(err, errlen,
			 "journal generation %s is missing (the snapshot is of generation %" PRIu64
			 "); refusing to open",
			 path, fs->gen);
		free(gens);
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	for (i = 0; i < n; i++) {
		if (gens[i] != fs->gen + i) {
			gen_path(fs, fs->gen + i, path, sizeof(path));
			snprintf(err, errlen,
				 "journal generation %s is missing (generations %" PRIu64 "..%" PRIu64
				 " expected); refusing to open",
				 path, fs->gen, gens[n - 1]);
			free(gens);
			return CORE_ERR_STORE_UNAVAILABLE;
		}
		gen_path(fs, gens[i], path, sizeof(path));
		if (gen_has_data(path))
			last_data = i;
	}
	/* A torn record may be cut only in the last generation holding data. Each is synced
	 * once replayed: what is served from now on is durable. */
	for (i = 0; i < n; i++) {
		valid = 0;
		rc = replay_gen(fs, gens[i], i >= last_data, &valid, err, errlen);
		gen_path(fs, gens[i], path, sizeof(path));
		if (rc == CORE_OK && (ferr = gen_sync(fs, path)) != 0) {
			snprintf(err, errlen, "cannot sync %s: %s", path, strerror(ferr));
			rc = CORE_ERR_STORE_UNAVAILABLE;
		}
		if (rc != CORE_OK) {
			free(gens);
			return rc;
		}
		total += valid;
		if (valid || !i) {
			top = i;
			top_valid = valid;
		}
	}
	leftovers_remove(fs, gens, &n, top);
	/* Earlier generations left by an interrupted compaction, or a journal past the limit:
	 * compacted soon after the open, not only once the newest generation alone passes it. */
	fs->compact_due = n > 1 || total > fs->compact_bytes;
	max = n ? gens[n - 1] : fs->gen; /* none: a fresh directory */
	free(gens);
	fs->gen = max;
	/* Records go on where the last generation's end (a crash leaves its zero tail, which
	 * writers fill as the pre-allocated space it is). Known before the file is opened: a
	 * close cuts the file there (fs_segment_stop), also the close of a failed open. */
	fs->jbytes = n == top + 1 ? top_valid : 0; /* else the last is empty (not removed) */
	fs->jsynced_bytes = fs->jbytes; /* all of it was read back and synced: durable */
	gen_path(fs, max, path, sizeof(path));
	fs->jfd = fs_journal_open(fs, max);
	if (fs->jfd < 0 || (sz = file_size(path)) < 0 || fs_dir_sync(fs->dir) != 0) {
		ferr = errno;
		if (fs->jfd >= 0) { /* the failed open's close leaves the file as it is */
			close(fs->jfd);
			fs->jfd = -1;
		}
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(ferr));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	fs_segment_switch_locked(fs, (uint64_t)sz);
	fs->stats.generation = fs->gen;
	fs->stats.journal_bytes = fs->jbytes;
	fs->ev_visible = fs->ctr.seq;
	return CORE_OK;
}
