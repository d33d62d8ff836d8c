/* A store fixture both twins' reaper tests share; see sub_fixture.h. */
#include "tests/store/sub_fixture.h"

#include <check.h>
#include <stdbool.h>

void fx_subscribe_all(struct store *st)
{
	struct store_sub in = {.board = "default", .name = "all", .url = "http://127.0.0.1:9/x",
			       .enabled = true};
	struct store_sub *out = NULL;
	bool created;
	int t;

	for (t = 0; t < CORE_EV_COUNT_; t++)
		if (core_event_type_subscribable(t))
			ck_assert_int_eq(core_strv_push(&in.on.dim[CORE_SUB_TYPES],
							core_event_type_name(t)),
					 CORE_OK);
	ck_assert_int_eq(store_sub_put(st, &in, "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", &created,
				       &out),
			 CORE_OK);
	store_sub_free(out);
	core_sub_filter_release(&in.on);
}
