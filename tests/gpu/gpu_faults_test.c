/* GPU faults as an engine meets them: with the device's memory exhausted
 * (allocated away in chunks), a matrix's creation and a second context's
 * creation each return ST_ERR_GPU with the runtime's own message, leak
 * nothing (the free memory after releasing the chunks is what it was), and
 * the context that was there stays usable: its next calls give the CPU
 * reference's bytes (an allocation failure must not linger as the
 * runtime's last error and be reported by a later launch). */
#include "parity_util.h"

#include "strata/probe.h"

enum { ROWS = 128, COLS = 512, NT = 2 };

static void exhausted_memory_is_a_status_and_the_context_stays_usable(void **state)
{
    (void)state;
    int n = 0;
    if (st_device_count(ST_BACKEND_GPU, &n) != ST_OK || n < 1) skip();
    st_rng r;
    st_rng_seed(&r, 5);
    const size_t wb = (size_t)ROWS * st_qtype_row_bytes(ST_IQ4_XS, COLS);
    void *wh = malloc(wb);
    st_random_blocks(&r, ST_IQ4_XS, ROWS, COLS, wh);
    float x[NT * COLS], y[NT * ROWS], ref[NT * ROWS];
    for (int i = 0; i < NT * COLS; i++) x[i] = (float)((i * 7) % 13) - 6.0f;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *g = make_ctx(ST_BACKEND_GPU);
    st_matrix *wc = NULL, *w = NULL;
    CHECK_OK(st_matrix_create(cpu, ST_IQ4_XS, ROWS, COLS, wh, &wc));
    CHECK_OK(st_iq_mmvq(cpu, wc, x, NT, ref));
    CHECK_OK(st_matrix_create(g, ST_IQ4_XS, ROWS, COLS, wh, &w));
    void *xd = NULL, *yd = NULL;
    CHECK_OK(st_ctx_alloc(g, sizeof x, &xd));
    CHECK_OK(st_ctx_alloc(g, sizeof y, &yd));
    CHECK_OK(st_ctx_upload(g, xd, x, sizeof x));
    size_t free0 = 0, total = 0;
    CHECK_OK(st_ctx_mem_info(g, &free0, &total));

    /* allocate the device's memory away: 1 GiB chunks, then 16 MiB ones */
    enum { MAX_CHUNKS = 4096 };
    void **chunk = calloc(MAX_CHUNKS, sizeof *chunk);
    int nc = 0;
    char why[1024] = "";
    for (size_t size = (size_t)1 << 30; size >= ((size_t)16 << 20); size >>= 6)
        while (nc < MAX_CHUNKS) {
            const st_status s = st_ctx_alloc(g, size, &chunk[nc]);
            if (s != ST_OK) {
                assert_int_equal(s, ST_ERR_GPU);
                snprintf(why, sizeof why, "%s", st_last_error());
                break;
            }
            nc++;
        }
    print_message("allocated %d chunks; the refusal: %s\n", nc, why);
    /* none when another process holds the memory already (a sanitizer
     * run beside this one): the refusal is then the first allocation's */
    assert_true(nc < MAX_CHUNKS);
    assert_non_null(strstr(why, "allocate device memory"));

    /* a matrix of 17 MiB (more than the last chunk that failed) and a
     * second context: refused with the runtime's reason */
    const int64_t big_rows = 4096, big_cols = 4096;
    const size_t bb = (size_t)big_rows * st_qtype_row_bytes(ST_Q8_0, big_cols);
    void *bh = calloc(1, bb);
    st_random_blocks(&r, ST_Q8_0, big_rows, big_cols, bh);
    st_matrix *big = NULL;
    const st_status ms = st_matrix_create(g, ST_Q8_0, big_rows, big_cols, bh, &big);
    print_message("matrix creation: %s: %s\n", st_status_str(ms), st_last_error());
    assert_int_equal(ms, ST_ERR_GPU);
    assert_null(big);
    assert_non_null(strstr(st_last_error(), "allocate weights"));
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_GPU;
    st_ctx *second = NULL;
    const st_status cs = st_ctx_create_ex(&p, &second);
    print_message("context creation: %s: %s\n", st_status_str(cs), st_last_error());
    assert_int_not_equal(cs, ST_OK);
    assert_null(second);

    /* release: the memory is all back (nothing the failures made leaks) */
    for (int i = 0; i < nc; i++) st_ctx_free(g, chunk[i]);
    free(chunk);
    size_t free1 = 0;
    CHECK_OK(st_ctx_mem_info(g, &free1, &total));
    print_message("free memory before %.1f MiB, after %.1f MiB\n", free0 / 1048576.0, free1 / 1048576.0);
    assert_true(free1 + ((size_t)64 << 20) >= free0); /* the runtime's own bookkeeping moves a little */

    /* the context is usable and exact; the matrix can now be made */
    CHECK_OK(st_iq_mmvq(g, w, xd, NT, yd));
    CHECK_OK(st_ctx_download(g, y, yd, sizeof y));
    assert_int_equal(diff_floats("mmvq after exhaustion vs CPU", y, ref, NT * ROWS), 0);
    CHECK_OK(st_matrix_create(g, ST_Q8_0, big_rows, big_cols, bh, &big));
    st_matrix_destroy(big);
    free(bh);
    st_ctx_free(g, xd);
    st_ctx_free(g, yd);
    st_matrix_destroy(w);
    st_matrix_destroy(wc);
    st_ctx_destroy(g);
    st_ctx_destroy(cpu);
    free(wh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(exhausted_memory_is_a_status_and_the_context_stays_usable)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
