/* Batch invariance on the GPU (tests/common/batch_invariance.h): every token
 * of calls of 2..ST_MAX_TOKENS tokens gives the bytes of the same token alone,
 * through the default chain (dp4a up to 8 tokens, the matrix units beyond;
 * for iq3_s/iq4_xs/iq4_nl on NVIDIA the matrix units from 6 tokens),
 * every rows variant, every matrix-instruction variant and every format. */
#include "batch_invariance.h"

static void a_token_does_not_depend_on_the_other_tokens(void **state)
{
    (void)state;
    int nts[ST_MAX_TOKENS];
    int n = 0;
    for (int i = 2; i <= ST_MAX_TOKENS; i++)
        /* sanitizer size: the dp4a counts 2 and 5 (the 8 bucket), the
         * block-decode formats' first on the matrix units (6), the others'
         * (9), a 3-tile count and the most */
        if (!sanitizer_size() || i == 2 || i == 5 || i == 6 || i == 9 || i == 17 || i == ST_MAX_TOKENS) nts[n++] = i;
    bi_run(ST_BACKEND_GPU, nts, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(a_token_does_not_depend_on_the_other_tokens)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
