/* A card with every field set, so a round trip has something to lose: the codec's tests
 * (tests/store/test_store.c) and the hot answers' (tests/api/test_api_text.c) start from it. */
#ifndef BOARDD_TESTS_CARD_FIXTURE_H
#define BOARDD_TESTS_CARD_FIXTURE_H

#include "core/core.h"

/* A new card (core_card_free it); fails the running Check test when out of memory. */
struct core_card *fixture_full_card(void);

#endif
