/* A card with every field set (card_fixture.h). */
#include "tests/common/card_fixture.h"

#include <check.h>
#include <stdlib.h>

/* A card with every field set, so a round trip has something to lose. */
struct core_card *fixture_full_card(void)
{
	struct core_card *c = core_card_new();

	ck_assert_ptr_nonnull(c);
	core_str_set(&c->id, "c-1");
	core_str_set(&c->board, "default");
	core_str_set(&c->title, "T \"quoted\"\nline");
	core_str_set(&c->body, "b\xc3\xa9");
	core_str_set(&c->state, "in_progress");
	c->priority = -7;
	core_strv_push(&c->labels, "x");
	core_strv_push(&c->labels, "y");
	core_strv_push(&c->blockers, "c-0");
	c->comments = calloc(1, sizeof(*c->comments));
	c->n_comments = 1;
	core_str_set(&c->comments[0].id, "cm-1");
	core_str_set(&c->comments[0].author, "alice");
	core_str_set(&c->comments[0].body, "hi");
	c->comments[0].created_at = 1780000000123;
	c->claim.present = true;
	core_str_set(&c->claim.marker, "host-42");
	c->claim.claimed_at = 1780000000000;
	c->claim.has_lease = true;
	c->claim.lease_until = 1780000060000;
	c->claim.lease_ms = 60000;
	c->has_epoch = true;
	c->claim_epoch = 7;
	core_str_set(&c->last_run_id, "r-9");
	c->awaiting_input = true;
	c->gave_up.set = true;
	core_str_set(&c->gave_up.reason, "run_pruned");
	core_str_set(&c->gave_up.run_id, "r-8");
	c->gave_up.at = 1780000001000;
	core_str_set(&c->state_reason, "launch");
	c->created_at = 1780000000001;
	c->updated_at = 1780000000002;
	c->state_at = 1780000000003;
	core_str_set(&c->claim.from, "ready"); /* DESIGN §17 */
	c->not_before = 1780000090000;
	c->attempts = 3;
	return c;
}
