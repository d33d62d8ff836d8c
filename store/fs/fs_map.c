/* The FS twin's small containers: the string-keyed hash map behind every id lookup and
 * growable pointer arrays (the records' CRC-32 is in fs_crc.c). No locking here: the callers'
 * locks cover the structures. */
#include "store/fs/fs.h"
#include "store/fs/fs_map.h"

#include <stdlib.h>
#include <string.h>

/* ---- hash map ---- */

/* FNV-1a. Kept over faster word-at-a-time hashes: ids that differ only in their last
 * characters (generated ids, bench/scale's) land in nearby slots, so a million-card load
 * walks the id map with far fewer cache and TLB misses (a word hash scattered them: +15 % of
 * CPU for the whole load). A hash lives in memory only (slots, probes), never on disk. */
uint32_t fs_map_hash(const char *key)
{
	uint32_t h = 2166136261u;

	while (*key) {
		h ^= (unsigned char)*key++;
		h *= 16777619u;
	}
	return h;
}

/* Slot index holding key, or the empty slot where it would go. */
static size_t map_probe(const struct fs_map *m, const char *key, uint32_t h)
{
	size_t i = h & (m->cap - 1);

	while (m->slots[i].key &&
	       (m->slots[i].hash != h ||
		(m->slots[i].key != key && strcmp(m->slots[i].key, key) != 0)))
		i = (i + 1) & (m->cap - 1);
	return i;
}

void *fs_map_get_n(const struct fs_map *m, const char *key, size_t n)
{
	uint32_t h;
	size_t i;

	if (!m->cap)
		return NULL;
	h = 2166136261u;
	for (i = 0; i < n; i++) {
		h ^= (unsigned char)key[i];
		h *= 16777619u;
	}
	for (i = h & (m->cap - 1); m->slots[i].key; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].hash == h && strncmp(m->slots[i].key, key, n) == 0 &&
		    m->slots[i].key[n] == '\0')
			return m->slots[i].val;
	return NULL;
}

static void *map_get_h(const struct fs_map *m, const char *key, uint32_t h)
{
	size_t i;

	if (!m->cap)
		return NULL;
	i = map_probe(m, key, h);
	return m->slots[i].key ? m->slots[i].val : NULL;
}


void *fs_map_get(const struct fs_map *m, const char *key)
{
	return m->cap ? map_get_h(m, key, fs_map_hash(key)) : NULL;
}

static enum core_rc map_grow(struct fs_map *m, size_t want)
{
	struct fs_map_slot *slots;
	size_t cap = m->cap ? m->cap : 64, i, j;

	/* Load factor at most 1/2 keeps linear probing short. */
	while (cap < want * 2)
		cap *= 2;
	if (cap == m->cap)
		return CORE_OK;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return CORE_ERR_NOMEM;
	for (i = 0; i < m->cap; i++) {
		if (!m->slots[i].key)
			continue;
		j = m->slots[i].hash & (cap - 1);
		while (slots[j].key)
			j = (j + 1) & (cap - 1);
		slots[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return CORE_OK;
}

enum core_rc fs_map_reserve(struct fs_map *m, size_t extra)
{
	return map_grow(m, m->n + extra);
}

static enum core_rc map_put_h(struct fs_map *m, const char *key, void *val, uint32_t h);

enum core_rc fs_map_put(struct fs_map *m, const char *key, void *val)
{
	return map_put_h(m, key, val, fs_map_hash(key));
}

static enum core_rc map_put_h(struct fs_map *m, const char *key, void *val, uint32_t h)
{
	size_t i;

	if (map_grow(m, m->n + 1) != CORE_OK)
		return CORE_ERR_NOMEM;
	i = map_probe(m, key, h);
	if (!m->slots[i].key)
		m->n++;
	m->slots[i] = (struct fs_map_slot){.key = key, .val = val, .hash = h};
	return CORE_OK;
}

void *fs_map_del(struct fs_map *m, const char *key)
{
	size_t i, j, home;
	void *val;

	if (!m->cap)
		return NULL;
	i = map_probe(m, key, fs_map_hash(key));
	if (!m->slots[i].key)
		return NULL;
	val = m->slots[i].val;
	/* Backward-shift deletion: no tombstones, probes stay short after many deletes. */
	j = i;
	for (;;) {
		m->slots[i].key = NULL;
		for (;;) {
			j = (j + 1) & (m->cap - 1);
			if (!m->slots[j].key)
				goto out;
			home = m->slots[j].hash & (m->cap - 1);
			/* Move j back to i unless its home lies cyclically in (i, j]. */
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		m->slots[i] = m->slots[j];
		i = j;
	}
out:
	m->n--;
	return val;
}

void fs_map_replace(struct fs_map *m, const char *key, void *val)
{
	size_t i = map_probe(m, key, fs_map_hash(key));

	if (!m->slots[i].key)
		abort(); /* the caller's invariant: the key is present */
	m->slots[i].key = key;
	m->slots[i].val = val;
}

void fs_map_release(struct fs_map *m)
{
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

/* ---- the card id table ---- */

static size_t ids_probe(const struct fs_ids *t, const char *id, uint32_t h)
{
	size_t i = h & (t->cap - 1);

	while (t->slots[i].ent &&
	       (t->slots[i].hash != h || strcmp(fs_ent_id(t->slots[i].ent), id) != 0))
		i = (i + 1) & (t->cap - 1);
	return i;
}

struct fs_card_ent *fs_ids_get_h(const struct fs_ids *t, const char *id, uint32_t h)
{
	return t->cap ? t->slots[ids_probe(t, id, h)].ent : NULL;
}

void fs_ids_prefetch(const struct fs_ids *t, uint32_t h)
{
	if (t->cap)
		__builtin_prefetch(&t->slots[h & (t->cap - 1)]);
}

struct fs_card_ent *fs_ids_get(const struct fs_ids *t, const char *id)
{
	return fs_ids_get_h(t, id, fs_map_hash(id));
}

enum core_rc fs_ids_reserve(struct fs_ids *t, size_t extra)
{
	struct fs_ids_slot *slots;
	size_t cap = t->cap ? t->cap : 64, i, j;

	while (cap < (t->n + extra) * 2)
		cap *= 2;
	if (cap == t->cap)
		return CORE_OK;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return CORE_ERR_NOMEM;
	for (i = 0; i < t->cap; i++) {
		if (!t->slots[i].ent)
			continue;
		j = t->slots[i].hash & (cap - 1);
		while (slots[j].ent)
			j = (j + 1) & (cap - 1);
		slots[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return CORE_OK;
}

void fs_ids_put(struct fs_ids *t, struct fs_card_ent *ent)
{
	fs_ids_put_h(t, ent, fs_map_hash(fs_ent_id(ent)));
}

void fs_ids_put_h(struct fs_ids *t, struct fs_card_ent *ent, uint32_t h)
{
	size_t i;

	if (t->n + 1 > t->cap / 2)
		abort(); /* reserved by the caller: cannot happen */
	i = h & (t->cap - 1);
	while (t->slots[i].ent)
		i = (i + 1) & (t->cap - 1);
	t->slots[i] = (struct fs_ids_slot){.ent = ent, .hash = h};
	t->n++;
}

struct fs_card_ent *fs_ids_del(struct fs_ids *t, const char *id)
{
	struct fs_card_ent *ent;
	size_t i, j, home;

	if (!t->cap)
		return NULL;
	i = ids_probe(t, id, fs_map_hash(id));
	ent = t->slots[i].ent;
	if (!ent)
		return NULL;
	/* Backward-shift deletion, as fs_map_del. */
	for (j = i;;) {
		t->slots[i].ent = NULL;
		for (;;) {
			j = (j + 1) & (t->cap - 1);
			if (!t->slots[j].ent)
				goto out;
			home = t->slots[j].hash & (t->cap - 1);
			if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
				continue;
			break;
		}
		t->slots[i] = t->slots[j];
		i = j;
	}
out:
	t->n--;
	return ent;
}

void fs_ids_release(struct fs_ids *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- pointer arrays ---- */

enum core_rc fs_ptrs_reserve(void *arrp, size_t *cap, size_t want)
{
	void ***arr = arrp;
	void **nv;
	size_t nc = *cap ? *cap : 16;

	if (want <= *cap)
		return CORE_OK;
	while (nc < want)
		nc *= 2;
	nv = realloc(*arr, nc * sizeof(void *));
	if (!nv)
		return CORE_ERR_NOMEM;
	*arr = nv;
	*cap = nc;
	return CORE_OK;
}
