/* The FS twin's string-keyed hash map (fs_map.c: open addressing, linear probing), its
 * CRC-32 (fs_crc.c) and pointer-array growth: the building blocks every fs file shares. */
#ifndef BOARDD_STORE_FS_FS_MAP_H
#define BOARDD_STORE_FS_FS_MAP_H

#include "core/core.h"

#include <stddef.h>
#include <stdint.h>

struct fs_map_slot {
	const char *key; /* borrowed from the value */
	void *val;
	uint32_t hash;
};

struct fs_map {
	struct fs_map_slot *slots;
	size_t cap; /* 0 or a power of two */
	size_t n;
};

void *fs_map_get(const struct fs_map *m, const char *key);
/* The same for the n bytes at key (no NUL needed). */
void *fs_map_get_n(const struct fs_map *m, const char *key, size_t n);
/* Inserts or replaces (key and value). NOMEM leaves the map unchanged. */
enum core_rc fs_map_put(struct fs_map *m, const char *key, void *val);
/* The hash the maps (and the card id table) file key under: a load hashes each id once (by
 * its decoder), not at every lookup. */
uint32_t fs_map_hash(const char *key);
/* Ensures `extra` more inserts cannot fail. */
enum core_rc fs_map_reserve(struct fs_map *m, size_t extra);
/* Removes key; returns its value or NULL. */
void *fs_map_del(struct fs_map *m, const char *key);
/* Frees the slots only (values belong to the caller). */
void fs_map_release(struct fs_map *m);
/* Replaces the value (and key) of a key that is present; never allocates. */
void fs_map_replace(struct fs_map *m, const char *key, void *val);

/* CRC-32 (IEEE 802.3, reflected) of len bytes (fs_crc.c): carry-less multiplies where the
 * CPU has them, else tables; fs_crc32_tables is always the tables (tests compare the two). */
uint32_t fs_crc32(const void *buf, size_t len);
uint32_t fs_crc32_tables(const void *buf, size_t len);
/* Grows the pointer array *arrp (any T **) to hold `want` entries, doubling. */
enum core_rc fs_ptrs_reserve(void *arrp, size_t *cap, size_t want);

#endif
