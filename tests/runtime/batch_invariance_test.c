/* Batch invariance on the CPU backend (tests/common/batch_invariance.h):
 * every token of calls of 2, 3, 8, 9, 17 and ST_MAX_TOKENS tokens gives the
 * bytes of the same token alone, on every path and format. */
#include "batch_invariance.h"

static void a_token_does_not_depend_on_the_other_tokens(void **state)
{
    (void)state;
    const int nts[] = {2, 3, 8, 9, 17, ST_MAX_TOKENS};
    bi_run(ST_BACKEND_CPU, nts, sizeof nts / sizeof nts[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(a_token_does_not_depend_on_the_other_tokens)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
