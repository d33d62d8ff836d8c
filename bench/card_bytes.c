/* card_bytes — where the memory of an FS store goes, per card, by structure.
 *
 *   card_bytes DIR        # a store directory no server holds (e.g. kept by `scale -k`)
 *
 * Opens the store in-process (as boardd would), then walks its state and counts the bytes of
 * each structure as malloc holds them (malloc_usable_size + its 8-byte header for blocks,
 * capacity x slot size for tables and arrays), and prints them divided by the live cards,
 * beside malloc's own total (mallinfo2) and the process's RSS. What the walk does not name
 * (runs, events, effect records, malloc's free space) is the difference. */
#include "core/core.h"
#include "store/fs/fs.h"
#include "store/fs/fs_index.h"
#include "store/fs/fs_map.h"
#include "store/store.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t chunk(const void *p)
{
	return p ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

/* A map of posting lists: the slots, each list's block, its member array and its cache. */
static size_t posts_bytes(const struct fs_map *m)
{
	size_t i, n = m->cap * sizeof(*m->slots);

	for (i = 0; i < m->cap; i++) {
		const struct fs_post *p = m->slots[i].key ? m->slots[i].val : NULL;

		if (p)
			n += chunk(p) + chunk(p->key) + chunk(p->v) + chunk(p->top);
	}
	return n;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kib = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	struct store_fs_options o = {0};
	struct store *st;
	struct fs *fs;
	struct mallinfo2 mi;
	char err[512];
	size_t i, live = 0, tails = 0, cards = 0, ents = 0, named;
	size_t idmap, order, posts, heaps, runs_map;
	double per;

	if (argc != 2) {
		fprintf(stderr, "usage: card_bytes DIR\n");
		return 2;
	}
	o.dir = argv[1];
	if (store_fs_open(&o, &st, err, sizeof err) != CORE_OK) {
		fprintf(stderr, "card_bytes: %s\n", err);
		return 1;
	}
	fs = fs_of(st);
	pthread_rwlock_rdlock(&fs->lock);
	for (i = 0; i < fs->n_order; i++) {
		const struct fs_card_ent *e = fs->order[i];

		ents += chunk(e);
		if (e->dead || !e->card)
			continue;
		live++;
		tails += e->card->more != NULL;
		cards += chunk(e->card);
	}
	idmap = fs->cards.cap * sizeof(*fs->cards.slots);
	order = fs->cap_order * sizeof(*fs->order);
	posts = posts_bytes(&fs->post_states) + posts_bytes(&fs->post_labels) +
		posts_bytes(&fs->deps);
	heaps = (fs->cap_claimed + fs->cap_recov + fs->cap_attn) * sizeof(void *);
	runs_map = fs->runs.cap * sizeof(*fs->runs.slots);
	pthread_rwlock_unlock(&fs->lock);
	mi = mallinfo2();
	per = live ? (double)live : 1.0;
	named = cards + ents + idmap + order + posts + heaps;
	printf("%zu live cards (%zu with the tail of rare fields), %zu runs\n", live, tails,
	       fs->runs.n);
	printf("%-44s %12s %10s\n", "structure", "MiB", "B/card");
#define ROW(name, bytes)                                                                  \
	printf("%-44s %12.1f %10.1f\n", name, (double)(bytes) / 1048576.0, (double)(bytes) / per)
	ROW("published cards (blocks)", cards);
	ROW("index entries", ents);
	ROW("id map slots", idmap);
	ROW("state / label / blocker lists", posts);
	ROW("creation order array", order);
	ROW("claimed heap, recovery and attention sets", heaps);
	ROW("all of the above", named);
	ROW("runs map slots (runs themselves not counted)", runs_map);
	ROW("malloc: in use (uordblks + mmapped)", mi.uordblks + mi.hblkhd);
	ROW("malloc: free inside its heaps (fordblks)", mi.fordblks);
	ROW("process RSS", (size_t)rss_kib() * 1024);
#undef ROW
	store_close(st);
	return 0;
}
