/* mongo_codec — cards, runs, boards and events as stored (mongo.h has the shapes), and
 * JSON <-> BSON for event payloads (mongo_codec.c). */
#ifndef BOARDD_STORE_MONGO_MONGO_CODEC_H
#define BOARDD_STORE_MONGO_MONGO_CODEC_H

#include "store/mongo/mongo.h"

/* ---- codec (mongo_codec.c) ---- */

/* Whole documents for insert. */
bool mgo_card_to_bson(const struct core_card *c, int64_t ord, bson_t *doc);
bool mgo_run_to_bson(const struct core_run *r, bson_t *doc);
bool mgo_board_to_bson(const struct core_board *b, bson_t *doc);
/* Pieces. */
bool mgo_claim_append(bson_t *doc, const char *key, const struct core_claim *cl);
bool mgo_gave_up_append(bson_t *doc, const char *key, const struct core_gave_up *g);
bool mgo_strv_append(bson_t *doc, const char *key, const struct core_strv *sv);
bool mgo_comment_append(bson_t *arr, const char *key, const struct core_comment *cm);
/* Readers: BAD_REQUEST for a malformed document, NOMEM; nothing allocated on failure. */
enum core_rc mgo_card_from_bson(const bson_t *doc, struct core_card **out);
enum core_rc mgo_run_from_bson(const bson_t *doc, struct core_run **out);
enum core_rc mgo_board_from_bson(const bson_t *doc, struct core_board *out);
enum core_rc mgo_event_from_bson(const bson_t *doc, struct core_event *out);
/* JSON <-> BSON for event payloads. _to_bson appends object o as a subdocument. */
bool mgo_json_append(bson_t *doc, const char *key, const json_t *o);
/* A new reference to the JSON form of a (sub)document; NULL on failure. */
json_t *mgo_bson_to_json(const bson_t *doc);
/* An int64 from a numeric or date field; false when absent/other. */
bool mgo_iter_i64(const bson_iter_t *it, int64_t *v);

#endif
