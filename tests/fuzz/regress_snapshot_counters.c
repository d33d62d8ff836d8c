/* Regression (found by fuzz target B; fixed in store/fs by fa975d0): recovery trusted the
 * counters a snapshot states without checking them against the data it loads. A snapshot
 * whose "ctr.seq" is behind its own events (here 1, with an event seq 2) opened fine; the next
 * write's event was handed seq 2 again, and after a restart that event was gone from the log
 * while its card was there: an acknowledged write lost its event.
 *
 * Expected: the store refuses the snapshot or repairs the counter to the highest seq it
 * loaded, and every acknowledged write keeps its event across a restart. */
#include "store/store_twins.h"
#include "tests/fuzz/fuzz.h"

#include <stdio.h>
#include <string.h>

#define COLS                                                                                     \
	"[{\"name\":\"inbox\",\"terminal\":false,\"eligible\":false},"                          \
	"{\"name\":\"ready\",\"terminal\":false,\"eligible\":true},"                            \
	"{\"name\":\"waiting_deps\",\"terminal\":false,\"eligible\":false},"                    \
	"{\"name\":\"in_progress\",\"terminal\":false,\"eligible\":true},"                      \
	"{\"name\":\"done\",\"terminal\":true,\"eligible\":false},"                             \
	"{\"name\":\"blocked\",\"terminal\":true,\"eligible\":false}]"

static const char snapshot[] =
	"{\"version\":1,\"gen\":1,\"ctr\":{\"seq\":1,\"card\":0,\"run\":0,\"ord\":0},"
	"\"boards\":[{\"name\":\"default\",\"columns\":" COLS ",\"running\":\"in_progress\","
	"\"completed\":\"done\",\"failed\":\"blocked\",\"waiting\":\"waiting_deps\"}],"
	"\"cards\":[],\"runs\":[],"
	"\"events\":[{\"seq\":2,\"at\":\"2026-01-01T00:00:00.000Z\",\"board\":\"default\","
	"\"type\":\"board_updated\",\"card_id\":null,\"actor\":\"\",\"reason\":null,"
	"\"machine\":false,\"payload\":{\"created\":true}}]}\n";

/* Does the log hold a card_created event for card `id`? */
static bool created_event(struct store *st, const char *id)
{
	struct core_event *ev = NULL;
	int64_t next = 0;
	size_t n = 0, i;
	bool found = false;

	if (store_events_list(st, NULL, NULL, 0, 1000, 0, &ev, &n, &next) != CORE_OK)
		fuzz_die("events_list");
	for (i = 0; i < n; i++)
		if (ev[i].card_id && strcmp(ev[i].card_id, id) == 0 &&
		    ev[i].type == CORE_EV_CARD_CREATED)
			found = true;
	store_events_free(ev, n);
	return found;
}

int main(void)
{
	struct store_fs_options o = {0};
	struct store_card_create in = {.id = "acked", .state = "ready"};
	struct store_actor actor = {.name = "t"};
	struct store *st = NULL;
	struct core_card *c = NULL;
	char dir[256], path[512], err[512] = "";
	FILE *f;
	bool before, after;
	enum core_rc rc;

	fuzz_tmpdir(dir, sizeof dir, "counters");
	o.dir = dir;
	snprintf(path, sizeof path, "%s/snapshot.json", dir);
	f = fopen(path, "w");
	if (!f || fputs(snapshot, f) == EOF || fclose(f) != 0)
		fuzz_die("write %s", path);
	rc = store_fs_open(&o, &st, err, sizeof err);
	if (rc != CORE_OK) {
		printf("ok: the inconsistent snapshot is refused: %s\n", err);
		fuzz_rmtree(dir);
		return 0;
	}
	if (store_card_create(st, &in, &actor, &c) != CORE_OK)
		fuzz_die("create");
	core_card_free(c);
	before = created_event(st, "acked");
	store_close(st);
	if (store_fs_open(&o, &st, err, sizeof err) != CORE_OK)
		fuzz_die("reopen: %s", err);
	after = created_event(st, "acked");
	rc = store_card_get(st, "acked", &c);
	core_card_free(c);
	store_close(st);
	fuzz_rmtree(dir);
	printf("%s: acknowledged card %s after restart; its card_created event %s before the "
	       "restart, %s after\n",
	       before && after ? "ok" : "FAIL", rc == CORE_OK ? "present" : "MISSING",
	       before ? "present" : "missing", after ? "present" : "MISSING");
	return before && after && rc == CORE_OK ? 0 : 1;
}
