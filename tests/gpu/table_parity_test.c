#define _POSIX_C_SOURCE 200809L
/* A table engaged on the GPU: the entry points launch the table's variant
 * (proved by the launch counters) and the output bytes equal the CPU
 * reference; a shape the table lacks runs the default chain. Two launches
 * in all: the full run is also the sanitizer-sized one
 * (STRATA_GPU_TEST_SIZE=sanitizer changes nothing here). */
#include "parity_util.h"

#include <unistd.h>

static void entry_points_use_engaged_table_and_stay_exact(void **state)
{
    (void)state;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    st_table *t = NULL;
    CHECK_OK(st_table_create(st_ctx_identity(gpu), &t));
    st_mmvq_key mk = {ST_IQ3_S, 999, 2560};
    CHECK_OK(st_table_add_mmvq(t, &mk, 8));
    st_expert_key ek = {ST_IQ3_S, ST_IQ4_NL, 256, 64, 2};
    CHECK_OK(st_table_add_expert(t, &ek, 4, 2));
    char dir[] = "/tmp/strata-table-parity-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/gpu.table", dir);
    CHECK_OK(st_table_write_atomic(t, path));
    st_table_destroy(t);
    CHECK_OK(st_ctx_load_table(gpu, path));
    assert_non_null(st_ctx_table(gpu));

    st_rng r;
    st_rng_seed(&r, 4242);
    /* mmvq: a hit, then a miss */
    const int shapes[2][2] = {{999, 2560}, {640, 2560}};
    for (int s = 0; s < 2; s++) {
        const int rows = shapes[s][0], cols = shapes[s][1], nt = 3;
        void *wh = malloc((size_t)rows * st_qtype_row_bytes(ST_IQ3_S, cols));
        st_random_blocks(&r, ST_IQ3_S, rows, cols, wh);
        st_matrix *wc, *wg;
        CHECK_OK(st_matrix_create(cpu, ST_IQ3_S, rows, cols, wh, &wc));
        CHECK_OK(st_matrix_create(gpu, ST_IQ3_S, rows, cols, wh, &wg));
        float *x = malloc(sizeof(float) * (size_t)(nt * cols));
        st_random_floats(&r, x, (size_t)(nt * cols), 1.0f);
        float *ref = malloc(sizeof(float) * (size_t)(nt * rows)), *y = malloc(sizeof(float) * (size_t)(nt * rows));
        run_mmvq(cpu, wc, x, nt, NULL, ref);
        float *xd = to_backend(gpu, x, sizeof(float) * (size_t)(nt * cols));
        float *yd = NULL;
        CHECK_OK(st_ctx_alloc(gpu, sizeof(float) * (size_t)(nt * rows), (void **)&yd));
        st_ctx_reset_stats(gpu);
        CHECK_OK(st_iq_mmvq(gpu, wg, xd, nt, yd));
        CHECK_OK(st_ctx_download(gpu, y, yd, sizeof(float) * (size_t)(nt * rows)));
        st_ctx_stats st;
        st_ctx_stats_init(&st);
        st_ctx_get_stats(gpu, &st);
        printf("mmvq iq3_s %dx%d: table hits %llu, misses %llu, variant launches %llu, default %llu\n", rows, cols,
               (unsigned long long)st.table_hits, (unsigned long long)st.table_misses,
               (unsigned long long)st.variant_launches, (unsigned long long)st.default_launches);
        assert_int_equal(st.table_hits, s == 0 ? 1 : 0);
        assert_int_equal(st.variant_launches, s == 0 ? 1 : 0);
        assert_int_equal(st.default_launches, s == 0 ? 0 : 1);
        assert_int_equal(diff_floats("table-engaged mmvq vs CPU", y, ref, (size_t)(nt * rows)), 0);
        st_ctx_free(gpu, xd);
        st_ctx_free(gpu, yd);
        st_matrix_destroy(wc);
        st_matrix_destroy(wg);
        free(wh); free(x); free(ref); free(y);
    }
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(entry_points_use_engaged_table_and_stay_exact)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
