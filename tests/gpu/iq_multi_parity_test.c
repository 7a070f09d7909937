/* iq_mmvq with n_tokens 1..ST_MAX_TOKENS on the GPU: every type, rows variant and knob path
 * and the default chain give the same bytes as the CPU reference (and so as
 * each other), on many shapes including odd row counts. */
#include "parity_util.h"

static size_t g_shapes;

static void iq_mmvq_multi_token_gpu_matches_cpu_bitwise(void **state)
{
    (void)state;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    printf("device: %s (%s, runtime %s)\n", st_ctx_identity(gpu)->device_name, st_ctx_identity(gpu)->arch,
           st_ctx_identity(gpu)->runtime);
    int nts[ST_MAX_TOKENS];
    for (int i = 0; i < ST_MAX_TOKENS; i++) nts[i] = i + 1;
    /* sanitizer size: one token count per kernel (gpu_test_size.h), the
     * matrix units' 3 tiles included: their block-decoded kernels
     * (mmvq_mma.h st_mma_coop) share staging buffers across warps, what
     * racecheck is for */
    const int buckets[] = TEST_NT_PER_KERNEL;
    const int n_buckets = (int)(sizeof buckets / sizeof buckets[0]);
    const bool small = sanitizer_size();
    test_unit_time(NULL);
    for (size_t i = 0; i < sizeof ALL_TYPES / sizeof ALL_TYPES[0]; i++) {
        if (!test_shard_next()) continue;
        const st_qtype t = ALL_TYPES[i];
        const int big = st_qtype_block_values(t) == 256;
        /* 8192 rows: the default's two-rows-per-lane-group kernels
         * (st_mmvq_rows_per_group), on short rows to stay cheap; the
         * 8224 / 8448 columns: wide rows (257 / 264 units: 128 streams,
         * ST_CANON_WIDE_UNITS), uneven over the streams, 78 and 3 of them: a
         * last lane group of 4 rows holding 2 or 3; rows of 8192 values
         * (below, at 2, 5 and 8 tokens): the wide rows' two-rows kernels */
        const int shapes[][2] = {{5, big ? 512 : 96}, {333, big ? 2560 : 640}, {4096, big ? 1024 : 288},
                                 {8192, big ? 256 : 64}, {78, big ? 8448 : 8224}, {3, big ? 8448 : 8224}};
        /* at the racecheck size the 78 wide rows are 18: one whole block
         * of the matrix units' 16 rows and a last lane group of 4 holding
         * 2, as 78 has; racecheck looks inside a block, and the 60 rows
         * more were two thirds of this test's racecheck weights */
        const int few[][2] = {{5, big ? 512 : 96}, {33, 2560}, {8192, big ? 256 : 32}, {racecheck_size() ? 18 : 78, big ? 8448 : 8224},
                              {3, big ? 8448 : 8224}};
        /* the 8192-row shape's token counts at the racecheck size: the
         * dp4a buckets of several tokens (2, 4, 8: st_mmvq_rows_per_group
         * gives two rows a lane group only there; the one-token and
         * matrix-unit kernels do not depend on the row count) */
        const int rw2_nts[] = {2, 3, 5};
        /* (at the racecheck size without the 3 wide rows, the last of
         * FEW: their kernels and partial lane group are the 18 rows'
         * again, at 22-27 s a format there, 2026-12-06, an H100) */
        const size_t ns = small ? sizeof few / sizeof few[0] - (racecheck_size() ? 1 : 0) : sizeof shapes / sizeof shapes[0];
        for (size_t s = 0; s < ns; s++) {
            const int rows = small ? few[s][0] : shapes[s][0], cols = small ? few[s][1] : shapes[s][1];
            /* the 8192-row shape needs contexts made for it (make_ctx's are
             * for 4096 rows) */
            const bool own = rows > 4096 || cols > 4096;
            st_ctx *c8 = own ? make_ctx_dims(ST_BACKEND_CPU, rows, cols) : cpu;
            st_ctx *g8 = own ? make_ctx_dims(ST_BACKEND_GPU, rows, cols) : gpu;
            /* at the racecheck size the 8192-row shape runs the default
             * chain only: it is there for the two-rows kernels the default
             * picks by row count, and the variants, whose kernels do not
             * depend on it, run on the other shapes (for a format of
             * 256-value blocks it was two thirds of the sweep's weights x
             * token counts x paths) */
            const bool rw2_only = racecheck_size() && rows >= 8192;
            sweep_paths(c8, g8, t, rows, cols, rw2_only ? rw2_nts : small ? buckets : nts,
                        rw2_only ? 3 : small ? n_buckets : ST_MAX_TOKENS, rw2_only);
            char unit[96];
            snprintf(unit, sizeof unit, "%s %dx%d", st_qtype_name(t), rows, cols);
            test_unit_time(unit);
            if (c8 != cpu) st_ctx_destroy(c8);
            if (g8 != gpu) st_ctx_destroy(g8);
        }
        g_shapes = ns + 1;
        /* 8192 values a row: 256 units, the fewest that take 128 streams
         * (ST_CANON_WIDE_UNITS); at the sanitizer size on 16 rows (the wide
         * rows' kernels do not depend on the row count: the full run's 8192
         * rows were 90% of this sweep's weights x tokens) */
        const int nts_wide2[] = {2, 5, 8}, wide_rows = small ? 16 : 8192;
        st_ctx *cw = make_ctx_dims(ST_BACKEND_CPU, wide_rows, 8192), *gw = make_ctx_dims(ST_BACKEND_GPU, wide_rows, 8192);
        sweep(cw, gw, t, wide_rows, 8192, nts_wide2, small ? 1 : 3);
        char unit[96];
        snprintf(unit, sizeof unit, "%s %dx8192 (wide rows, two rows a lane group)", st_qtype_name(t), wide_rows);
        test_unit_time(unit);
        st_ctx_destroy(cw);
        st_ctx_destroy(gw);
    }
    printf("iq_multi_parity%s%s: %zu comparisons (%d types x %d shapes x %d token counts x every path), %zu mismatches\n",
           small ? " (sanitizer size)" : "", test_shard_label(), g_compares, N_ALL_TYPES, (int)g_shapes, small ? n_buckets : ST_MAX_TOKENS,
           g_bad);
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    assert_int_equal(g_bad, 0);
    assert_true(g_compares > 0);
}

/* The kernel the default chain runs, counted where it is launched
 * (st_ctx_stats.mma_launches): for every format, both layouts and n_tokens
 * 1..ST_MAX_TOKENS, on the matrix units exactly from the rule's count
 * (STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS for IQ3_S/IQ4_XS/IQ4_NL on NVIDIA,
 * else STRATA_MMVQ_DEFAULT_MMA_TOKENS), one launch a call; never with the
 * knob STRATA_OLD_IQ_MMVQ; always with an mma variant, never with a rows
 * variant. The parity sweeps cannot see which kernel ran (every path gives
 * the same bytes); this can. */
static void the_default_runs_the_kernel_its_rule_names(void **state)
{
    (void)state;
    if (sanitizer_size()) {
        printf("dispatch: not at a sanitizer size (it proves no memory access the parity sweep does not)\n");
        return;
    }
    st_ctx *gpu = make_ctx(ST_BACKEND_GPU);
    const bool nv = !strncmp(st_ctx_identity(gpu)->arch, "sm_", 3);
    st_rng r;
    st_rng_seed(&r, 99);
    size_t checked = 0;
    for (int i = 0; i < N_ALL_TYPES; i++) {
        const st_qtype t = ALL_TYPES[i];
        const int rows = 16, cols = st_qtype_block_values(t) == 256 ? 512 : 256;
        const size_t wb = (size_t)rows * st_qtype_row_bytes(t, cols);
        void *wh = malloc(wb);
        st_random_blocks(&r, t, rows, cols, wh);
        void *wd = to_backend(gpu, wh, wb);
        st_matrix *w[2] = {NULL, NULL};
        CHECK_OK(st_matrix_create(gpu, t, rows, cols, wh, &w[0]));
        CHECK_OK(st_matrix_wrap(gpu, t, rows, cols, wd, &w[1]));
        const bool block = nv && (t == ST_IQ3_S || t == ST_IQ4_XS || t == ST_IQ4_NL);
        const int from = block ? STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS : STRATA_MMVQ_DEFAULT_MMA_TOKENS;
        float *x = malloc(sizeof(float) * ST_MAX_TOKENS * (size_t)cols), *y = malloc(sizeof(float) * ST_MAX_TOKENS * rows);
        st_random_floats(&r, x, (size_t)ST_MAX_TOKENS * (size_t)cols, 1.0f);
        for (int l = 0; l < 2; l++)
            for (int nt = 1; nt <= ST_MAX_TOKENS; nt++) {
                const path mma = {"mma8", STRATA_MMVQ_ID_MMA(8), 0, 0, -1}, one = {"rows 1", 1, 0, 0, -1},
                           old = {"STRATA_OLD_IQ_MMVQ", 0, 0, 0, ST_KNOB_OLD_IQ_MMVQ};
                const path *ps[4] = {NULL, &mma, l ? NULL : &one, l ? NULL : &old};
                const int want[4] = {nt >= from, 1, 0, 0};
                for (int k = 0; k < 4; k++) {
                    if (k && !ps[k]) continue;
                    st_ctx_reset_stats(gpu);
                    run_mmvq(gpu, w[l], x, nt, ps[k], y);
                    st_ctx_stats st;
                    st_ctx_stats_init(&st);
                    st_ctx_get_stats(gpu, &st);
                    checked++;
                    if (st.mma_launches != (uint64_t)want[k])
                        fail_msg("%s %s %dx%d, %d tokens, %s: %llu matrix-unit launches, the rule says %d", st_qtype_name(t),
                                 l ? "in place" : "planar", rows, cols, nt, ps[k] ? ps[k]->name : "default",
                                 (unsigned long long)st.mma_launches, want[k]);
                }
            }
        set_knob(gpu, -1);
        st_matrix_destroy(w[0]);
        st_matrix_destroy(w[1]);
        st_ctx_free(gpu, wd);
        free(wh);
        free(x);
        free(y);
    }
    /* the CPU backend has no matrix units */
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU);
    st_ctx_stats st;
    st_ctx_stats_init(&st);
    st_ctx_get_stats(cpu, &st);
    assert_int_equal(st.mma_launches, 0);
    st_ctx_destroy(cpu);
    printf("dispatch: %zu calls launched on the matrix units exactly where the rule says (%s)\n", checked,
           nv ? "NVIDIA: IQ3_S/IQ4_XS/IQ4_NL from 6 tokens, the others from 9" : "from 9 tokens");
    st_ctx_destroy(gpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(iq_mmvq_multi_token_gpu_matches_cpu_bitwise),
                                       cmocka_unit_test(the_default_runs_the_kernel_its_rule_names)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
