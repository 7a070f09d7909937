/* The growth rule of the public structs (docs/API.md, "Structs that grow"):
 * a caller built against an older, smaller struct passes its own size; the
 * library writes nothing past it, takes the defaults for what it lacks and
 * keeps allocated members (paths, JSON) out of a struct with no room for
 * them; a struct never set up is refused. Every struct is tried as an
 * "older" caller would have it: set up with a size that ends before its
 * last members, the bytes after it a pattern that must survive. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/tools.h"
#include "test_cli.h" /* temporary folders, removed at the end */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAT 0xAB

/* A buffer of FULL bytes holding a struct of SIZE bytes and the pattern. */
static void *older(size_t full)
{
    unsigned char *p = malloc(full + 64);
    assert_non_null(p);
    memset(p, PAT, full + 64);
    return p;
}

static void pattern_kept(const void *p, size_t from, size_t to, const char *what)
{
    const unsigned char *b = p;
    for (size_t i = from; i < to; i++)
        if (b[i] != PAT) fail_msg("%s: byte %zu past the caller's struct was written", what, i);
}

static void init_writes_only_the_callers_size(void **state)
{
    (void)state;
    const size_t to = offsetof(st_tune_options, report_per_device);
    st_tune_options *o = older(sizeof *o + 64);
    st_tune_options_init_size(o, to);
    assert_int_equal(o->struct_size, to);
    assert_true(o->threshold == 0.01); /* the defaults it has room for */
    pattern_kept(o, to, sizeof *o + 64, "st_tune_options_init_size");
    free(o);

    const size_t rs = offsetof(st_tune_result, table_path);
    st_tune_result *r = older(sizeof *r + 64);
    st_tune_result_init_size(r, rs);
    assert_int_equal(r->struct_size, rs);
    pattern_kept(r, rs, sizeof *r + 64, "st_tune_result_init_size");
    st_tune_result_clear(r); /* frees nothing it has no room for */
    pattern_kept(r, rs, sizeof *r + 64, "st_tune_result_clear");
    free(r);

    const size_t ss = offsetof(st_ctx_stats, table_defaults);
    st_ctx_stats *s = older(sizeof *s + 64);
    st_ctx_stats_init_size(s, ss);
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_ctx_get_stats(ctx, s);
    pattern_kept(s, ss, sizeof *s + 64, "st_ctx_get_stats");
    st_ctx_destroy(ctx);
    free(s);

    const size_t ps = offsetof(st_ctx_params, log_fn);
    st_ctx_params *p = older(sizeof *p + 64);
    st_ctx_params_init_size(p, ps);
    assert_int_equal(p->backend, ST_BACKEND_AUTO);
    pattern_kept(p, ps, sizeof *p + 64, "st_ctx_params_init_size");
    p->backend = ST_BACKEND_CPU;
    assert_int_equal(st_ctx_create_ex(p, &ctx), ST_OK); /* the rest: the defaults */
    st_ctx_destroy(ctx);
    free(p);

    const size_t fs = offsetof(st_ffn_options, x_stride);
    st_ffn_options *f = older(sizeof *f + 64);
    st_ffn_options_init_size(f, fs);
    assert_int_equal(f->struct_size, fs);
    assert_int_equal(f->act, ST_ACT_SILU);
    assert_true(f->alpha == 1.702f && f->limit == 7.0f && !f->down_bias);
    pattern_kept(f, fs, sizeof *f + 64, "st_ffn_options_init_size");
    free(f);

    /* bench options from before the token counts: the pattern where NTOKS
     * would be is not read (the default list), and not written */
    const size_t bs = offsetof(st_bench_options, ntoks);
    st_bench_options *b = older(sizeof *b + 64);
    st_bench_options_init_size(b, bs);
    assert_int_equal(b->struct_size, bs);
    assert_true(b->suite && b->layers == 48);
    pattern_kept(b, bs, sizeof *b + 64, "st_bench_options_init_size");
    const char *const shape[] = {"mmvq q8_0 64 64"};
    b->shapes = shape;
    b->n_shapes = 1;
    if (st_bench_check(b) != ST_OK) fail_msg("an older bench caller's options: %s", st_last_error());
    pattern_kept(b, bs, sizeof *b + 64, "st_bench_check");
    free(b);
}

static void a_struct_never_set_up_is_refused(void **state)
{
    (void)state;
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_tune_options o;
    st_tune_options_default(&o);
    st_tune_result r;
    memset(&r, 0, sizeof r); /* no _init */
    assert_int_equal(st_tune_run(ctx, &o, &r), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "not set up"));
    st_tune_result_init(&r);
    o.struct_size = 0;
    assert_int_equal(st_tune_run(ctx, &o, &r), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "not set up"));
    o.struct_size = (size_t)4 << 20; /* garbage */
    assert_int_equal(st_tune_run(ctx, &o, &r), ST_ERR_INVALID_ARG);
    st_verify_options vo;
    st_verify_options_default(&vo);
    st_verify_result vr;
    memset(&vr, 0, sizeof vr);
    assert_int_equal(st_verify_run(ctx, &vo, &vr), ST_ERR_INVALID_ARG);
    st_bench_options bo;
    memset(&bo, 0, sizeof bo);
    assert_int_equal(st_bench_check(&bo), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "not set up"));
    st_ctx_destroy(ctx);
}

/* A tune and a bench into results with no room for what they allocate: the
 * run works, nothing is written past the struct, nothing leaks (ASan). */
static void results_without_room_for_allocations_stay_whole(void **state)
{
    (void)state;
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    const char *dir = make_dir();
    static const char *shape[] = {"mmvq q8_0 64 64"};
    static const int mix[] = {1};
    st_tune_options o;
    st_tune_options_default(&o);
    o.shapes = shape;
    o.n_shapes = 1;
    o.ntok_mix = mix;
    o.n_ntok_mix = 1;
    o.out_dir = dir;
    o.quick = o.quiet = o.no_verify = true;
    const size_t rs = offsetof(st_tune_result, table_path);
    st_tune_result *r = older(sizeof(st_tune_result) + 64);
    st_tune_result_init_size(r, rs);
    if (st_tune_run(ctx, &o, r) != ST_OK) fail_msg("tune: %s", st_last_error());
    assert_int_equal(r->shapes, 1);
    pattern_kept(r, rs, sizeof(st_tune_result) + 64, "st_tune_run");
    st_tune_result_clear(r);
    free(r);

    st_bench_options bo;
    st_bench_options_default(&bo);
    bo.shapes = shape;
    bo.n_shapes = 1;
    bo.quick = true;
    bo.suite = false;
    const size_t bs = offsetof(st_bench_result, json);
    st_bench_result *b = older(sizeof(st_bench_result) + 64);
    st_bench_result_init_size(b, bs);
    if (st_bench_run(ctx, &bo, b) != ST_OK) fail_msg("bench: %s", st_last_error());
    assert_true(b->read_gbs > 0);
    pattern_kept(b, bs, sizeof(st_bench_result) + 64, "st_bench_run");
    st_bench_result_clear(b);
    free(b);
    /* and with room: the document is there */
    st_bench_result full;
    st_bench_result_init(&full);
    assert_int_equal(st_bench_run(ctx, &bo, &full), ST_OK);
    assert_non_null(full.json);
    assert_non_null(strstr(full.json, "\"rows\""));
    st_bench_result_clear(&full);
    assert_null(full.json);
    st_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_writes_only_the_callers_size),
        cmocka_unit_test(a_struct_never_set_up_is_refused),
        cmocka_unit_test(results_without_room_for_allocations_stay_whole),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_dirs);
}
