/* gguf + model: the GGUF reader against ggml's own listing of tiny-moe.gguf
 * (tests/data/gguf/tiny-moe.txt), the model description built on it, and
 * the reader's refusals of hostile files (every truncation, absurd counts,
 * bad offsets, alignments, names, nesting, versions). Hostile files are made
 * by patching a copy of tiny-moe.gguf in memory or by a small GGUF writer. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "strata/table.h"

#include "gguf.h"
#include "model_extra.h"
#include "strata/tools/model.h"
#include "strata/status.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TINY_GGUF STRATA_TEST_DATA "/gguf/tiny-moe.gguf"
#define TINY_TXT STRATA_TEST_DATA "/gguf/tiny-moe.txt"

enum { T_F32 = 0, T_F16 = 1, T_Q8_0 = 8, T_IQ4_NL = 20, T_IQ3_S = 21 };

/* ---- helpers --------------------------------------------------------------- */

/* The whole file, through the library's own reader (strata/table.h). */
static uint8_t *read_all(const char *path, size_t *len)
{
    char *b = NULL;
    assert_int_equal(st_read_file(path, &b, len), ST_OK);
    assert_true(*len > 0);
    return (uint8_t *)b;
}

static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Parses LEN bytes and expects a clean ST_ERR_PARSE whose message holds
 * WANT (NULL: any "gguf: " message). */
static void expect_refused(const uint8_t *buf, size_t len, const char *want)
{
    st_gguf *g = (st_gguf *)1;
    st_status s = st_gguf_parse(buf, len, &g);
    if (s != ST_ERR_PARSE || g != NULL || strncmp(st_last_error(), "gguf: ", 6) != 0 ||
        (want && !strstr(st_last_error(), want)))
        fail_msg("len %zu: status %s, message '%s', wanted '%s'", len, st_status_name(s), st_last_error(),
                 want ? want : "gguf: ...");
}

/* ---- a tiny GGUF writer ------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void w_bytes(wbuf *w, const void *src, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 64;
        w->p = realloc(w->p, w->cap);
        assert_non_null(w->p);
    }
    if (n) memcpy(w->p + w->n, src, n);
    w->n += n;
}

static void w_le(wbuf *w, uint64_t v, int n)
{
    uint8_t b[8];
    put_le(b, v, n);
    w_bytes(w, b, (size_t)n);
}

static void w_u32(wbuf *w, uint32_t v) { w_le(w, v, 4); }
static void w_u64(wbuf *w, uint64_t v) { w_le(w, v, 8); }

static void w_str(wbuf *w, const char *s)
{
    w_u64(w, strlen(s));
    w_bytes(w, s, strlen(s));
}

static void kv_u32(wbuf *w, const char *key, uint32_t v)
{
    w_str(w, key);
    w_u32(w, ST_GGUF_UINT32);
    w_u32(w, v);
}

static void kv_str(wbuf *w, const char *key, const char *v)
{
    w_str(w, key);
    w_u32(w, ST_GGUF_STRING);
    w_str(w, v);
}

typedef struct {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
} tspec;

/* The test's own block table (independent of the reader's). */
static uint64_t spec_bytes(const tspec *t)
{
    uint64_t qk = 1, nb;
    switch (t->type) {
    case T_F32: nb = 4; break;
    case T_F16: nb = 2; break;
    case T_Q8_0: qk = 32; nb = 34; break;
    case T_IQ4_NL: qk = 32; nb = 18; break;
    case T_IQ3_S: qk = 256; nb = 110; break;
    default: qk = 32; nb = 32; break; /* unknown to the reader: any bytes */
    }
    uint64_t n = 1;
    for (uint32_t d = 1; d < t->n_dims && d < 4; d++) n *= t->ne[d];
    return t->ne[0] / qk * nb * n;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* A whole file: header, the N_KV pre-encoded pairs KVS, the tensor infos with
 * offsets laid out one after another, padding, data (a byte pattern). */
static wbuf make_gguf(uint32_t version, const wbuf *kvs, uint64_t n_kv, const tspec *ts, size_t n_t, uint32_t align)
{
    wbuf w = {0};
    w_bytes(&w, "GGUF", 4);
    w_u32(&w, version);
    w_u64(&w, n_t);
    w_u64(&w, n_kv);
    if (kvs) w_bytes(&w, kvs->p, kvs->n);
    uint64_t off = 0;
    for (size_t i = 0; i < n_t; i++) {
        w_str(&w, ts[i].name);
        w_u32(&w, ts[i].n_dims);
        for (uint32_t d = 0; d < ts[i].n_dims; d++) w_u64(&w, d < 4 ? ts[i].ne[d] : 1);
        w_u32(&w, ts[i].type);
        w_u64(&w, off);
        off = align_up(off + spec_bytes(&ts[i]), align);
    }
    while (w.n % align) w_bytes(&w, "\0", 1);
    /* Absurd tensors (the refusal tests) get no data at all. */
    for (uint64_t i = 0; off <= (1u << 20) && i < off; i++) {
        uint8_t b = (uint8_t)(i * 131 + 7);
        w_bytes(&w, &b, 1);
    }
    return w;
}

static st_gguf *parse_ok(const wbuf *w)
{
    st_gguf *g = NULL;
    st_status s = st_gguf_parse(w->p, w->n, &g);
    if (s != ST_OK) fail_msg("parse failed: %s: %s", st_status_name(s), st_last_error());
    return g;
}

/* A small MoE model: 2 expert layers (iq3_s gate/up, iq4_nl down, n_embd 256,
 * n_ff 32, 2 experts), an f32 router and an iq3_s attn_q per layer, q8_0
 * token_embd, an f32 norm. EXTRA (may be NULL) is appended to the tensors. */
static wbuf make_moe(const tspec *extra, size_t n_extra, bool with_kvs)
{
    tspec ts[16] = {
        {"token_embd.weight", 2, {256, 64, 1, 1}, T_Q8_0},
        {"blk.0.attn_norm.weight", 1, {256, 1, 1, 1}, T_F32},
        {"blk.0.attn_q.weight", 2, {256, 256, 1, 1}, T_IQ3_S},
        {"blk.0.ffn_gate_inp.weight", 2, {256, 2, 1, 1}, T_F32},
        {"blk.0.ffn_gate_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S},
        {"blk.0.ffn_up_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S},
        {"blk.0.ffn_down_exps.weight", 3, {32, 256, 2, 1}, T_IQ4_NL},
        {"blk.1.ffn_down_exps.weight", 3, {32, 256, 2, 1}, T_IQ4_NL},
        {"blk.1.ffn_up_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S},
        {"blk.1.ffn_gate_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S},
    };
    size_t n = 10;
    for (size_t i = 0; i < n_extra; i++) ts[n++] = extra[i];
    wbuf kvs = {0};
    uint64_t n_kv = 0;
    if (with_kvs) {
        kv_str(&kvs, "general.architecture", "qwen3moe");
        kv_str(&kvs, "general.name", "synthetic");
        kv_u32(&kvs, "qwen3moe.expert_count", 2);
        kv_u32(&kvs, "qwen3moe.expert_used_count", 1);
        n_kv = 4;
    }
    wbuf w = make_gguf(3, &kvs, n_kv, ts, n, 32);
    free(kvs.p);
    return w;
}

/* Builds the model description of W (which must parse). */
static st_status model_of(const wbuf *w, st_model **m)
{
    st_gguf *g = parse_ok(w);
    return st_model_from_gguf(g, "fallback", m);
}

/* ---- tiny-moe.gguf against ggml's listing ---------------------------------------- */

static uint8_t *g_tiny;
static size_t g_tiny_len;

static int setup_tiny(void **state)
{
    (void)state;
    g_tiny = read_all(TINY_GGUF, &g_tiny_len);
    return 0;
}

static int teardown_tiny(void **state)
{
    (void)state;
    free(g_tiny);
    return 0;
}

static void gguf_reads_tiny_moe_header(void **state)
{
    st_gguf *g;
    assert_int_equal(st_gguf_open(TINY_GGUF, &g), ST_OK);
    assert_int_equal(st_gguf_version(g), 3);
    assert_int_equal(st_gguf_alignment(g), 32);
    assert_int_equal(st_gguf_data_offset(g), 1536);
    assert_int_equal(st_gguf_kv_count(g), 17);
    assert_int_equal(st_gguf_tensor_count(g), 11);
    size_t len;
    st_gguf_bytes(g, &len);
    assert_int_equal(len, 586240);
    assert_string_equal(st_gguf_kv_str(st_gguf_find_kv(g, "general.architecture")), "qwen3moe");
    int64_t v;
    assert_true(st_gguf_kv_int(st_gguf_find_kv(g, "qwen3moe.embedding_length"), &v));
    assert_int_equal(v, 256);
    assert_true(st_gguf_kv_int(st_gguf_find_kv(g, "qwen3moe.expert_count"), &v));
    assert_int_equal(v, 8);
    assert_true(st_gguf_kv_int(st_gguf_find_kv(g, "qwen3moe.expert_used_count"), &v));
    assert_int_equal(v, 2);
    assert_true(st_gguf_kv_int(st_gguf_find_kv(g, "qwen3moe.block_count"), &v));
    assert_int_equal(v, 2);
    assert_null(st_gguf_find_kv(g, "qwen3moe.expert_count_x"));
    assert_null(st_gguf_find_tensor(g, "output.weight"));
    assert_non_null(st_gguf_find_tensor(g, "blk.1.ffn_down_exps.weight"));
    st_gguf_close(g);
}

/* FNV-1a-64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of each
 * tensor's bytes, computed independently (Python over the file). The
 * listing's own hash column does not reproduce with standard FNV-1a-64 (it is
 * not a hash of any 32-aligned window of the file), so the listing's
 * dequantized sums stand in for it below: they pin the same bytes. */
static const uint64_t TINY_FNV[11] = {
    0x63655ea10e87fa99ull, 0x2a026622c3fd8558ull, 0x3f1c8b79bebc7689ull, 0x37f97f2abdba2e04ull,
    0x1824bc15ab09de31ull, 0x5064f9cec67e0289ull, 0x02b85c451f2a65a3ull, 0x10aaeeb580b58372ull,
    0xfb2453ef6391114eull, 0x44edeebb81022a94ull, 0xd3c3409143078423ull,
};

/* Sum and sum of |x| of the dequantized values of T, in double. */
static void dequant_sums(const st_gguf_tensor *t, double *sum, double *sumabs)
{
    int64_t k = t->ne[0], rows = t->n_elements / k;
    float *row = malloc((size_t)k * sizeof *row);
    assert_non_null(row);
    size_t row_bytes = (size_t)(t->size / (uint64_t)rows);
    *sum = *sumabs = 0;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = t->data + (size_t)r * row_bytes;
        if (t->type == T_F32)
            memcpy(row, src, (size_t)k * 4);
        else
            assert_int_equal(st_dequantize_row((st_qtype)t->type, src, row, k), ST_OK);
        for (int64_t i = 0; i < k; i++) {
            *sum += row[i];
            *sumabs += row[i] < 0 ? -(double)row[i] : (double)row[i];
        }
    }
    free(row);
}

/* Every line of tiny-moe.txt: header values, each KV (type and value), each
 * tensor (type, ne, offset, size, absolute offset, its bytes through the
 * dequantized sum and sum of |x|). */
static void gguf_matches_every_line_of_the_ggml_listing(void **state)
{
    st_gguf *g;
    assert_int_equal(st_gguf_parse(g_tiny, g_tiny_len, &g), ST_OK);
    FILE *f = fopen(TINY_TXT, "r");
    assert_non_null(f);
    char line[1024];
    int kvs = 0, tensors = 0, headers = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long x;
        size_t i;
        char key[256], type[32];
        int at = 0;
        if (line[0] == '#') continue;
        if (sscanf(line, "file_size: %llu", &x) == 1) {
            assert_int_equal(x, g_tiny_len);
            headers++;
        } else if (sscanf(line, "gguf_version: %llu", &x) == 1) {
            assert_int_equal(x, st_gguf_version(g));
            headers++;
        } else if (sscanf(line, "alignment: %llu", &x) == 1) {
            assert_int_equal(x, st_gguf_alignment(g));
            headers++;
        } else if (sscanf(line, "data_offset: %llu", &x) == 1) {
            assert_int_equal(x, st_gguf_data_offset(g));
            headers++;
        } else if (sscanf(line, "n_kv: %llu", &x) == 1) {
            assert_int_equal(x, st_gguf_kv_count(g));
            headers++;
        } else if (sscanf(line, "n_tensors: %llu", &x) == 1) {
            assert_int_equal(x, st_gguf_tensor_count(g));
            headers++;
        } else if (sscanf(line, "kv %zu: %255s [%31[^]]] = %n", &i, key, type, &at) == 3 && at > 0) {
            const st_gguf_kv *kv = st_gguf_kv_at(g, i);
            assert_non_null(kv);
            assert_string_equal(kv->key, key);
            assert_string_equal(st_gguf_vtype_name(kv->type), type);
            char *val = line + at;
            val[strcspn(val, "\n")] = '\0';
            if (kv->type == ST_GGUF_STRING) {
                size_t n = strlen(val);
                assert_true(n >= 2 && val[0] == '"' && val[n - 1] == '"');
                val[n - 1] = '\0';
                assert_string_equal(kv->v.str.s, val + 1);
            } else if (kv->type == ST_GGUF_FLOAT32) {
                assert_true(kv->v.f32 == strtof(val, NULL));
            } else {
                assert_int_equal(kv->type, ST_GGUF_UINT32);
                assert_int_equal(kv->v.u64, strtoull(val, NULL, 10));
            }
            kvs++;
        } else if (strncmp(line, "tensor ", 7) == 0) {
            char name[128], tname[32];
            unsigned tid;
            long long ne[4];
            unsigned long long off, size, abs_off, hash;
            double want_sum, want_abs;
            int got = sscanf(line, "tensor %zu: %127s %31[^(](%u) %lld,%lld,%lld,%lld %llu %llu %llu 0x%llx %lf %lf",
                             &i, name, tname, &tid, &ne[0], &ne[1], &ne[2], &ne[3], &off, &size, &abs_off, &hash,
                             &want_sum, &want_abs);
            assert_int_equal(got, 14);
            const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
            assert_non_null(t);
            assert_string_equal(t->name, name);
            assert_int_equal(t->type, tid);
            assert_string_equal(st_gguf_type_name(t->type), tname);
            for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], ne[d]);
            assert_int_equal(t->offset, off);
            assert_true(t->size_known);
            assert_int_equal(t->size, size);
            assert_int_equal(t->file_offset, abs_off);
            assert_ptr_equal(t->data, g_tiny + abs_off);
            assert_true(i < 11 && fnv1a64(t->data, (size_t)t->size) == TINY_FNV[i]);
            double sum, sumabs;
            dequant_sums(t, &sum, &sumabs);
            if (!(fabs(sum - want_sum) <= 1e-9 * want_abs && fabs(sumabs - want_abs) <= 1e-9 * want_abs))
                fail_msg("tensor %zu (%s): sums %.17g %.17g, listing %.17g %.17g", i, name, sum, sumabs, want_sum,
                         want_abs);
            assert_ptr_equal(st_gguf_find_tensor(g, name), t);
            tensors++;
        }
    }
    fclose(f);
    assert_int_equal(headers, 6);
    assert_int_equal(kvs, 17);
    assert_int_equal(tensors, 11);
    st_gguf_close(g);
}

static void gguf_open_reports_a_missing_file_as_io_error(void **state)
{
    st_gguf *g = (st_gguf *)1;
    assert_int_equal(st_gguf_open(STRATA_TEST_DATA "/gguf/no-such-file.gguf", &g), ST_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(st_last_error(), "cannot open"));
    st_model *m = (st_model *)1;
    assert_int_equal(st_model_open(STRATA_TEST_DATA "/gguf", &m), ST_ERR_IO);
    assert_null(m);
    st_model_close(NULL);
    st_gguf_close(NULL);
}

static void model_describes_tiny_moe_expert_layers(void **state)
{
    st_model *m;
    assert_int_equal(st_model_open(TINY_GGUF, &m), ST_OK);
    assert_string_equal(st_model_arch(m), "qwen3moe");
    assert_string_equal(st_model_name(m), "strata-tune-tiny-moe-tests");
    assert_int_equal(st_model_expert_used(m), 2);
    assert_int_equal(st_model_expert_layer_count(m), 2);
    for (int i = 0; i < 2; i++) {
        const st_model_expert_layer *L = st_model_expert_layer_at(m, (size_t)i);
        assert_int_equal(L->layer, i);
        assert_int_equal(L->gu_type, ST_IQ3_S);
        assert_int_equal(L->down_type, ST_IQ4_NL);
        assert_int_equal(L->n_embd, 256);
        assert_int_equal(L->n_ff, 64);
        assert_int_equal(L->n_expert, 8);
        assert_int_equal(L->n_expert_used, 2);
        assert_int_equal(L->gu_bytes, 56320);
        assert_int_equal(L->down_bytes, 73728);
    }
    /* The pointers are the tensors' bytes. */
    const st_model_expert_layer *L0 = st_model_expert_layer_at(m, 0);
    assert_true(fnv1a64(L0->gate, L0->gu_bytes) == TINY_FNV[3]);
    assert_true(fnv1a64(L0->up, L0->gu_bytes) == TINY_FNV[4]);
    assert_true(fnv1a64(L0->down, L0->down_bytes) == TINY_FNV[5]);
    const st_model_expert_layer *L1 = st_model_expert_layer_at(m, 1);
    assert_true(fnv1a64(L1->gate, L1->gu_bytes) == TINY_FNV[8]);
    assert_true(fnv1a64(L1->down, L1->down_bytes) == TINY_FNV[10]);
    assert_null(st_model_expert_layer_at(m, 2));
    st_model_close(m);
}

static void model_lists_tiny_moe_matrices_with_tied_output(void **state)
{
    st_model *m;
    assert_int_equal(st_model_open(TINY_GGUF, &m), ST_OK);
    assert_int_equal(st_model_matrix_count(m), 3);
    const st_model_matrix *e = st_model_matrix_at(m, 0);
    assert_string_equal(e->name, "token_embd.weight (tied output)");
    assert_int_equal(e->type, ST_Q8_0);
    assert_string_equal(e->type_name, "q8_0");
    assert_int_equal(e->n_rows, 512);
    assert_int_equal(e->n_cols, 256);
    assert_int_equal(e->layer, -1);
    assert_int_equal(e->bytes, 139264);
    assert_true(fnv1a64(e->data, e->bytes) == TINY_FNV[0]);
    for (int i = 0; i < 2; i++) {
        const st_model_matrix *q = st_model_matrix_at(m, 1 + (size_t)i);
        char want[64];
        snprintf(want, sizeof want, "blk.%d.attn_q.weight", i);
        assert_string_equal(q->name, want);
        assert_int_equal(q->type, ST_IQ3_S);
        assert_int_equal(q->n_rows, 256);
        assert_int_equal(q->n_cols, 256);
        assert_int_equal(q->layer, i);
    }
    /* The f32 routers are no decode shape: skipped, not matrices. */
    assert_int_equal(st_model_skipped_count(m), 2);
    assert_string_equal(st_model_skipped_at(m, 0)->name, "blk.0.ffn_gate_inp.weight");
    assert_string_equal(st_model_skipped_at(m, 1)->type_name, "f32");
    assert_int_equal(st_model_skipped_at(m, 1)->n_rows, 8);
    assert_null(st_model_matrix_at(m, 3));
    st_model_close(m);
}

static void model_deduplicates_tiny_moe_shapes_in_first_seen_order(void **state)
{
    st_model *m;
    assert_int_equal(st_model_open(TINY_GGUF, &m), ST_OK);
    assert_int_equal(st_model_expert_shape_count(m), 1);
    const st_model_expert_shape *e = st_model_expert_shape_at(m, 0);
    assert_int_equal(e->gu_type, ST_IQ3_S);
    assert_int_equal(e->down_type, ST_IQ4_NL);
    assert_int_equal(e->n_embd, 256);
    assert_int_equal(e->n_ff, 64);
    assert_int_equal(e->n_expert, 8);
    assert_int_equal(e->n_layers, 2);
    assert_int_equal(e->first, 0);
    assert_int_equal(st_model_mmvq_shape_count(m), 2);
    const st_model_mmvq_shape *s0 = st_model_mmvq_shape_at(m, 0), *s1 = st_model_mmvq_shape_at(m, 1);
    assert_int_equal(s0->type, ST_Q8_0);
    assert_int_equal(s0->n_rows, 512);
    assert_int_equal(s0->n_cols, 256);
    assert_int_equal(s0->n_matrices, 1);
    assert_int_equal(s1->type, ST_IQ3_S);
    assert_int_equal(s1->n_rows, 256);
    assert_int_equal(s1->n_cols, 256);
    assert_int_equal(s1->n_matrices, 2);
    assert_int_equal(s1->first, 1);
    assert_null(st_model_mmvq_shape_at(m, 2));
    assert_null(st_model_expert_shape_at(m, 1));
    st_model_close(m);
}

/* ---- hostile input: tiny-moe.gguf cut or patched ------------------------------- */

static void gguf_refuses_every_truncation_of_tiny_moe(void **state)
{
    for (size_t len = 0; len <= 1536 + 64; len++) expect_refused(g_tiny, len, NULL);
    expect_refused(g_tiny, 3, "truncated at byte 0 while reading the header");
    expect_refused(g_tiny, 30, "header claims 17 key/value pairs (byte 16), but the 6 bytes after the header hold at most 0");
    expect_refused(g_tiny, 600, "truncated at byte");
    expect_refused(g_tiny, 1400, "while reading tensor info");
    /* Cut at each tensor's data boundaries: no bytes, all but one, all. */
    st_gguf *g;
    assert_int_equal(st_gguf_parse(g_tiny, g_tiny_len, &g), ST_OK);
    for (size_t i = 0; i < st_gguf_tensor_count(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        char want[128];
        snprintf(want, sizeof want, "tensor %zu (%s) data", i, t->name);
        expect_refused(g_tiny, (size_t)t->file_offset, want);
        expect_refused(g_tiny, (size_t)(t->file_offset + t->size - 1), want);
        if (i + 1 < st_gguf_tensor_count(g)) expect_refused(g_tiny, (size_t)(t->file_offset + t->size), NULL);
    }
    st_gguf_close(g);
    expect_refused(g_tiny, g_tiny_len - 1, "runs past the end of the file (586239 bytes)");
}

static uint8_t *tiny_copy(void)
{
    uint8_t *b = malloc(g_tiny_len);
    assert_non_null(b);
    memcpy(b, g_tiny, g_tiny_len);
    return b;
}

static void gguf_refuses_absurd_counts_in_the_header(void **state)
{
    uint8_t *b = tiny_copy();
    put_le(b + 16, 1ull << 60, 8);
    expect_refused(b, g_tiny_len, "header claims 1152921504606846976 key/value pairs");
    put_le(b + 16, 17, 8);
    put_le(b + 8, UINT64_MAX, 8);
    expect_refused(b, g_tiny_len, "tensors");
    put_le(b + 8, 20000, 8); /* plausible for the bytes, but the infos are not there */
    expect_refused(b, g_tiny_len, NULL);
    put_le(b + 8, 11, 8);
    put_le(b + 24, 1ull << 63, 8); /* the first key's length */
    expect_refused(b, g_tiny_len, "string length 9223372036854775808 at byte 24");
    put_le(b + 24, (1u << 20) + 1, 8);
    expect_refused(b, g_tiny_len, "exceeds 1 MiB");
    free(b);
}

static void gguf_refuses_bad_magic_and_versions(void **state)
{
    uint8_t *b = tiny_copy();
    memcpy(b, "abcd", 4);
    expect_refused(b, g_tiny_len, "not a GGUF file (magic 'abcd')");
    memcpy(b, "GGUF", 4);
    put_le(b + 4, 1, 4);
    expect_refused(b, g_tiny_len, "unsupported GGUF version 1 (2 and 3 are supported)");
    put_le(b + 4, 4, 4);
    expect_refused(b, g_tiny_len, "unsupported GGUF version 4");
    put_le(b + 4, 0x03000000u, 4);
    expect_refused(b, g_tiny_len, "big-endian");
    /* v2 files have the same little-endian layout. */
    put_le(b + 4, 2, 4);
    st_gguf *g;
    assert_int_equal(st_gguf_parse(b, g_tiny_len, &g), ST_OK);
    assert_int_equal(st_gguf_version(g), 2);
    assert_int_equal(st_gguf_data_offset(g), 1536);
    st_gguf_close(g);
    free(b);
}

/* Byte offset of tensor I's data-offset field inside the tiny file. */
static size_t tiny_offset_field(size_t i)
{
    st_gguf *g;
    assert_int_equal(st_gguf_parse(g_tiny, g_tiny_len, &g), ST_OK);
    const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
    size_t n = strlen(t->name);
    size_t at = 0;
    for (size_t p = 24; p + n <= 1536; p++)
        if (memcmp(g_tiny + p, t->name, n) == 0 && p >= 8 && g_tiny[p - 8] == n) at = p + n;
    assert_true(at > 0);
    at += 4 + 8 * t->n_dims + 4;
    assert_int_equal(g_tiny[at] | (g_tiny[at + 1] << 8) | (g_tiny[at + 2] << 16), t->offset);
    st_gguf_close(g);
    return at;
}

static void gguf_refuses_bad_tensor_offsets(void **state)
{
    uint8_t *b = tiny_copy();
    size_t at = tiny_offset_field(10);
    put_le(b + at, 510976 + 1, 8);
    expect_refused(b, g_tiny_len, "data offset 510977 at byte");
    expect_refused(b, g_tiny_len, "is not a multiple of the alignment 32");
    put_le(b + at, 510976 + 32, 8);
    expect_refused(b, g_tiny_len, "gguf: tensor 10 (blk.1.ffn_down_exps.weight) data [offset 512544, 73728 bytes) "
                                  "runs past the end of the file (586240 bytes)");
    put_le(b + at, UINT64_MAX - 31, 8);
    expect_refused(b, g_tiny_len, "past the end of the data section");
    free(b);
}

/* ---- hostile input: synthetic files ------------------------------------------- */

static void gguf_loads_minimal_v2_and_v3_files(void **state)
{
    for (uint32_t v = 2; v <= 3; v++) {
        wbuf w = make_gguf(v, NULL, 0, NULL, 0, 32);
        w.n = 24; /* without the padding: no tensors, so no data section */
        st_gguf *g = parse_ok(&w);
        assert_int_equal(st_gguf_version(g), v);
        assert_int_equal(st_gguf_kv_count(g), 0);
        assert_int_equal(st_gguf_tensor_count(g), 0);
        st_gguf_close(g);
        free(w.p);
        wbuf m = make_moe(NULL, 0, true);
        put_le(m.p + 4, v, 4);
        g = parse_ok(&m);
        assert_int_equal(st_gguf_tensor_count(g), 10);
        st_gguf_close(g);
        free(m.p);
    }
}

static void gguf_checks_the_alignment_key(void **state)
{
    static const uint32_t bad[] = {0, 3, 48, 0x80000001u};
    tspec t = {"x", 1, {32, 1, 1, 1}, T_F32};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wbuf kv = {0};
        kv_u32(&kv, "general.alignment", bad[i]);
        wbuf w = make_gguf(3, &kv, 1, &t, 1, 32);
        expect_refused(w.p, w.n, "is not a power of two");
        free(w.p);
        free(kv.p);
    }
    wbuf kv = {0};
    w_str(&kv, "general.alignment");
    w_u32(&kv, ST_GGUF_UINT64);
    w_u64(&kv, 64);
    wbuf w = make_gguf(3, &kv, 1, &t, 1, 64);
    expect_refused(w.p, w.n, "general.alignment at byte 24 has type u64 (must be u32)");
    free(w.p);
    free(kv.p);

    kv = (wbuf){0};
    kv_u32(&kv, "general.alignment", 64);
    tspec two[2] = {{"a", 1, {8, 1, 1, 1}, T_F32}, {"b", 1, {8, 1, 1, 1}, T_F32}};
    w = make_gguf(3, &kv, 1, two, 2, 64);
    st_gguf *g = parse_ok(&w);
    assert_int_equal(st_gguf_alignment(g), 64);
    assert_int_equal(st_gguf_data_offset(g) % 64, 0);
    assert_int_equal(st_gguf_tensor_at(g, 1)->offset, 64);
    st_gguf_close(g);
    /* 32-aligned offsets are not 64-aligned. */
    wbuf w32 = make_gguf(3, &kv, 1, two, 2, 32);
    expect_refused(w32.p, w32.n, "data offset 32 at byte");
    free(w32.p);
    free(w.p);
    free(kv.p);
}

static void gguf_refuses_bad_tensor_infos(void **state)
{
    tspec five = {"t5", 5, {1, 1, 1, 1}, T_F32};
    wbuf w = make_gguf(3, NULL, 0, &five, 1, 32);
    expect_refused(w.p, w.n, "tensor 0 (t5) at byte 34 has 5 dimensions (at most 4)");
    free(w.p);

    tspec big = {"big", 3, {1ull << 32, 1ull << 32, 1ull << 32, 1}, T_F32};
    wbuf kv = {0};
    w = make_gguf(3, &kv, 0, &big, 1, 32);
    expect_refused(w.p, w.n, "tensor 0 (big) element count overflows");
    free(w.p);

    tspec neg = {"neg", 2, {32, UINT64_MAX, 1, 1}, T_F32};
    w = make_gguf(3, NULL, 0, &neg, 1, 32);
    expect_refused(w.p, w.n, "dimension 1 at byte");
    free(w.p);

    /* Bytes overflow though the element count does not: 2^62 f32 values. */
    tspec bytes = {"bytes", 2, {1ull << 31, 1ull << 31, 1, 1}, T_F32};
    w = make_gguf(3, NULL, 0, &bytes, 1, 32);
    expect_refused(w.p, w.n, "byte size overflows");
    free(w.p);

    tspec odd = {"odd", 2, {33, 2, 1, 1}, T_Q8_0};
    w = make_gguf(3, NULL, 0, &odd, 1, 32);
    expect_refused(w.p, w.n, "row length 33 is not a multiple of the q8_0 block (32 values; type at byte 55)");
    free(w.p);

    tspec dup[2] = {{"same", 1, {8, 1, 1, 1}, T_F32}, {"same", 1, {8, 1, 1, 1}, T_F32}};
    w = make_gguf(3, NULL, 0, dup, 2, 32);
    expect_refused(w.p, w.n, "duplicate tensor name 'same' (tensors 0 and 1)");
    free(w.p);

    /* An unknown type is recorded with an unknown size, not refused. */
    tspec unk = {"unknown", 2, {64, 2, 1, 1}, 200};
    w = make_gguf(3, NULL, 0, &unk, 1, 32);
    st_gguf *g = parse_ok(&w);
    const st_gguf_tensor *t = st_gguf_tensor_at(g, 0);
    assert_false(t->size_known);
    assert_int_equal(t->type, 200);
    assert_string_equal(st_gguf_type_name(t->type), "?");
    assert_non_null(t->data);
    st_gguf_close(g);
    free(w.p);
}

static void gguf_refuses_bad_key_values(void **state)
{
    wbuf kv = {0};
    kv_u32(&kv, "a", 1);
    kv_u32(&kv, "a", 2);
    wbuf w = make_gguf(3, &kv, 2, NULL, 0, 32);
    expect_refused(w.p, w.n, "duplicate key 'a' (kv 0 at byte 24 and kv 1 at byte 41)");
    free(w.p);
    free(kv.p);

    kv = (wbuf){0};
    w_str(&kv, "weird");
    w_u32(&kv, 13);
    w_u32(&kv, 0);
    w = make_gguf(3, &kv, 1, NULL, 0, 32);
    expect_refused(w.p, w.n, "unknown value type 13 at byte 37 while reading kv 0 (weird)");
    free(w.p);
    free(kv.p);

    /* Array count far beyond the bytes, for fixed-size and string elements. */
    for (uint32_t elem = 0; elem <= ST_GGUF_FLOAT64; elem++) {
        if (elem == ST_GGUF_ARRAY) continue;
        kv = (wbuf){0};
        w_str(&kv, "arr");
        w_u32(&kv, ST_GGUF_ARRAY);
        w_u32(&kv, elem);
        w_u64(&kv, 1ull << 62);
        w_u64(&kv, 0);
        w = make_gguf(3, &kv, 1, NULL, 0, 32);
        expect_refused(w.p, w.n, "array of 4611686018427387904");
        free(w.p);
        free(kv.p);
    }
    kv = (wbuf){0};
    w_str(&kv, "arr");
    w_u32(&kv, ST_GGUF_ARRAY);
    w_u32(&kv, 99);
    w_u64(&kv, 0);
    w = make_gguf(3, &kv, 1, NULL, 0, 32);
    expect_refused(w.p, w.n, "unknown array element type 99");
    free(w.p);
    free(kv.p);

    /* A huge string inside an array. */
    kv = (wbuf){0};
    w_str(&kv, "strs");
    w_u32(&kv, ST_GGUF_ARRAY);
    w_u32(&kv, ST_GGUF_STRING);
    w_u64(&kv, 1);
    w_u64(&kv, 1ull << 63);
    w = make_gguf(3, &kv, 1, NULL, 0, 32);
    expect_refused(w.p, w.n, "string length 9223372036854775808");
    free(w.p);
    free(kv.p);
}

/* An array nested DEPTH deep ([[[u8]]] is depth 3), innermost holding 2 u8. */
static wbuf nested(int depth)
{
    wbuf kv = {0};
    w_str(&kv, "nest");
    w_u32(&kv, ST_GGUF_ARRAY);
    for (int d = 1; d < depth; d++) {
        w_u32(&kv, ST_GGUF_ARRAY);
        w_u64(&kv, 1);
    }
    w_u32(&kv, ST_GGUF_UINT8);
    w_u64(&kv, 2);
    w_bytes(&kv, "\x01\x02", 2);
    wbuf w = make_gguf(3, &kv, 1, NULL, 0, 32);
    free(kv.p);
    return w;
}

static void gguf_limits_array_nesting_to_four(void **state)
{
    for (int d = 1; d <= 4; d++) {
        wbuf w = nested(d);
        st_gguf *g = parse_ok(&w);
        const st_gguf_kv *kv = st_gguf_kv_at(g, 0);
        assert_int_equal(kv->type, ST_GGUF_ARRAY);
        assert_int_equal(kv->v.arr.count, d == 1 ? 2 : 1);
        st_gguf_close(g);
        free(w.p);
    }
    wbuf w = nested(5);
    expect_refused(w.p, w.n, "arrays nested deeper than 4");
    free(w.p);
}

static void gguf_reads_integer_and_string_arrays(void **state)
{
    wbuf kv = {0};
    w_str(&kv, "ints");
    w_u32(&kv, ST_GGUF_ARRAY);
    w_u32(&kv, ST_GGUF_INT16);
    w_u64(&kv, 3);
    w_le(&kv, 1, 2);
    w_le(&kv, 0xffff, 2);
    w_le(&kv, 300, 2);
    w_str(&kv, "strs");
    w_u32(&kv, ST_GGUF_ARRAY);
    w_u32(&kv, ST_GGUF_STRING);
    w_u64(&kv, 2);
    w_str(&kv, "ab");
    w_str(&kv, "");
    w_str(&kv, "neg");
    w_u32(&kv, ST_GGUF_INT8);
    w_le(&kv, 0xfe, 1);
    wbuf w = make_gguf(3, &kv, 3, NULL, 0, 32);
    st_gguf *g = parse_ok(&w);
    const st_gguf_kv *ints = st_gguf_find_kv(g, "ints");
    int64_t v;
    assert_true(st_gguf_array_int(ints, 0, &v));
    assert_int_equal(v, 1);
    assert_true(st_gguf_array_int(ints, 1, &v));
    assert_int_equal(v, -1);
    assert_true(st_gguf_array_int(ints, 2, &v));
    assert_int_equal(v, 300);
    assert_false(st_gguf_array_int(ints, 3, &v));
    const st_gguf_kv *strs = st_gguf_find_kv(g, "strs");
    size_t pos = 0, n;
    const char *s;
    assert_true(st_gguf_array_next_str(strs, &pos, &s, &n));
    assert_int_equal(n, 2);
    assert_memory_equal(s, "ab", 2);
    assert_true(st_gguf_array_next_str(strs, &pos, &s, &n));
    assert_int_equal(n, 0);
    assert_false(st_gguf_array_next_str(strs, &pos, &s, &n));
    assert_false(st_gguf_array_next_str(ints, &(size_t){0}, &s, &n));
    assert_true(st_gguf_kv_int(st_gguf_find_kv(g, "neg"), &v));
    assert_int_equal(v, -2);
    assert_null(st_gguf_kv_str(st_gguf_find_kv(g, "neg")));
    st_gguf_close(g);
    free(w.p);
    free(kv.p);
}

/* ---- the model description of synthetic files --------------------------------- */

static void model_describes_a_synthetic_moe(void **state)
{
    wbuf w = make_moe(NULL, 0, true);
    st_model *m;
    assert_int_equal(model_of(&w, &m), ST_OK);
    assert_string_equal(st_model_name(m), "synthetic");
    assert_int_equal(st_model_expert_used(m), 1);
    assert_int_equal(st_model_expert_layer_count(m), 2);
    const st_model_expert_layer *L1 = st_model_expert_layer_at(m, 1);
    assert_int_equal(L1->layer, 1);
    assert_int_equal(L1->n_ff, 32);
    assert_int_equal(L1->n_expert, 2);
    assert_int_equal(L1->gu_bytes, 7040);
    assert_int_equal(L1->down_bytes, 256 * 2 * 18);
    assert_int_equal(st_model_expert_shape_count(m), 1);
    assert_int_equal(st_model_matrix_count(m), 2); /* attn_q, tied output; not the norm */
    assert_int_equal(st_model_skipped_count(m), 1);
    st_model_close(m);
    free(w.p);

    /* Without metadata: name from the fallback, no arch, 0 experts used. */
    w = make_moe(NULL, 0, false);
    assert_int_equal(model_of(&w, &m), ST_OK);
    assert_string_equal(st_model_name(m), "fallback");
    assert_string_equal(st_model_arch(m), "");
    assert_int_equal(st_model_expert_used(m), 0);
    st_model_close(m);
    free(w.p);
}

static void model_prefers_output_weight_over_the_tied_embedding(void **state)
{
    tspec extra[] = {
        {"output.weight", 2, {256, 64, 1, 1}, T_Q8_0},
        {"blk.1.attn_output.weight", 2, {256, 256, 1, 1}, T_F16},
        {"blk.1.ffn_gate_inp.weight", 2, {256, 2, 1, 1}, T_Q8_0},
        {"blk.1.attn_k.weight", 2, {256, 64, 1, 1}, T_IQ3_S}, /* a separate shape */
        {"blk.1.attn_q.weight", 2, {256, 256, 1, 1}, T_IQ3_S},
    };
    wbuf w = make_moe(extra, 5, true);
    st_model *m;
    assert_int_equal(model_of(&w, &m), ST_OK);
    assert_int_equal(st_model_matrix_count(m), 6);
    for (size_t i = 0; i < st_model_matrix_count(m); i++)
        assert_null(strstr(st_model_matrix_at(m, i)->name, "token_embd"));
    const st_model_matrix *out = st_model_matrix_at(m, 1);
    assert_string_equal(out->name, "output.weight");
    assert_int_equal(out->n_rows, 64);
    /* An f16 matrix is listed as unsupported, not a failure. */
    const st_model_matrix *f16 = st_model_matrix_at(m, 2);
    assert_string_equal(f16->name, "blk.1.attn_output.weight");
    assert_int_equal(f16->type, ST_QTYPE_NONE);
    assert_string_equal(f16->type_name, "f16");
    assert_int_equal(f16->ggml_type, 1);
    /* A quantized router is a decode shape. */
    assert_string_equal(st_model_matrix_at(m, 3)->name, "blk.1.ffn_gate_inp.weight");
    assert_int_equal(st_model_matrix_at(m, 3)->type, ST_Q8_0);
    /* Shapes: iq3_s 256x256 (x2), q8_0 64x256, q8_0 2x256, iq3_s 64x256. */
    assert_int_equal(st_model_mmvq_shape_count(m), 4);
    assert_int_equal(st_model_mmvq_shape_at(m, 0)->n_matrices, 2);
    assert_int_equal(st_model_mmvq_shape_at(m, 0)->type, ST_IQ3_S);
    assert_int_equal(st_model_mmvq_shape_at(m, 1)->type, ST_Q8_0);
    assert_int_equal(st_model_mmvq_shape_at(m, 2)->n_rows, 2);
    assert_int_equal(st_model_mmvq_shape_at(m, 3)->n_rows, 64);
    assert_int_equal(st_model_mmvq_shape_at(m, 3)->first, 4);
    st_model_close(m);
    free(w.p);
}

static void expect_model_refused(const tspec *extra, size_t n, st_status want, const char *msg)
{
    wbuf w = make_moe(extra, n, true);
    st_model *m = (st_model *)1;
    st_status s = model_of(&w, &m);
    if (s != want || m != NULL || !strstr(st_last_error(), msg))
        fail_msg("status %s, message '%s', wanted '%s'", st_status_name(s), st_last_error(), msg);
    free(w.p);
}

static void model_refuses_incomplete_or_inconsistent_expert_layers(void **state)
{
    tspec gate_only = {"blk.2.ffn_gate_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S};
    expect_model_refused(&gate_only, 1, ST_ERR_PARSE,
                         "layer 2 has blk.2.ffn_gate_exps.weight but no blk.2.ffn_up_exps.weight");
    tspec l2[3] = {{"blk.2.ffn_gate_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S},
                   {"blk.2.ffn_up_exps.weight", 3, {256, 64, 2, 1}, T_IQ3_S},
                   {"blk.2.ffn_down_exps.weight", 3, {32, 256, 2, 1}, T_IQ4_NL}};
    expect_model_refused(l2, 3, ST_ERR_PARSE, "blk.2.ffn_up_exps.weight has ne {256, 64, 2, 1}, expected");
    l2[1].ne[1] = 32;
    l2[2].ne[2] = 4;
    expect_model_refused(l2, 3, ST_ERR_PARSE, "blk.2.ffn_down_exps.weight has ne {32, 256, 4, 1}");
    /* Experts that disagree with the metadata (expert_count 2). */
    for (int i = 0; i < 3; i++) l2[i].ne[2] = 4;
    expect_model_refused(l2, 3, ST_ERR_PARSE, "has 4 experts, but qwen3moe.expert_count says 2");
}

/* A layer's types never refuse the model: the layer is left out with one
 * line and the rest is described (every type: tests/tuning/model_arch_test.c). */
static void expect_layer_omitted(const tspec *extra, size_t n, const char *why)
{
    wbuf w = make_moe(extra, n, true);
    st_model *m = NULL;
    if (model_of(&w, &m) != ST_OK) fail_msg("refused: %s", st_last_error());
    assert_int_equal(st_model_expert_layer_count(m), 2);
    assert_int_equal(st_model_omitted_count(m), 1);
    const st_model_omission *o = st_model_omitted_at(m, 0);
    assert_int_equal(o->layer, 2);
    assert_string_equal(o->name, "blk.2 experts");
    if (!strstr(o->reason, why)) fail_msg("reason '%s', wanted '%s'", o->reason, why);
    assert_int_equal(st_model_expert_shape_count(m), 1);
    st_model_close(m);
    free(w.p);
}

static void model_omits_expert_layers_of_types_the_kernels_lack(void **state)
{
    tspec l2[3] = {{"blk.2.ffn_gate_exps.weight", 3, {256, 32, 2, 1}, T_Q8_0},
                   {"blk.2.ffn_up_exps.weight", 3, {256, 32, 2, 1}, T_IQ3_S},
                   {"blk.2.ffn_down_exps.weight", 3, {32, 256, 2, 1}, T_IQ4_NL}};
    expect_layer_omitted(l2, 3, "blk.2.ffn_gate_exps.weight is q8_0 but blk.2.ffn_up_exps.weight is iq3_s: the expert "
                                "kernels take gate and up of one type");
    l2[0].type = T_IQ3_S;
    l2[2].type = 200;
    expect_layer_omitted(l2, 3, "blk.2.ffn_down_exps.weight has type type 200, which the expert kernels do not support");
    l2[2].type = T_F32;
    expect_layer_omitted(l2, 3, "blk.2.ffn_down_exps.weight has type f32, which the expert kernels do not support");
    l2[2].type = T_F16;
    expect_layer_omitted(l2, 3, "has type f16");
}

static void model_name_falls_back_to_the_file_name(void **state)
{
    wbuf w = make_moe(NULL, 0, false);
    const char *path = STRATA_BIN_DIR "/gguf_test-unnamed.gguf";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(w.p, 1, w.n, f), w.n);
    fclose(f);
    st_model *m;
    assert_int_equal(st_model_open(path, &m), ST_OK);
    assert_string_equal(st_model_name(m), "gguf_test-unnamed");
    st_model_close(m);
    remove(path);
    free(w.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gguf_reads_tiny_moe_header),
        cmocka_unit_test(gguf_matches_every_line_of_the_ggml_listing),
        cmocka_unit_test(gguf_open_reports_a_missing_file_as_io_error),
        cmocka_unit_test(model_describes_tiny_moe_expert_layers),
        cmocka_unit_test(model_lists_tiny_moe_matrices_with_tied_output),
        cmocka_unit_test(model_deduplicates_tiny_moe_shapes_in_first_seen_order),
        cmocka_unit_test(gguf_refuses_every_truncation_of_tiny_moe),
        cmocka_unit_test(gguf_refuses_absurd_counts_in_the_header),
        cmocka_unit_test(gguf_refuses_bad_magic_and_versions),
        cmocka_unit_test(gguf_refuses_bad_tensor_offsets),
        cmocka_unit_test(gguf_loads_minimal_v2_and_v3_files),
        cmocka_unit_test(gguf_checks_the_alignment_key),
        cmocka_unit_test(gguf_refuses_bad_tensor_infos),
        cmocka_unit_test(gguf_refuses_bad_key_values),
        cmocka_unit_test(gguf_limits_array_nesting_to_four),
        cmocka_unit_test(gguf_reads_integer_and_string_arrays),
        cmocka_unit_test(model_describes_a_synthetic_moe),
        cmocka_unit_test(model_prefers_output_weight_over_the_tied_embedding),
        cmocka_unit_test(model_refuses_incomplete_or_inconsistent_expert_layers),
        cmocka_unit_test(model_omits_expert_layers_of_types_the_kernels_lack),
        cmocka_unit_test(model_name_falls_back_to_the_file_name),
    };
    return cmocka_run_group_tests_name("gguf", tests, setup_tiny, teardown_tiny);
}
