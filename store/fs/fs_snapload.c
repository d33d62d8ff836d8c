/* Loading the FS twin's snapshot at open: snapshot.bin read through a mapping given back as
 * it is decoded, its records framed, decoded and applied on two threads (the same calls in
 * the same order as the serial load), or the snapshot.json of earlier versions (fs_legacy.c)
 * when there is no .bin. Writing snapshots and compaction are fs_snapshot.c's. */
#include "store/fs/fs.h"
#include "store/fs/fs_change.h"
#include "store/fs/fs_codec.h"
#include "store/fs/fs_flat.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_io.h"
#include "store/fs/fs_map.h"
#include "store/fs/fs_snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The snapshot is read through a private read-only mapping (no copy, no anonymous pages to
 * clear), and what was decoded is unmapped every SNAP_UNMAP_STEP bytes, so a 230 MB snapshot
 * never sits whole in memory beside the state it becomes. */
#define SNAP_UNMAP_STEP ((size_t)16 << 20)

struct snap_map {
	char *buf;
	size_t len;
	size_t unmapped; /* bytes at the start already given back */
	bool mapped;     /* else buf came from fs_file_read (an empty file) */
};

static bool snap_map_open(const char *path, struct snap_map *m, int *ferr)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *p;

	memset(m, 0, sizeof(*m));
	if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_size > 0) {
		p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p != MAP_FAILED) {
			close(fd);
			madvise(p, (size_t)sb.st_size, MADV_SEQUENTIAL);
			m->buf = p;
			m->len = (size_t)sb.st_size;
			m->mapped = true;
			return true;
		}
	}
	if (fd >= 0)
		close(fd);
	m->buf = fs_file_read(path, &m->len, ferr);
	return m->buf != NULL;
}

/* Gives back the pages wholly before pos. */
static void snap_map_done_upto(struct snap_map *m, size_t pos)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), upto = pos / page * page;

	if (m->mapped && upto >= m->unmapped + SNAP_UNMAP_STEP) {
		munmap(m->buf + m->unmapped, upto - m->unmapped);
		m->unmapped = upto;
	}
}

static void snap_map_close(struct snap_map *m)
{
	if (m->mapped)
		munmap(m->buf + m->unmapped, m->len - m->unmapped);
	else
		free(m->buf);
}

/* ---- loading snapshot.bin ----
 * Three steps:
 *   1. frame: walk the record headers (each checks its own CRC) to the end record, noting
 *      where each chunk's payload is and, from its entry count, how many cards to expect;
 *   2. reserve the id map and the creation order for that many cards at once (no rehash
 *      while loading);
 *   3. the opening thread checks each payload's CRC and decodes it (fs_change_decode_bin:
 *      flat cards, names interned, ids hashed), up to SNAP_RING chunks ahead of a second
 *      thread that resolves, reserves and applies them in file order — the same calls, in
 *      the same order, as the serial load (serial_load, or a snapshot of a few chunks), so
 *      the state is the same. The decoder is the opening thread because it makes nearly
 *      every allocation (the cards): glibc grows the main arena by brk in steps of
 *      M_TOP_PAD, a thread's arena by one mprotect per page (that cost ~20 % of a
 *      decoding thread's time). What the applier leaves of a change (its arrays and ids)
 *      is freed by the decoder when it reuses the slot, in the arena it came from. The two
 *      threads share fs->atoms: the decoder interns under atoms_mu, and the applier takes
 *      atoms_mu only for a change that would intern (a claim-only entry or a card that is
 *      not flat: neither is in a snapshot this version writes).
 * Every record must be sound and the end record present, with the count of chunks before it;
 * anything else is a damaged snapshot and the open is refused. */

struct snap_rec {
	const char *payload;
	size_t plen;
	unsigned kind;
};

/* Decoded chunks the decoder may run ahead of the applier. */
#define SNAP_RING 8

struct snap_load {
	struct fs *fs;
	size_t n_recs;
	bool threaded;
	pthread_t thread;         /* the applier, when threaded */
	pthread_mutex_t mu;       /* guards decoded, applied, apply_rc, ring_rc */
	pthread_cond_t cond;
	pthread_mutex_t atoms_mu; /* fs->atoms while both threads run */
	size_t decoded, applied;  /* records handed over / done with (their slot free again) */
	enum core_rc apply_rc;    /* the applier's failure (out of memory): it stopped */
	struct fs_change ring[SNAP_RING]; /* record i in slot i % SNAP_RING */
	enum core_rc ring_rc[SNAP_RING];  /* its decode: not OK = damaged, the last one */
};

/* Payload CRC and decode of record r into ch (left empty on failure); the cards' ids are
 * hashed here too, while they are in this thread's cache (fs_change_reserve uses the hash). */
static enum core_rc snap_decode(struct fs_atoms *atoms, const struct snap_rec *r,
				struct fs_change *ch)
{
	size_t i;

	memset(ch, 0, sizeof(*ch));
	if (!fs_rec_payload_ok(r->payload, r->plen))
		return CORE_ERR_STORE_UNAVAILABLE;
	if (fs_change_decode_bin(r->kind, r->payload, r->plen, atoms, ch) != CORE_OK)
		return CORE_ERR_STORE_UNAVAILABLE;
	for (i = 0; i < ch->n_cards; i++) {
		ch->cards[i].hash = fs_map_hash(ch->cards[i].id);
		ch->cards[i].hashed = true;
	}
	return CORE_OK;
}

/* Does applying ch intern names (fs_change_resolve, fs_change_reserve)? */
static bool snap_change_interns(const struct fs_change *ch)
{
	size_t i;

	for (i = 0; i < ch->n_cards; i++)
		if (ch->cards[i].card && (ch->cards[i].claim_only || !ch->cards[i].card->flat))
			return true;
	return false;
}

/* Resolves, reserves and applies ch; threaded, what is left of it stays in its slot for the
 * decoder to free. */
static enum core_rc snap_apply(struct snap_load *l, struct fs_change *ch)
{
	bool lock = l->threaded && snap_change_interns(ch);
	enum core_rc rc;

	if (lock)
		pthread_mutex_lock(&l->atoms_mu);
	rc = fs_change_resolve(l->fs, ch);
	if (rc == CORE_OK)
		rc = fs_change_reserve(l->fs, ch);
	if (lock)
		pthread_mutex_unlock(&l->atoms_mu);
	if (rc != CORE_OK) {
		fs_change_release(ch);
		return rc;
	}
	if (l->threaded)
		fs_change_apply_keep(l->fs, ch, NULL);
	else
		fs_change_apply(l->fs, ch, NULL);
	return CORE_OK;
}

/* The applier: every record in order, until one was damaged or it runs out of memory. */
static void *snap_applier_main(void *arg)
{
	struct snap_load *l = arg;
	enum core_rc rc;
	size_t i;

	for (i = 0; i < l->n_recs; i++) {
		pthread_mutex_lock(&l->mu);
		while (l->decoded <= i)
			pthread_cond_wait(&l->cond, &l->mu);
		rc = l->ring_rc[i % SNAP_RING];
		pthread_mutex_unlock(&l->mu);
		if (rc != CORE_OK)
			break; /* damaged: the decoder stopped there */
		rc = snap_apply(l, &l->ring[i % SNAP_RING]);
		pthread_mutex_lock(&l->mu);
		l->applied = i + 1;
		l->apply_rc = rc;
		pthread_cond_broadcast(&l->cond);
		pthread_mutex_unlock(&l->mu);
		if (rc != CORE_OK)
			break;
	}
	return NULL;
}

/* Starts the applier thread; false (and nothing to undo) when it cannot. */
static bool snap_thread_start(struct snap_load *l)
{
	if (pthread_mutex_init(&l->mu, NULL) != 0)
		return false;
	if (pthread_cond_init(&l->cond, NULL) != 0)
		goto no_cond;
	if (pthread_mutex_init(&l->atoms_mu, NULL) != 0)
		goto no_atoms;
	l->threaded = true;
	if (pthread_create(&l->thread, NULL, snap_applier_main, l) == 0)
		return true;
	l->threaded = false;
	pthread_mutex_destroy(&l->atoms_mu);
no_atoms:
	pthread_cond_destroy(&l->cond);
no_cond:
	pthread_mutex_destroy(&l->mu);
	return false;
}

/* The entry count of a chunk's payload (after its counters), as a hint for reservations:
 * bounded by what the payload could hold; 0 when it is not there. */
static size_t snap_rec_cards_hint(const struct snap_rec *r)
{
	const unsigned char *p = (const unsigned char *)r->payload + 32;
	uint32_t n;

	if (r->plen < 36)
		return 0;
	n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return n < r->plen / 16 ? n : r->plen / 16;
}

/* Snapshots of at least this many records are loaded by two threads. */
#define SNAP_THREAD_MIN_RECS 4

/* Step 3: decodes every record here, applied here too or by the applier thread. Returns
 * CORE_OK, CORE_ERR_STORE_UNAVAILABLE (record *bad damaged) or the applier's failure. */
static enum core_rc snap_load_records(struct snap_load *l, const struct snap_rec *recs,
				      struct snap_map *map, size_t *bad)
{
	enum core_rc rc = CORE_OK, arc = CORE_OK;
	size_t i, k;

	for (i = 0; i < l->n_recs && rc == CORE_OK; i++) {
		struct fs_change *ch = &l->ring[i % SNAP_RING];

		if (l->threaded) {
			pthread_mutex_lock(&l->mu);
			while (l->apply_rc == CORE_OK && i - l->applied >= SNAP_RING)
				pthread_cond_wait(&l->cond, &l->mu);
			arc = l->apply_rc;
			pthread_mutex_unlock(&l->mu);
			if (arc != CORE_OK)
				break;
			/* The slot is ours: what the applier left of record i - SNAP_RING goes
			 * first (allocated here, freed here). */
			fs_change_release(ch);
			pthread_mutex_lock(&l->atoms_mu);
			rc = snap_decode(&l->fs->atoms, &recs[i], ch);
			pthread_mutex_unlock(&l->atoms_mu);
			pthread_mutex_lock(&l->mu);
			l->ring_rc[i % SNAP_RING] = rc;
			l->decoded = i + 1;
			pthread_cond_broadcast(&l->cond);
			pthread_mutex_unlock(&l->mu);
		} else {
			rc = snap_decode(&l->fs->atoms, &recs[i], ch);
			if (rc == CORE_OK && (arc = snap_apply(l, ch)) != CORE_OK)
				break;
		}
		if (rc != CORE_OK)
			*bad = i;
		/* Decoded changes own copies: nothing refers to the bytes behind us. */
		snap_map_done_upto(map, (size_t)(recs[i].payload - map->buf) - FS_REC_HDR);
	}
	if (l->threaded) {
		pthread_join(l->thread, NULL); /* it stops at the end, a damaged record or OOM */
		arc = l->apply_rc;
		for (k = 0; k < SNAP_RING; k++) /* applied or not */
			fs_change_release(&l->ring[k]);
		pthread_mutex_destroy(&l->atoms_mu);
		pthread_cond_destroy(&l->cond);
		pthread_mutex_destroy(&l->mu);
	}
	return arc != CORE_OK ? arc : rc;
}

static enum core_rc snapshot_load_bin(struct fs *fs, const char *path, char *err,
				      size_t errlen)
{
	struct snap_load l = {.fs = fs};
	struct snap_rec *recs = NULL;
	struct fs_counters ctr;
	struct snap_map map;
	const char *payload;
	uint64_t want = 0, gen = 0;
	size_t pos = 0, plen, n = 0, cap = 0, hint = 0, bad = 0;
	unsigned kind;
	bool ended = false;
	enum core_rc rc = CORE_OK;
	int ferr = 0;

	if (!snap_map_open(path, &map, &ferr)) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(ferr));
		return CORE_ERR_STORE_UNAVAILABLE;
	}
	/* 1. Frame every record up to the end record. */
	while (pos < map.len && !ended) {
		if (fs_rec_frame(map.buf + pos, map.len - pos, &kind, &payload, &plen) != FS_REC_OK)
			break;
		pos += FS_REC_HDR + plen;
		if (kind == FS_REC_SNAP_END) {
			ended = fs_rec_payload_ok(payload, plen) &&
				fs_snap_end_decode(payload, plen, &gen, &ctr, &want) == CORE_OK;
			if (!ended)
				break;
			continue;
		}
		if (n == cap) {
			struct snap_rec *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(recs, cap * sizeof(*recs));
			if (!nv) {
				rc = CORE_ERR_NOMEM;
				goto out;
			}
			recs = nv;
		}
		recs[n++] = (struct snap_rec){payload, plen, kind};
		hint += snap_rec_cards_hint(&recs[n - 1]);
	}
	if (!ended || pos != map.len || want != n || gen < 1) {
		/* The records before the damage are not worth decoding: the open is refused. */
		rc = CORE_ERR_STORE_UNAVAILABLE;
		bad = n;
		goto out;
	}
	/* 2. Room for every card at once (a hint: reserve grows past it if need be). */
	if (fs_ids_reserve(&fs->cards, hint) != CORE_OK ||
	    fs_ptrs_reserve(&fs->order, &fs->cap_order, fs->n_order + hint) != CORE_OK) {
		rc = CORE_ERR_NOMEM;
		goto out;
	}
	/* 3. Decode and apply, in order (on two threads when there is enough to share). */
	l.n_recs = n;
	if (!fs->serial_load && n >= SNAP_THREAD_MIN_RECS)
		snap_thread_start(&l); /* else (or when it cannot) the serial load */
	rc = snap_load_records(&l, recs, &map, &bad);
	if (rc == CORE_OK)
		fs->gen = gen;
out:
	if (rc == CORE_ERR_STORE_UNAVAILABLE)
		snprintf(err, errlen,
			 "snapshot %s is damaged or truncated (record %zu); refusing to open", path,
			 bad + 1);
	else if (rc != CORE_OK)
		snprintf(err, errlen, "out of memory loading %s", path);
	free(recs);
	snap_map_close(&map);
	return rc;
}

enum core_rc fs_snapshot_load(struct fs *fs, char *err, size_t errlen)
{
	char path[4096];
	struct stat sb;

	fs->gen = 1;
	snprintf(path, sizeof(path), "%s/snapshot.bin", fs->dir);
	if (stat(path, &sb) == 0)
		return snapshot_load_bin(fs, path, err, errlen);
	snprintf(path, sizeof(path), "%s/snapshot.json", fs->dir);
	if (stat(path, &sb) != 0 && errno == ENOENT)
		return CORE_OK;
	return fs_legacy_snapshot_load(fs, path, err, errlen);
}
