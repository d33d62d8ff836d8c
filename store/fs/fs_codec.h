/* The FS twin's record formats: the binary records journals and snapshots are made of
 * (fs_codec.c writes them, fs_decode.c reads them), and the JSON formats of earlier
 * versions, read only (fs_legacy.c). */
#ifndef BOARDD_STORE_FS_FS_CODEC_H
#define BOARDD_STORE_FS_FS_CODEC_H

#include "store/fs/fs_change.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- binary records (fs_codec.c): the journal's and the snapshot's unit ---- */

#define FS_REC_MAGIC 0xFB
#define FS_REC_HDR 16
/* A string's length word when the string is NULL. */
#define FS_REC_STR_NULL 0xFFFFFFFFu
enum fs_rec_kind {
	FS_REC_CHANGE = 1,   /* a change: a journal commit, or a chunk of a snapshot */
	FS_REC_SNAP_END = 2, /* a snapshot's last record: gen, counters, chunk count */
	/* A change with claim holders, run claim epochs, epoch floors and claim-only entries
	 * (DESIGN §11). FS_REC_CHANGE is still read. */
	FS_REC_CHANGE2 = 3,
	/* FS_REC_CHANGE2 with each event's board_seq and the boards' counters (DESIGN §11);
	 * what this version writes. The earlier two are still read (board_seq derived). */
	FS_REC_CHANGE3 = 4,
	/* FS_REC_CHANGE3 with DESIGN §17's fields: a claim's `from` after its holder (card
	 * records and claim-only entries), a card's not_before and attempts (flag 64), a
	 * column's limit (column flag 4) and a board's max_claims and retry (a flag byte after
	 * `waiting`); what this version writes. The earlier three are still read (none of
	 * those fields: no schedule, no attempts, claims taken from no column). */
	FS_REC_CHANGE4 = 5,
};
enum fs_rec_status {
	FS_REC_OK,
	FS_REC_TORN,        /* a prefix of a record: the file ends inside it */
	FS_REC_BAD,         /* the header is damaged: its length cannot be trusted */
	FS_REC_BAD_PAYLOAD, /* a sound header over a payload whose CRC fails */
};

/* One framed record for ch (events carry their seq already); caller frees. NULL on OOM. */
char *fs_change_encode(const struct fs_change *ch, size_t *len);
/* The same record written into *buf (*cap bytes, grown as needed and kept for the next one:
 * a commit allocated and freed one every time). Returns *buf; NULL on OOM, *buf freed and
 * NULL, *cap 0. */
char *fs_change_encode_in(const struct fs_change *ch, char **buf, size_t *cap, size_t *len);
/* A snapshot chunk (the same payload as a change, from bare published pointers); floors go
 * as floor-only entries. */
struct fs_snap_floor {
	const char *id; /* borrowed */
	int64_t epoch;
};
char *fs_snap_chunk_encode(const struct fs_counters *ctr, const struct core_board *boards,
			   size_t n_boards, const struct fs_card *const *cards,
			   const uint64_t *ords, size_t n_cards, const struct core_run *const *runs,
			   size_t n_runs, const struct core_event *const *events, size_t n_events,
			   const struct fs_snap_floor *floors, size_t n_floors,
			   const struct fs_bctr *bctrs, size_t n_bctrs,
			   const struct fs_kv *kvs, size_t n_kvs, size_t *len);
char *fs_snap_end_encode(uint64_t gen, const struct fs_counters *ctr, uint64_t n_records,
			 size_t *len);
/* Frames the record at buf (avail bytes from there on): on FS_REC_OK and FS_REC_BAD_PAYLOAD
 * *kind, *payload and *plen describe it (the record is FS_REC_HDR + *plen bytes). */
enum fs_rec_status fs_rec_check(const char *buf, size_t avail, unsigned *kind,
				const char **payload, size_t *plen);
/* fs_rec_check in two steps: the header alone (FS_REC_OK: framed, the payload unchecked), then
 * the payload's CRC (payload as framed, FS_REC_HDR bytes after its header): the snapshot
 * load frames every record first and checks the payloads on its decoding thread. */
enum fs_rec_status fs_rec_frame(const char *buf, size_t avail, unsigned *kind,
				const char **payload, size_t *plen);
bool fs_rec_payload_ok(const char *payload, size_t plen);
/* Decodes a FS_REC_CHANGE .. FS_REC_CHANGE4 payload (`kind`). BAD_REQUEST
 * when malformed or of another kind (ch left empty). Its whole cards are in their published
 * form (pub, fs_flat.c), sharing atoms (NULL: none); claim-only entries are ordinary cards. */
enum core_rc fs_change_decode_bin(unsigned kind, const char *payload, size_t len,
				  struct fs_atoms *atoms, struct fs_change *ch);
enum core_rc fs_snap_end_decode(const char *payload, size_t len, uint64_t *gen,
				struct fs_counters *ctr, uint64_t *n_records);

/* ---- the JSON formats of earlier versions, read only (fs_legacy.c) ---- */

/* Parses the JSON part of a journal line into ch. BAD_REQUEST when malformed (ch empty). */
enum core_rc fs_change_decode(const char *json, size_t len, struct fs_change *ch);
/* The same from a parsed object (an old journal line, or a whole snapshot.json). */
enum core_rc fs_change_from_json(const json_t *o, struct fs_change *ch);
/* Checks "<8 hex> <json>" (no newline) and decodes it; false when the line is corrupt. */
bool fs_legacy_line_decode(const char *line, size_t len, struct fs_change *ch);

#endif
