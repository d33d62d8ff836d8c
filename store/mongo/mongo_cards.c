/* Cards on the Mongo twin: create, read, list (creation order, opaque cursor), patch (title,
 * body, blockers with the waiting-column placement), delete, and the label counts. Every
 * rule is core's; ordinary writes never touch the claim fields. */
#include "store/mongo/mongo.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mgo_board_filter_append(bson_t *filter, const char *board, const char *const *boards)
{
	bson_t in, arr;
	char ibuf[16];
	const char *ikey;
	uint32_t i;
	bool ok = true;

	if (board)
		ok = BSON_APPEND_UTF8(filter, "board", board);
	if (!boards || !ok)
		return ok;
	/* Both given: the one board must also be in the allowed list. */
	ok = BSON_APPEND_DOCUMENT_BEGIN(filter, board ? "$and" : "board", &in);
	if (board) {
		bson_t one;

		bson_append_document_end(filter, &in);
		return ok; /* checked by the caller against the list; see card_list */
		(void)one;
	}
	ok = ok && BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (i = 0; ok && boards[i]; i++) {
		bson_uint32_to_string(i, &ikey, ibuf, sizeof(ibuf));
		ok = BSON_APPEND_UTF8(&arr, ikey, boards[i]);
	}
	return ok && bson_append_array_end(&in, &arr) && bson_append_document_end(filter, &in);
}
