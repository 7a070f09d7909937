/* iq_mmvq on the GPU: every type, every rows variant, the mmvq knob paths
 * and the default chain give the same bytes as the CPU reference (and so as
 * each other), on many shapes including odd row counts. */
#include "parity_util.h"

static void iq_mmvq_gpu_matches_cpu_bitwise(void **state)
{
    (void)state;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    printf("device: %s (%s, runtime %s)\n", st_ctx_identity(gpu)->device_name, st_ctx_identity(gpu)->arch,
           st_ctx_identity(gpu)->runtime);
    /* the dp4a buckets 1, 4 and 8 (5: the block-decode formats take the
     * matrix units from 6 tokens) and 8 */
    const int nts[] = {1, 3, 5, 8};
    const int n_nts = (int)(sizeof nts / sizeof nts[0]);
    const bool small = sanitizer_size();
    for (size_t i = 0; i < sizeof ALL_TYPES / sizeof ALL_TYPES[0]; i++) {
        if (!test_shard_next()) continue;
        const st_qtype t = ALL_TYPES[i];
        const int big = st_qtype_block_values(t) == 256;
        const int shapes[][2] = {{1, big ? 256 : 32}, {77, big ? 256 : 64}, {999, big ? 2560 : 640},
                                 {640, 2560}, {2049, big ? 4096 : 1024}, {4096, 512}};
        /* sanitizer size: the same lane counts (8, 16, 32 per row) on few rows */
        const int few[][2] = {{1, big ? 256 : 32}, {37, big ? 1024 : 640}, {21, 2560}};
        const size_t ns = small ? sizeof few / sizeof few[0] : sizeof shapes / sizeof shapes[0];
        for (size_t s = 0; s < ns; s++)
            sweep(cpu, gpu, t, small ? few[s][0] : shapes[s][0], small ? few[s][1] : shapes[s][1], nts, n_nts);
    }
    printf("iq_parity%s%s: %zu comparisons (%d types x %d shapes x %d token counts x every path), %zu mismatches\n",
           small ? " (sanitizer size)" : "", test_shard_label(), g_compares, N_ALL_TYPES, small ? 3 : 6, n_nts, g_bad);
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    assert_int_equal(g_bad, 0);
    assert_true(g_compares > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(iq_mmvq_gpu_matches_cpu_bitwise)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
