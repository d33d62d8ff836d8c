/* The core suite's test cases kept in files of their own. */
#ifndef BOARDD_TEST_CORE_H
#define BOARDD_TEST_CORE_H

#include <check.h>

TCase *test_core_effect_tcase(void); /* tests/core/test_effect.c */
TCase *test_core_attention_tcase(void); /* tests/core/test_attention.c */
TCase *test_core_breaker_tcase(void); /* tests/core/test_breaker.c */

#endif
