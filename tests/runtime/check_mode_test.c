/* The checking mode on the CPU backend (STRATA_CHECK=1, src/runtime/ctx.c):
 * an expert id outside 0..n_expert-1 is refused by the context before the
 * backend runs, in one line naming ids[i] and the mode, the output left as
 * it was and the context usable afterwards; without the variable the
 * mode is off (the backend's own check answers). The GPU half, host
 * pointers and ids in device memory, is tests/gpu/check_mode_gpu_test.c. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "randgen.h"
#include "strata/decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EMBD = 256, FF = 64, NEXP = 8, TOPK = 2 };

static void *rand_rows(st_rng *r, st_qtype t, int64_t rows, int64_t cols)
{
    void *w = malloc((size_t)rows * st_qtype_row_bytes(t, cols));
    assert_non_null(w);
    st_random_blocks(r, t, rows, cols, w);
    return w;
}

/* One expert_grouped call with ids[1] = BAD on a CPU context made with
 * STRATA_CHECK set to MODE (NULL: unset); returns its status, with the
 * message in MSG, and checks that a good call runs afterwards. */
static st_status call_with_bad_id(const char *mode, int32_t bad, char *msg, size_t n)
{
    if (mode) setenv("STRATA_CHECK", mode, 1);
    else unsetenv("STRATA_CHECK");
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    unsetenv("STRATA_CHECK"); /* read once, when the context is made */
    st_rng r;
    st_rng_seed(&r, 3);
    void *g = rand_rows(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD), *u = rand_rows(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD);
    void *d = rand_rows(&r, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF);
    st_matrix *gm = NULL, *um = NULL, *dm = NULL;
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, g, &gm), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, u, &um), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, d, &dm), ST_OK);
    const st_experts ex = {gm, um, dm, NEXP};
    float x[EMBD], out[EMBD], wts[TOPK] = {0.5f, 0.5f};
    for (int i = 0; i < EMBD; i++) x[i] = (float)(i % 7) - 3.0f;
    int32_t ids[TOPK] = {1, bad};
    memset(out, 0x7f, sizeof out);
    const st_status s = st_expert_grouped(c, &ex, x, ids, wts, 1, TOPK, out);
    snprintf(msg, n, "%s", st_last_error());
    if (s != ST_OK) assert_int_equal(((uint32_t *)out)[0], 0x7f7f7f7fu); /* nothing ran */
    ids[1] = 2; /* the context is still usable */
    assert_int_equal(st_expert_grouped(c, &ex, x, ids, wts, 1, TOPK, out), ST_OK);
    st_matrix_destroy(gm);
    st_matrix_destroy(um);
    st_matrix_destroy(dm);
    st_ctx_destroy(c);
    free(g);
    free(u);
    free(d);
    return s;
}

static void an_expert_id_out_of_range_is_one_line_naming_it(void **state)
{
    (void)state;
    char msg[512];
    assert_int_equal(call_with_bad_id("1", NEXP, msg, sizeof msg), ST_ERR_INVALID_ARG);
    if (!strstr(msg, "ids[0][1] = 8 is outside 0..7") || !strstr(msg, "STRATA_CHECK") || strchr(msg, '\n'))
        fail_msg("the checking mode's line: %s", msg);
    assert_int_equal(call_with_bad_id("1", -1, msg, sizeof msg), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(msg, "ids[0][1] = -1"));
}

/* Token rows STRIDE apart (st_expert_ffn's ids_stride): the bad id is named
 * by its token and slot, and the pads between rows are never taken for ids. */
static void strided_ids_are_checked_by_token_and_slot(void **state)
{
    (void)state;
    setenv("STRATA_CHECK", "1", 1);
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    unsetenv("STRATA_CHECK");
    st_rng r;
    st_rng_seed(&r, 4);
    void *g = rand_rows(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD), *u = rand_rows(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD);
    void *d = rand_rows(&r, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF);
    st_matrix *gm = NULL, *um = NULL, *dm = NULL;
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, g, &gm), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, u, &um), ST_OK);
    assert_int_equal(st_matrix_create(c, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, d, &dm), ST_OK);
    const st_experts ex = {gm, um, dm, NEXP};
    float x[2 * EMBD], out[2 * EMBD], wts[2 * TOPK] = {0.5f, 0.5f, 0.25f, 0.75f};
    for (int i = 0; i < 2 * EMBD; i++) x[i] = (float)(i % 5) - 2.0f;
    int32_t bad[2 * 3] = {1, 2, 1000, 42, 3, -7}, good[2 * 3] = {1, 2, 1000, 4, 3, -7}; /* the third of a row: a pad */
    st_ffn_options o;
    st_ffn_options_init(&o);
    o.ids_stride = 3;
    assert_int_equal(st_expert_ffn(c, &ex, &o, x, bad, wts, 2, TOPK, out), ST_ERR_INVALID_ARG);
    if (!strstr(st_last_error(), "ids[1][0] = 42 is outside 0..7")) fail_msg("the line: %s", st_last_error());
    assert_int_equal(st_expert_ffn(c, &ex, &o, x, good, wts, 2, TOPK, out), ST_OK);
    st_matrix_destroy(gm);
    st_matrix_destroy(um);
    st_matrix_destroy(dm);
    st_ctx_destroy(c);
    free(g);
    free(u);
    free(d);
}

static void the_mode_is_off_unless_strata_check_is_1(void **state)
{
    (void)state;
    char msg[512];
    /* off: an id out of range is the defined case (that slot adds 0,
     * docs/API.md), so the call succeeds */
    for (int k = 0; k < 2; k++)
        if (call_with_bad_id(k ? "0" : NULL, NEXP, msg, sizeof msg) != ST_OK)
            fail_msg("the mode answered while off: %s", msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_expert_id_out_of_range_is_one_line_naming_it),
        cmocka_unit_test(strided_ids_are_checked_by_token_and_slot),
        cmocka_unit_test(the_mode_is_off_unless_strata_check_is_1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
