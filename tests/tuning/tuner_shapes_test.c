/* The tuner's shape list: the demo set follows the format list (the K-quant
 * dense matrices and the low-bit expert pair are in it exactly when this
 * build has their types), hand-given shapes take the limits of
 * strata/limits.h, the gate's decode step holds every expert layer and
 * dense matrix a model describes (shared experts included), and a model of Qwen3-Next's layout (512 experts, top-10,
 * tiny dimensions) tunes on the CPU backend into a table that engages and
 * covers every expert token count. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gguf_gen.h"
#include "strata/decode.h"
#include "strata/limits.h"
#include "strata/table.h"
#include "strata/tools/tuner.h"
#include "table_internal.h"
#include "mem_fit.h"
#include "tuner_shapes.h"
#include "vmodel.h"
#include "strata/tools/model.h"
#include "strata/tools/verify.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int find(const st_tune_shape *v, int n, st_shape_kind kind, const char *type, const char *down, int a, int b)
{
    int hits = 0;
    for (int i = 0; i < n; i++) {
        const st_tune_shape *s = &v[i];
        if (s->kind != kind || strcmp(st_qtype_name(s->type), type) != 0) continue;
        if (kind == ST_SHAPE_MMVQ)
            hits += s->rows == a && s->cols == b;
        else
            hits += !strcmp(st_qtype_name(s->down_type), down) && s->n_embd == a && s->n_ff == b;
    }
    return hits;
}

static void demo_set_has_each_format_exactly_when_the_build_has_it(void **state)
{
    (void)state;
    st_tune_options o;
    st_tune_options_default(&o);
    st_tune_shape *v = NULL;
    int n = 0;
    assert_int_equal(st_tune_shapes(&o, NULL, &v, &n), ST_OK);
    /* the additions: q5_K / q6_K attention, a q6_K output-like slice,
     * the low-bit expert pair iq2_xxs / iq4_nl (all 8 token counts) */
    const bool q5k = st_qtype_from_name("q5_K") != ST_QTYPE_NONE, q6k = st_qtype_from_name("q6_K") != ST_QTYPE_NONE;
    const bool iq2xxs = st_qtype_from_name("iq2_xxs") != ST_QTYPE_NONE;
    assert_int_equal(find(v, n, ST_SHAPE_MMVQ, "q5_K", NULL, 4096, 4096), q5k);
    assert_int_equal(find(v, n, ST_SHAPE_MMVQ, "q6_K", NULL, 4096, 4096), q6k);
    assert_int_equal(find(v, n, ST_SHAPE_MMVQ, "q6_K", NULL, 16384, 4096), q6k);
    assert_int_equal(find(v, n, ST_SHAPE_EXPERT, "iq2_xxs", "iq4_nl", 2560, 640), iq2xxs ? ST_DECODE_TOKENS : 0);
    /* the formats every build has are always there */
    assert_int_equal(find(v, n, ST_SHAPE_MMVQ, "iq3_s", NULL, 4096, 14336), 1);
    assert_int_equal(find(v, n, ST_SHAPE_EXPERT, "iq3_s", "iq4_nl", 2560, 640), ST_DECODE_TOKENS);
    assert_int_equal(find(v, n, ST_SHAPE_EXPERT, "q4_K", "iq4_nl", 2560, 640), ST_DECODE_TOKENS);
    /* and nothing else: 7 pairs + iq2_xxs, 5 IQ matrices + the K-quant ones */
    assert_int_equal(n, (7 + iq2xxs) * ST_DECODE_TOKENS + 5 + q5k + 2 * q6k);
    for (int i = 0; i < n; i++) assert_true(st_qtype_valid(v[i].type));
    free(v);
}

static void hand_given_shapes_take_the_limits(void **state)
{
    (void)state;
    st_tune_shape s;
    assert_int_equal(st_tune_parse_shape("expert iq3_s iq4_nl 256 64 8", ST_MAX_EXPERTS, ST_MAX_TOPK, &s), ST_OK);
    assert_int_equal(s.n_expert, ST_MAX_EXPERTS);
    assert_int_equal(s.topk, ST_MAX_TOPK);
    char want[64];
    snprintf(want, sizeof want, "%d experts with top-%d is out of range", ST_MAX_EXPERTS + 1, 2);
    assert_int_equal(st_tune_parse_shape("expert iq3_s iq4_nl 256 64 1", ST_MAX_EXPERTS + 1, 2, &s), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), want));
    assert_non_null(strstr(st_last_error(), "ST_MAX_EXPERTS"));
    assert_int_equal(st_tune_parse_shape("expert iq3_s iq4_nl 256 64 1", 64, ST_MAX_TOPK + 1, &s), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "ST_MAX_TOPK"));
}

static void a_512_expert_top10_model_tunes_on_the_cpu(void **state)
{
    (void)state;
    char dir[] = "/tmp/strata-tune-q3n-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char model[128], table[ST_TUNE_PATH_MAX];
    snprintf(model, sizeof model, "%s/qwen3next.gguf", dir);
    gg_file *f = gg_arch_model("qwen3next");
    assert_int_equal(gg_write(f, 11, model), 0);
    gg_free(f);

    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_tune_options o;
    st_tune_options_default(&o);
    o.model_path = model;
    o.out_dir = dir;
    o.quick = true;
    o.rounds = 3;
    o.quiet = true;
    o.do_mmvq = false;
    /* the gate's timing verdict is noise on a shared CPU (tests/tuning/
     * verify_test.c covers the gate); the table must be written here */
    o.no_verify = true;
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    assert_int_equal(st_tune_run(ctx, &o, &res), ST_OK);
    assert_int_equal(res.shapes, ST_DECODE_TOKENS); /* one expert shape (both layers) x every token count */
    assert_int_equal(res.mismatches, 0);
    assert_true(res.table_written);
    assert_true(res.engaged);
    snprintf(table, sizeof table, "%s", res.table_path);

    /* every token count of the 512-expert shape is a row or a tuned default */
    st_table *t = NULL;
    char line[ST_TABLE_MSG_MAX];
    assert_int_equal(st_table_load_msg(table, st_ctx_identity(ctx), st_ctx_dispatch(ctx), &t, line, sizeof line), ST_OK);
    for (int nt = 1; nt <= ST_DECODE_TOKENS; nt++) {
        st_expert_key k = {st_qtype_from_name("iq4_xs"), st_qtype_from_name("iq4_nl"), 256, 32, nt};
        int gu, dn;
        char key[96];
        snprintf(key, sizeof key, "tuned-default expert iq4_xs iq4_nl 256 32 %d", nt);
        bool have = st_table_lookup_expert(t, &k, &gu, &dn);
        for (size_t i = 0; i < st_table_comment_count(t) && !have; i++) have = !strcmp(st_table_comment_at(t, i), key);
        if (!have) fail_msg("n_tokens %d of the 512-expert shape is not in %s", nt, table);
    }
    st_table_destroy(t);
    /* the report records the layout tuned: 512 experts, top-10 */
    char report[ST_TUNE_PATH_MAX];
    snprintf(report, sizeof report, "%s", res.report_path);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(st_read_file(report, &buf, &len), ST_OK);
    assert_non_null(strstr(buf, "\"n_expert\":\t512"));
    assert_non_null(strstr(buf, "\"topk\":\t10"));
    free(buf);
    st_ctx_destroy(ctx);
    unlink(model);
    /* the tune's outputs: the table, its report and page, the folder index */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        assert_int_equal(unlink(p), 0);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
}

/* The gate's decode step (verify.c, also the bench's) is built from the
 * model: one operation per described expert layer and per dense matrix of
 * a supported type, the shared experts among them; nothing omitted. */
static void the_gates_step_has_every_layer_and_matrix_the_model_describes(void **state)
{
    (void)state;
    char dir[] = "/tmp/strata-tune-step-XXXXXX";
    assert_non_null(mkdtemp(dir));
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    for (int a = 0; GG_ARCHS[a]; a++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, GG_ARCHS[a]);
        gg_file *f = gg_arch_model(GG_ARCHS[a]);
        assert_int_equal(gg_write(f, 3, path), 0);
        gg_free(f);
        st_model *m = NULL;
        assert_int_equal(st_model_open(path, &m), ST_OK);
        int want_dense = 0, shexp = 0;
        for (size_t i = 0; i < st_model_matrix_count(m); i++) {
            const st_model_matrix *x = st_model_matrix_at(m, i);
            want_dense += x->type != ST_QTYPE_NONE;
            shexp += x->type != ST_QTYPE_NONE && strstr(x->name, "_shexp.weight") != NULL;
        }
        const int want_layers = (int)st_model_expert_layer_count(m);
        st_model_close(m);
        if (!strcmp(GG_ARCHS[a], "qwen2moe") || !strcmp(GG_ARCHS[a], "qwen3next")) assert_int_equal(shexp, 6);
        if (!strcmp(GG_ARCHS[a], "deepseek2")) assert_int_equal(shexp, 3);
        st_verify_options vo;
        st_verify_options_default(&vo);
        vo.model_path = path;
        st_vmodel *vm = NULL;
        assert_int_equal(st_vmodel_open(ctx, &vo, &vm), ST_OK);
        int layers = -1;
        assert_int_equal(st_vmodel_ops(vm, &layers), want_layers + want_dense);
        assert_int_equal(layers, want_layers);
        assert_int_equal(st_vmodel_step(ctx, vm, ST_MAX_TOKENS), ST_OK);
        assert_int_equal(st_ctx_sync(ctx), ST_OK);
        st_vmodel_close(ctx, vm);
        unlink(path);
    }
    st_ctx_destroy(ctx);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(demo_set_has_each_format_exactly_when_the_build_has_it),
        cmocka_unit_test(hand_given_shapes_take_the_limits),
        cmocka_unit_test(a_512_expert_top10_model_tunes_on_the_cpu),
        cmocka_unit_test(the_gates_step_has_every_layer_and_matrix_the_model_describes),
    };
    return cmocka_run_group_tests_name("tuner_shapes", tests, NULL, NULL);
}
