/* model: the description of the tiny GGUF of each MoE architecture
 * (gguf_gen.c: llama.cpp's key and tensor names) against what was written,
 * derived from the written tensors and this build's formats, so it holds
 * for any format list: every expert layer of supported types is described,
 * every other one omitted with one line, shared experts and dense blocks are
 * dense matrices, the metadata is read; and the refusals that remain (a
 * file llama.cpp would refuse, a model beyond the limits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gguf.h"
#include "model_extra.h"
#include "gguf_gen.h"
#include "strata/limits.h"
#include "strata/tools/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The open models and the bytes each one points into, freed together. */
static struct {
    st_model *m;
    uint8_t *buf;
} g_open[8];

static st_model *open_bytes(const gg_file *f, st_status want, const char *msg)
{
    uint8_t *buf;
    size_t len;
    gg_bytes(f, 7, &buf, &len);
    st_gguf *g = NULL;
    st_status s = st_gguf_parse(buf, len, &g);
    if (s != ST_OK) fail_msg("parse: %s", st_last_error());
    st_model *m = (st_model *)1;
    s = st_model_from_gguf(g, "fallback", &m);
    if (s != want || (msg && !strstr(st_last_error(), msg)))
        fail_msg("status %s, message '%s'; wanted %s '%s'", st_status_name(s), st_last_error(), st_status_name(want),
                 msg ? msg : "");
    if (s != ST_OK) {
        assert_null(m);
        free(buf);
        return NULL;
    }
    for (size_t i = 0; i < sizeof g_open / sizeof g_open[0]; i++)
        if (!g_open[i].m) {
            g_open[i].m = m;
            g_open[i].buf = buf;
            return m;
        }
    fail_msg("too many open test models");
    return NULL;
}

static void close_model(st_model *m)
{
    for (size_t i = 0; i < sizeof g_open / sizeof g_open[0]; i++)
        if (g_open[i].m == m) {
            st_model_close(m);
            free(g_open[i].buf);
            g_open[i].m = NULL;
            g_open[i].buf = NULL;
            return;
        }
    fail_msg("closing a model that is not open");
}

static bool ok_type(int t) { return st_qtype_valid(t); }

static const st_model_matrix *find_matrix(const st_model *m, const char *name)
{
    for (size_t i = 0; i < st_model_matrix_count(m); i++)
        if (!strcmp(st_model_matrix_at(m, i)->name, name)) return st_model_matrix_at(m, i);
    return NULL;
}

static const st_model_omission *find_omission(const st_model *m, const char *name)
{
    for (size_t i = 0; i < st_model_omitted_count(m); i++)
        if (!strcmp(st_model_omitted_at(m, i)->name, name)) return st_model_omitted_at(m, i);
    return NULL;
}

/* Every written tensor where the description should have it. */
static void check_against_file(const gg_file *f, const st_model *m)
{
    size_t want_layers = 0, want_omitted = 0;
    for (int L = 0; L < 64; L++) {
        char n[3][96];
        snprintf(n[0], sizeof n[0], "blk.%d.ffn_gate_exps.weight", L);
        snprintf(n[1], sizeof n[1], "blk.%d.ffn_up_exps.weight", L);
        snprintf(n[2], sizeof n[2], "blk.%d.ffn_down_exps.weight", L);
        const gg_tensor_info *g = gg_find(f, n[0]), *u = gg_find(f, n[1]), *d = gg_find(f, n[2]);
        if (!g) continue;
        const bool runs = ok_type(g->type) && ok_type(u->type) && ok_type(d->type) && g->type == u->type;
        char what[32];
        snprintf(what, sizeof what, "blk.%d experts", L);
        const st_model_omission *o = find_omission(m, what);
        if (runs) {
            const st_model_expert_layer *l = st_model_expert_layer_at(m, want_layers++);
            assert_non_null(l);
            assert_int_equal(l->layer, L);
            assert_int_equal(l->gu_type, g->type);
            assert_int_equal(l->down_type, d->type);
            assert_int_equal(l->n_embd, g->ne[0]);
            assert_int_equal(l->n_ff, g->ne[1]);
            assert_int_equal(l->n_expert, g->ne[2]);
            assert_null(o);
        } else {
            want_omitted++;
            if (!o) fail_msg("%s (types %d/%d/%d) is neither described nor omitted", what, g->type, u->type, d->type);
            assert_int_equal(o->layer, L);
            assert_non_null(strstr(o->reason, "which the expert kernels do not support"));
        }
    }
    assert_int_equal(st_model_expert_layer_count(m), want_layers);
    for (size_t i = 0; i < gg_tensor_count(f); i++) {
        const gg_tensor_info *t = gg_tensor_at(f, i);
        const bool shexp = strstr(t->name, "_shexp.weight") && t->n_dims == 2;
        const bool dense = strstr(t->name, ".attn_") && strstr(t->name, ".weight") && t->n_dims == 2;
        const bool ffn = (strstr(t->name, ".ffn_gate.weight") || strstr(t->name, ".ffn_up.weight") ||
                          strstr(t->name, ".ffn_down.weight"));
        const bool ssm = strstr(t->name, ".ssm_in.") || strstr(t->name, ".ssm_out.") || strstr(t->name, ".ssm_ba.");
        if (shexp || dense || ffn || ssm) {
            const st_model_matrix *x = find_matrix(m, t->name);
            if (!x) fail_msg("%s is not a dense matrix of the description", t->name);
            assert_int_equal(x->type, ok_type(t->type) ? t->type : ST_QTYPE_NONE);
            assert_int_equal(x->n_cols, t->ne[0]);
            assert_int_equal(x->n_rows, t->ne[1]);
        } else if (strstr(t->name, ".attn_") && t->n_dims == 3) {
            const st_model_omission *o = find_omission(m, t->name);
            if (!o) fail_msg("%s (3-D) is not listed as omitted", t->name);
            assert_non_null(strstr(o->reason, "per-head"));
            want_omitted++;
        } else if (strstr(t->name, "ssm_conv1d") || strstr(t->name, ".bias") || t->n_dims == 1) {
            assert_null(find_matrix(m, t->name)); /* no matrix product of the decode */
        }
    }
    assert_int_equal(st_model_omitted_count(m), want_omitted);
    /* omissions in layer order */
    for (size_t i = 1; i < st_model_omitted_count(m); i++)
        assert_true(st_model_omitted_at(m, i - 1)->layer <= st_model_omitted_at(m, i)->layer);
    /* every dense shape is of a supported type and has its matrices */
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        assert_true(ok_type(s->type));
        assert_int_equal(st_model_matrix_at(m, s->first)->type, s->type);
    }
}

static void every_architecture_is_described_from_its_file(void **state)
{
    (void)state;
    for (int a = 0; GG_ARCHS[a]; a++) {
        gg_file *f = gg_arch_model(GG_ARCHS[a]);
        assert_non_null(f);
        st_model *m = open_bytes(f, ST_OK, NULL);
        assert_string_equal(st_model_arch(m), GG_ARCHS[a]);
        const st_model_moe *md = st_model_moe_info(m);
        assert_int_equal(md->n_layer, 2);
        assert_int_equal(md->n_embd, 256);
        assert_true(md->n_expert >= 8);
        assert_int_equal(md->n_expert_used, st_model_expert_used(m));
        check_against_file(f, m);
        close_model(m);
        gg_free(f);
    }
}

static void shared_experts_are_dense_matrices_and_shapes(void **state)
{
    (void)state;
    gg_file *f = gg_arch_model("qwen2moe");
    st_model *m = open_bytes(f, ST_OK, NULL);
    const st_model_moe *md = st_model_moe_info(m);
    assert_int_equal(md->n_ff_shared, 128);
    assert_int_equal(md->n_ff_expert, 64);
    const st_model_matrix *g = find_matrix(m, "blk.1.ffn_gate_shexp.weight");
    assert_non_null(g);
    assert_int_equal(g->n_rows, 128);
    assert_int_equal(g->n_cols, 256);
    /* the shared gate/up are counted in their mmvq shape (with any other
     * matrix of that type and size) */
    int same = 0;
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *x = st_model_matrix_at(m, i);
        same += x->type == g->type && x->n_rows == 128 && x->n_cols == 256;
    }
    assert_true(same >= 4);
    bool found = false;
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        if (s->type == g->type && s->n_rows == 128 && s->n_cols == 256) {
            found = true;
            assert_int_equal(s->n_matrices, same);
        }
    }
    assert_true(found);
    /* the 1-D sigmoid gate of the shared expert is no matrix */
    assert_null(find_matrix(m, "blk.0.ffn_gate_inp_shexp.weight"));
    close_model(m);
    gg_free(f);

    f = gg_arch_model("deepseek2");
    m = open_bytes(f, ST_OK, NULL);
    md = st_model_moe_info(m);
    assert_int_equal(md->n_expert_shared, 1);
    assert_int_equal(md->n_leading_dense, 1);
    assert_int_equal(st_model_expert_layer_count(m), 1);
    assert_int_equal(st_model_expert_layer_at(m, 0)->layer, 1);
    assert_non_null(find_matrix(m, "blk.0.ffn_gate.weight"));      /* the leading dense block */
    assert_non_null(find_matrix(m, "blk.1.ffn_down_shexp.weight")); /* n_ff_expert x 1 shared */
    assert_non_null(find_matrix(m, "blk.1.attn_kv_a_mqa.weight"));
    assert_non_null(find_omission(m, "blk.0.attn_k_b.weight"));
    assert_non_null(find_omission(m, "blk.1.attn_v_b.weight"));
    close_model(m);
    gg_free(f);
}

/* Qwen3-Next's 512 experts with top-10 are within the limits. */
static void qwen3next_layout_is_within_the_limits(void **state)
{
    (void)state;
    gg_file *f = gg_arch_model("qwen3next");
    st_model *m = open_bytes(f, ST_OK, NULL);
    assert_int_equal(st_model_expert_used(m), 10);
    assert_int_equal(st_model_expert_layer_count(m), 2);
    assert_int_equal(st_model_expert_layer_at(m, 0)->n_expert, 512);
    assert_non_null(find_matrix(m, "blk.1.ssm_in.weight"));
    assert_non_null(find_matrix(m, "blk.1.ssm_out.weight"));
    assert_null(find_matrix(m, "blk.1.ssm_conv1d.weight"));
    close_model(m);
    gg_free(f);
}

static gg_file *small(const char *arch, int n_expert, int used)
{
    gg_file *f = gg_new();
    gg_kv_str(f, "general.architecture", arch);
    if (n_expert) gg_kv_arch_u32(f, "expert_count", (uint32_t)n_expert);
    if (used) gg_kv_arch_u32(f, "expert_used_count", (uint32_t)used);
    gg_tensor(f, "blk.0.attn_q.weight", GG_Q8_0, 2, 64, 64, 1);
    return f;
}

static void models_beyond_the_limits_are_refused_with_the_limit_and_the_value(void **state)
{
    (void)state;
    char want[160];
    gg_file *f = small("qwen3next", ST_MAX_EXPERTS + 1, 2);
    snprintf(want, sizeof want, "model: qwen3next.expert_count is %d, more than ST_MAX_EXPERTS (%d)", ST_MAX_EXPERTS + 1,
             ST_MAX_EXPERTS);
    open_bytes(f, ST_ERR_UNSUPPORTED, want);
    gg_free(f);
    f = small("qwen3next", 8, ST_MAX_TOPK + 1);
    snprintf(want, sizeof want, "model: qwen3next.expert_used_count is %d, more than ST_MAX_TOPK (%d)", ST_MAX_TOPK + 1,
             ST_MAX_TOPK);
    open_bytes(f, ST_ERR_UNSUPPORTED, want);
    gg_free(f);
    /* a layer of more experts than the limit, without metadata */
    f = small("x", 0, 0);
    gg_tensor(f, "blk.0.ffn_gate_exps.weight", GG_Q8_0, 3, 32, 32, ST_MAX_EXPERTS + 1);
    gg_tensor(f, "blk.0.ffn_up_exps.weight", GG_Q8_0, 3, 32, 32, ST_MAX_EXPERTS + 1);
    gg_tensor(f, "blk.0.ffn_down_exps.weight", GG_Q8_0, 3, 32, 32, ST_MAX_EXPERTS + 1);
    snprintf(want, sizeof want, "blk.0.ffn_gate_exps.weight has %d experts, more than ST_MAX_EXPERTS (%d)",
             ST_MAX_EXPERTS + 1, ST_MAX_EXPERTS);
    open_bytes(f, ST_ERR_UNSUPPORTED, want);
    gg_free(f);
    /* exactly at the limits: described */
    f = small("x", ST_MAX_EXPERTS, ST_MAX_TOPK);
    gg_tensor(f, "blk.0.ffn_gate_exps.weight", GG_Q8_0, 3, 32, 32, ST_MAX_EXPERTS);
    gg_tensor(f, "blk.0.ffn_up_exps.weight", GG_Q8_0, 3, 32, 32, ST_MAX_EXPERTS);
    gg_tensor(f, "blk.0.ffn_down_exps.weight", GG_Q8_0, 3, 32, 32, ST_MAX_EXPERTS);
    st_model *m = open_bytes(f, ST_OK, NULL);
    assert_int_equal(st_model_expert_layer_count(m), 1);
    assert_int_equal(st_model_expert_used(m), ST_MAX_TOPK);
    close_model(m);
    gg_free(f);
}

/* One expert layer of type TYPE (gate, up) / DN (down) beside a supported
 * one: the model opens, the layer is omitted (or described) by the type. */
static void every_ggml_type_of_an_expert_layer_is_described_or_omitted(void **state)
{
    (void)state;
    for (int t = 0; t <= 40; t++) {
        int qk, nb;
        if (!gg_type_block(t, &qk, &nb)) continue;
        for (int which = 0; which < 3; which++) {
            gg_file *f = gg_new();
            gg_kv_str(f, "general.architecture", "qwen3moe");
            gg_kv_arch_u32(f, "expert_count", 4);
            gg_tensor(f, "blk.0.ffn_gate_exps.weight", GG_Q8_0, 3, 256, 256, 4);
            gg_tensor(f, "blk.0.ffn_up_exps.weight", GG_Q8_0, 3, 256, 256, 4);
            gg_tensor(f, "blk.0.ffn_down_exps.weight", GG_Q8_0, 3, 256, 256, 4);
            const int gu = which == 2 ? GG_Q8_0 : t, dn = which == 2 ? t : GG_Q8_0;
            /* which 0: gate and up; 1: only up (types differ); 2: down */
            gg_tensor(f, "blk.1.ffn_gate_exps.weight", which == 1 ? GG_Q8_0 : gu, 3, 256, 256, 4);
            gg_tensor(f, "blk.1.ffn_up_exps.weight", gu, 3, 256, 256, 4);
            gg_tensor(f, "blk.1.ffn_down_exps.weight", dn, 3, 256, 256, 4);
            st_model *m = open_bytes(f, ST_OK, NULL);
            const bool runs = ok_type(gu) && ok_type(dn) && (which != 1 || t == GG_Q8_0);
            assert_int_equal(st_model_expert_layer_count(m), runs ? 2 : 1);
            assert_int_equal(st_model_omitted_count(m), runs ? 0 : 1);
            if (!runs) {
                const st_model_omission *o = st_model_omitted_at(m, 0);
                assert_string_equal(o->name, "blk.1 experts");
                assert_int_equal(o->layer, 1);
                if (ok_type(t))
                    assert_non_null(strstr(o->reason, "the expert kernels take gate and up of one type"));
                else
                    assert_non_null(strstr(o->reason, "which the expert kernels do not support"));
            }
            close_model(m);
            gg_free(f);
        }
    }
}

static void expert_layouts_the_kernels_do_not_run_are_omitted(void **state)
{
    (void)state;
    gg_file *f = gg_new();
    gg_kv_str(f, "general.architecture", "llama");
    gg_kv_arch_u32(f, "expert_count", 2);
    /* old mixtral files: one tensor per expert */
    for (int e = 0; e < 2; e++) {
        gg_tensorf(f, GG_Q8_0, 2, 256, 64, 1, "blk.0.ffn_gate.%d.weight", e);
        gg_tensorf(f, GG_Q8_0, 2, 256, 64, 1, "blk.0.ffn_up.%d.weight", e);
        gg_tensorf(f, GG_Q8_0, 2, 64, 256, 1, "blk.0.ffn_down.%d.weight", e);
    }
    /* gate and up fused in one tensor */
    gg_tensor(f, "blk.1.ffn_gate_up_exps.weight", GG_Q8_0, 3, 256, 128, 2);
    gg_tensor(f, "blk.1.ffn_down_exps.weight", GG_Q8_0, 3, 64, 256, 2);
    gg_tensor(f, "blk.1.attn_q.weight", GG_Q8_0, 2, 256, 256, 1);
    st_model *m = open_bytes(f, ST_OK, NULL);
    assert_int_equal(st_model_expert_layer_count(m), 0);
    assert_int_equal(st_model_omitted_count(m), 2);
    assert_string_equal(st_model_omitted_at(m, 0)->name, "blk.0 experts");
    assert_non_null(strstr(st_model_omitted_at(m, 0)->reason, "one tensor per expert (blk.0.ffn_gate.0.weight, ...)"));
    assert_string_equal(st_model_omitted_at(m, 1)->name, "blk.1 experts");
    assert_non_null(strstr(st_model_omitted_at(m, 1)->reason, "blk.1.ffn_gate_up_exps.weight holds gate and up"));
    assert_int_equal(st_model_matrix_count(m), 1); /* the per-expert tensors are no dense matrices */
    close_model(m);
    gg_free(f);
}

static void files_that_contradict_their_metadata_are_refused(void **state)
{
    (void)state;
    /* experts of another n_ff than expert_feed_forward_length */
    gg_file *f = gg_new();
    gg_kv_str(f, "general.architecture", "qwen3moe");
    gg_kv_arch_u32(f, "expert_feed_forward_length", 128);
    gg_tensor(f, "blk.0.ffn_gate_exps.weight", GG_Q8_0, 3, 256, 64, 2);
    gg_tensor(f, "blk.0.ffn_up_exps.weight", GG_Q8_0, 3, 256, 64, 2);
    gg_tensor(f, "blk.0.ffn_down_exps.weight", GG_Q8_0, 3, 64, 256, 2);
    open_bytes(f, ST_ERR_PARSE, "blk.0.ffn_gate_exps.weight has n_ff 64, but qwen3moe.expert_feed_forward_length says 128");
    gg_free(f);
    /* experts in a block leading_dense_block_count calls dense */
    f = gg_new();
    gg_kv_str(f, "general.architecture", "deepseek2");
    gg_kv_arch_u32(f, "leading_dense_block_count", 1);
    gg_tensor(f, "blk.0.ffn_gate_exps.weight", GG_Q8_0, 3, 256, 64, 2);
    gg_tensor(f, "blk.0.ffn_up_exps.weight", GG_Q8_0, 3, 256, 64, 2);
    gg_tensor(f, "blk.0.ffn_down_exps.weight", GG_Q8_0, 3, 64, 256, 2);
    open_bytes(f, ST_ERR_PARSE, "blk.0 has experts, but deepseek2.leading_dense_block_count says blocks 0..0 are dense");
    gg_free(f);
    /* a shared expert of another size than expert_feed_forward_length x expert_shared_count */
    f = gg_new();
    gg_kv_str(f, "general.architecture", "deepseek2");
    gg_kv_arch_u32(f, "expert_feed_forward_length", 64);
    gg_kv_arch_u32(f, "expert_shared_count", 2);
    gg_tensor(f, "blk.1.ffn_gate_shexp.weight", GG_Q8_0, 2, 256, 64, 1);
    open_bytes(f, ST_ERR_PARSE,
               "blk.1.ffn_gate_shexp.weight has n_ff 64, but the metadata says 128 (deepseek2.expert_feed_forward_length x "
               "expert_shared_count)");
    gg_free(f);
    /* ... and of another size than expert_shared_feed_forward_length */
    f = gg_new();
    gg_kv_str(f, "general.architecture", "qwen2moe");
    gg_kv_arch_u32(f, "expert_shared_feed_forward_length", 128);
    gg_kv_arch_u32(f, "embedding_length", 256);
    gg_tensor(f, "blk.1.ffn_down_shexp.weight", GG_Q8_0, 2, 128, 512, 1);
    open_bytes(f, ST_ERR_PARSE, "blk.1.ffn_down_shexp.weight has n_embd 512, but qwen2moe.embedding_length says 256");
    gg_free(f);
    /* a per-layer array where a check-only key is an integer: no check, no refusal */
    f = gg_new();
    gg_kv_str(f, "general.architecture", "qwen3moe");
    gg_kv_str(f, "qwen3moe.expert_feed_forward_length", "not a number");
    gg_tensor(f, "blk.0.ffn_gate_exps.weight", GG_Q8_0, 3, 256, 64, 2);
    gg_tensor(f, "blk.0.ffn_up_exps.weight", GG_Q8_0, 3, 256, 64, 2);
    gg_tensor(f, "blk.0.ffn_down_exps.weight", GG_Q8_0, 3, 64, 256, 2);
    st_model *m = open_bytes(f, ST_OK, NULL);
    assert_int_equal(st_model_moe_info(m)->n_ff_expert, 0);
    close_model(m);
    gg_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_architecture_is_described_from_its_file),
        cmocka_unit_test(shared_experts_are_dense_matrices_and_shapes),
        cmocka_unit_test(qwen3next_layout_is_within_the_limits),
        cmocka_unit_test(models_beyond_the_limits_are_refused_with_the_limit_and_the_value),
        cmocka_unit_test(every_ggml_type_of_an_expert_layer_is_described_or_omitted),
        cmocka_unit_test(expert_layouts_the_kernels_do_not_run_are_omitted),
        cmocka_unit_test(files_that_contradict_their_metadata_are_refused),
    };
    return cmocka_run_group_tests_name("model_arch", tests, NULL, NULL);
}
