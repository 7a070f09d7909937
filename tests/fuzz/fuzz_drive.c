/* Fuzz target: what a parsed model and a parsed table drive, on the CPU
 * backend (the parsers have their own targets; the crashes of issue 14 were
 * past them, in the routing, the shapes and the limits).
 *
 * Input: a little-endian u32 N, N bytes of GGUF, the rest table text (an
 * input shorter than 4 bytes is all GGUF). Then:
 *   - the model API: every layer, matrix, skipped tensor and shape;
 *   - the tuner's shape listing of the model (st_tune_shapes), each shape's
 *     key parsed back (st_tune_parse_shape must give the same shape) and
 *     its sizes computed (overflow-checked);
 *   - the table (parsed without the identity check) looked up for every
 *     model shape: a hit names a compiled-in variant;
 *   - when the model's weights are small (CAP_BYTES), the gate's decode
 *     model of it (st_vmodel_open_model: weights copied, routing from the
 *     model's router) stepped without and with the table: the outputs must
 *     be byte-identical (the exactness contract), so a table row that
 *     reached a variant which computed other bytes would abort;
 *   - the gate's synthetic set-up from the table's rows (as the tuner's gate
 *     builds one from tuned shapes), small ones only, stepped the same way.
 * Any sanitizer report, or an abort() below, is a finding. */
#include "fuzz_target.h"
#include "ctx_internal.h"
#include "gguf.h"
#include "model_extra.h"
#include "strata/decode.h"
#include "strata/tools/model.h"
#include "strata/table.h"
#include "strata/variants.h"
#include "mem_fit.h"
#include "tuner_shapes.h"
#include "vmodel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Size caps: what one input may make the CPU backend copy and compute. */
#define CAP_BYTES ((size_t)1 << 20)
#define CAP_SHAPES 64
#define CAP_SYNTHETIC 4

static volatile uint64_t g_sink;

static void quiet(void *user, const char *line)
{
    (void)user;
    g_sink += strlen(line);
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_drive: %s\n", what);
        abort();
    }
}

static void walk_model(const st_model *m)
{
    g_sink += strlen(st_model_arch(m)) + strlen(st_model_name(m)) + (uint64_t)st_model_expert_used(m);
    check(st_model_expert_used(m) >= 0 && st_model_expert_used(m) <= ST_MAX_TOPK, "expert_used past ST_MAX_TOPK");
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
        check(l->n_expert >= 1 && l->n_expert <= ST_MAX_EXPERTS, "a layer past ST_MAX_EXPERTS");
        check(l->n_expert_used <= l->n_expert, "more experts used than there are");
    }
    for (size_t i = 0; i < st_model_expert_shape_count(m); i++)
        check(st_model_expert_layer_at(m, st_model_expert_shape_at(m, i)->first) != NULL, "shape without its layer");
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        check(st_model_matrix_at(m, s->first) != NULL, "mmvq shape without its matrix");
    }
    g_sink += st_model_matrix_count(m) + st_model_skipped_count(m);
}

static void shape_key(const st_tune_shape *s, char *buf, size_t n)
{
    if (s->kind == ST_SHAPE_MMVQ)
        snprintf(buf, n, "mmvq %s %d %d", st_qtype_name(s->type), s->rows, s->cols);
    else
        snprintf(buf, n, "expert %s %s %d %d %d", st_qtype_name(s->type), st_qtype_name(s->down_type), s->n_embd,
                 s->n_ff, s->n_tokens);
}

/* The tuner's shapes of M: each key parses back to the same shape. */
static void list_shapes(const st_model *m)
{
    st_tune_options o;
    st_tune_options_default(&o);
    st_tune_shape *v = NULL;
    int n = 0;
    if (st_tune_shapes(&o, m, &v, &n) != ST_OK) return;
    for (int i = 0; i < n && i < CAP_SHAPES; i++) {
        char key[160];
        shape_key(&v[i], key, sizeof key);
        st_tune_shape back;
        check(st_tune_parse_shape(key, v[i].n_expert, v[i].topk, &back) == ST_OK, "a listed shape does not parse back");
        check(back.kind == v[i].kind && back.type == v[i].type && back.rows == v[i].rows && back.cols == v[i].cols &&
                  back.n_embd == v[i].n_embd && back.n_ff == v[i].n_ff && back.n_tokens == v[i].n_tokens &&
                  (back.kind == ST_SHAPE_MMVQ || back.down_type == v[i].down_type),
              "a listed shape parses back as another");
        g_sink += st_tune_shape_weight_bytes(&v[i]) + st_tune_shape_io_bytes(&v[i]);
    }
    free(v);
}

static void lookups(const st_model *m, const st_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        st_mmvq_key k = {s->type, s->n_rows, s->n_cols};
        int rows = 0;
        if (st_table_lookup_mmvq(t, &k, &rows)) check(st_mmvq_rows_valid(rows), "lookup gave a variant not compiled in");
    }
    for (size_t i = 0; i < st_model_expert_shape_count(m); i++) {
        const st_model_expert_shape *s = st_model_expert_shape_at(m, i);
        for (int nt = 1; nt <= ST_MAX_TOKENS; nt++) {
            st_expert_key k = {s->gu_type, s->down_type, s->n_embd, s->n_ff, nt};
            int gu = 0, dn = 0;
            if (st_table_lookup_expert(t, &k, &gu, &dn))
                check(st_expert_rows_valid(gu, dn), "lookup gave a pair not compiled in");
        }
    }
}

/* One step of VM for NT tokens without and with T: the same bytes. */
static void same_bytes_with_the_table(st_ctx *c, const st_vmodel *vm, st_table *t, int nt)
{
    const size_t n = st_vmodel_output_floats(vm, nt);
    float *a = malloc((n ? n : 1) * sizeof *a), *b = malloc((n ? n : 1) * sizeof *b);
    check(a && b, "out of memory");
    st_table *old = st_ctx_test_swap_table(c, NULL);
    const st_status sa = st_vmodel_step(c, vm, nt) == ST_OK ? st_vmodel_outputs(c, vm, nt, a) : ST_ERR_INVALID_ARG;
    st_ctx_test_swap_table(c, t);
    const st_status sb = st_vmodel_step(c, vm, nt) == ST_OK ? st_vmodel_outputs(c, vm, nt, b) : ST_ERR_INVALID_ARG;
    st_ctx_test_swap_table(c, old);
    check(sa == sb, "the step fails with the table but not without (or the other way)");
    if (sa == ST_OK) check(memcmp(a, b, n * sizeof *a) == 0, "a table variant changed the output bytes");
    free(a);
    free(b);
}

static size_t model_bytes(const st_model *m)
{
    size_t total = 0;
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *l = st_model_expert_layer_at(m, i);
        total += 2 * l->gu_bytes + l->down_bytes;
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) total += st_model_matrix_at(m, i)->bytes;
    return total;
}

static void drive_model(st_ctx *c, const st_model *m, st_table *t, int nt)
{
    if (model_bytes(m) > CAP_BYTES) return;
    /* both layouts over the corpus: in place when NT is odd */
    st_vmodel *vm = NULL;
    if (st_vmodel_open_model(c, m, (nt & 1) != 0, &vm) != ST_OK) return;
    same_bytes_with_the_table(c, vm, t, 1);
    if (nt != 1) same_bytes_with_the_table(c, vm, t, nt);
    st_vmodel_close(c, vm);
}

/* The gate's synthetic decode model of the table's first rows. */
static void drive_synthetic(st_ctx *c, st_table *t, int n_expert, int topk, int nt)
{
    if (!t) return;
    char texts[CAP_SYNTHETIC][160];
    const char *specs[CAP_SYNTHETIC];
    int n = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < st_table_mmvq_count(t) && n < CAP_SYNTHETIC; i++) {
        st_mmvq_key k;
        int rows;
        st_table_mmvq_at(t, i, &k, &rows);
        snprintf(texts[n], sizeof texts[n], "mmvq %s %d %d", st_qtype_name(k.type), k.n_rows, k.n_cols);
        specs[n] = texts[n];
        n++;
    }
    for (size_t i = 0; i < st_table_expert_count(t) && n < CAP_SYNTHETIC; i++) {
        st_expert_key k;
        int gu, dn;
        st_table_expert_at(t, i, &k, &gu, &dn);
        snprintf(texts[n], sizeof texts[n], "expert %s %s %d %d %d", st_qtype_name(k.gu_type), st_qtype_name(k.down_type),
                 k.n_embd, k.n_ff, k.n_tokens);
        specs[n] = texts[n];
        n++;
    }
    for (int i = 0; i < n; i++) {
        st_tune_shape s;
        if (st_tune_parse_shape(specs[i], n_expert, topk, &s) != ST_OK) return;
        bytes += st_tune_shape_weight_bytes(&s);
    }
    if (n == 0 || bytes > CAP_BYTES) return;
    st_verify_options o;
    st_verify_options_default(&o);
    o.shapes = specs;
    o.n_shapes = n;
    o.n_expert = n_expert;
    o.topk = topk;
    st_vmodel *vm = NULL;
    if (st_vmodel_open(c, &o, &vm) != ST_OK) return;
    same_bytes_with_the_table(c, vm, t, nt);
    st_vmodel_close(c, vm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static st_ctx *ctx;
    if (!ctx) {
        st_set_log(quiet, NULL);
        if (st_ctx_create(ST_BACKEND_CPU, 0, &ctx) != ST_OK) abort();
        st_dispatch_config cfg;
        st_dispatch_config_default(&cfg);
        st_ctx_set_dispatch(ctx, &cfg);
    }
    const uint8_t last = size ? data[size - 1] : 0;
    size_t glen = size;
    const uint8_t *text = NULL;
    size_t tlen = 0;
    if (size >= 4) {
        const uint32_t n = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
        glen = n <= size - 4 ? n : size - 4;
        text = data + 4 + glen;
        tlen = size - 4 - glen;
        data += 4;
    }
    /* small knobs from the input's last byte */
    const uint8_t k0 = last;
    const int nt = 1 + k0 % ST_MAX_TOKENS;
    const int n_expert = 1 + (k0 >> 3) % 16, topk = 1 + (k0 >> 5) % (n_expert < ST_MAX_TOPK ? n_expert : ST_MAX_TOPK);

    /* exact copies, so a read past either part is caught */
    uint8_t *g = malloc(glen ? glen : 1);
    char *tx = malloc(tlen ? tlen : 1);
    if (!g || !tx) abort();
    if (glen) memcpy(g, data, glen);
    if (tlen) memcpy(tx, text, tlen);
    st_table *t = NULL;
    if (tlen) st_table_parse_any(tx, tlen, "fuzz", &t, NULL, 0);
    st_gguf *gg = NULL;
    st_model *m = NULL;
    if (st_gguf_parse(g, glen, &gg) == ST_OK && st_model_from_gguf(gg, "fuzz", &m) == ST_OK) {
        walk_model(m);
        list_shapes(m);
        lookups(m, t);
        drive_model(ctx, m, t, nt);
    }
    drive_synthetic(ctx, t, n_expert, topk, nt);
    st_model_close(m);
    st_table_destroy(t);
    free(g);
    free(tx);
    return 0;
}
