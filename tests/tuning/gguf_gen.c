/* Tests: the GGUF v3 writer and the tiny per-architecture models
 * (gguf_gen.h). */
#include "gguf_gen.h"

#include "gguf.h"
#include "randgen.h"
#include "strata/formats.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GG_ALIGN 32

typedef struct {
    uint8_t *p;
    size_t n, cap;
} gbuf;

struct gg_file {
    gbuf kv;
    uint64_t n_kv;
    char arch[64];
    gg_tensor_info *t;
    size_t n_t, cap_t;
};

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gguf_gen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) die("out of memory (%zu bytes)", n);
    return q;
}

static void put(gbuf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = xrealloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_le(gbuf *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, (size_t)n);
}

static void put_str(gbuf *b, const char *s)
{
    put_le(b, strlen(s), 8);
    put(b, s, strlen(s));
}

gg_file *gg_new(void)
{
    gg_file *f = calloc(1, sizeof *f);
    if (!f) die("out of memory");
    return f;
}

void gg_free(gg_file *f)
{
    if (!f) return;
    free(f->kv.p);
    free(f->t);
    free(f);
}

void gg_kv_str(gg_file *f, const char *key, const char *value)
{
    put_str(&f->kv, key);
    put_le(&f->kv, 8, 4); /* STRING */
    put_str(&f->kv, value);
    f->n_kv++;
    if (!strcmp(key, "general.architecture")) snprintf(f->arch, sizeof f->arch, "%s", value);
}

void gg_kv_u32(gg_file *f, const char *key, uint32_t value)
{
    put_str(&f->kv, key);
    put_le(&f->kv, 4, 4); /* UINT32 */
    put_le(&f->kv, value, 4);
    f->n_kv++;
}

void gg_kv_f32(gg_file *f, const char *key, float value)
{
    uint32_t u;
    memcpy(&u, &value, 4);
    put_str(&f->kv, key);
    put_le(&f->kv, 6, 4); /* FLOAT32 */
    put_le(&f->kv, u, 4);
    f->n_kv++;
}

void gg_kv_arch_u32(gg_file *f, const char *field, uint32_t value)
{
    if (!f->arch[0]) die("gg_kv_arch_u32(%s) before general.architecture", field);
    char key[160];
    snprintf(key, sizeof key, "%s.%s", f->arch, field);
    gg_kv_u32(f, key, value);
}

int gg_copy_tokenizer(gg_file *f, const char *path)
{
    st_gguf *v = NULL;
    if (st_gguf_open(path, &v) != ST_OK) die("%s: %s", path, st_last_error());
    int n_vocab = -1;
    for (size_t i = 0; i < st_gguf_kv_count(v); i++) {
        const st_gguf_kv *kv = st_gguf_kv_at(v, i);
        if (strncmp(kv->key, "tokenizer.", 10) != 0) continue;
        put_le(&f->kv, kv->key_len, 8);
        put(&f->kv, kv->key, kv->key_len);
        put_le(&f->kv, (uint64_t)kv->type, 4);
        if (kv->type == ST_GGUF_STRING) {
            put_le(&f->kv, kv->v.str.len, 8);
            put(&f->kv, kv->v.str.s, kv->v.str.len);
        } else if (kv->type == ST_GGUF_ARRAY) {
            put_le(&f->kv, (uint64_t)kv->v.arr.elem, 4);
            put_le(&f->kv, kv->v.arr.count, 8);
            put(&f->kv, kv->v.arr.raw, kv->v.arr.raw_len);
            if (!strcmp(kv->key, "tokenizer.ggml.tokens")) n_vocab = (int)kv->v.arr.count;
        } else {
            const size_t n = st_gguf_vtype_size(kv->type);
            if (kv->type == ST_GGUF_FLOAT32) {
                uint32_t u;
                memcpy(&u, &kv->v.f32, 4);
                put_le(&f->kv, u, 4);
            } else if (kv->type == ST_GGUF_FLOAT64) {
                uint64_t u;
                memcpy(&u, &kv->v.f64, 8);
                put_le(&f->kv, u, 8);
            } else {
                put_le(&f->kv, kv->v.u64, (int)n); /* the low bytes: as stored (signed values sign-extended) */
            }
        }
        f->n_kv++;
    }
    st_gguf_close(v);
    if (n_vocab <= 0) die("%s: no tokenizer.ggml.tokens array", path);
    return n_vocab;
}

bool gg_type_block(int type, int *values, int *bytes)
{
    static const struct {
        int type, qk, nb;
    } T[] = {
        {GG_F32, 1, 4},       {GG_F16, 1, 2},       {GG_Q4_0, 32, 18},     {GG_Q4_1, 32, 20},
        {GG_Q5_0, 32, 22},    {GG_Q5_1, 32, 24},    {GG_Q8_0, 32, 34},     {GG_Q2_K, 256, 84},
        {GG_Q3_K, 256, 110},  {GG_Q4_K, 256, 144},  {GG_Q5_K, 256, 176},   {GG_Q6_K, 256, 210},
        {GG_IQ2_XXS, 256, 66}, {GG_IQ2_XS, 256, 74}, {GG_IQ3_XXS, 256, 98}, {GG_IQ1_S, 256, 50},
        {GG_IQ4_NL, 32, 18},  {GG_IQ3_S, 256, 110}, {GG_IQ2_S, 256, 82},   {GG_IQ4_XS, 256, 136},
        {GG_IQ1_M, 256, 56},  {GG_BF16, 1, 2},      {GG_MXFP4, 32, 17},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (T[i].type == type) {
            *values = T[i].qk;
            *bytes = T[i].nb;
            return true;
        }
    return false;
}

int gg_pick(int want, int fallback) { return st_qtype_valid(want) ? want : fallback; }

void gg_tensor(gg_file *f, const char *name, int type, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2)
{
    int qk, nb;
    if (!gg_type_block(type, &qk, &nb)) die("%s: type %d has no block size in the writer", name, type);
    if (n_dims < 1 || n_dims > 3 || ne0 < 1 || ne1 < 1 || ne2 < 1 || ne0 % qk)
        die("%s: bad shape {%lld, %lld, %lld} (%d dims, block %d)", name, (long long)ne0, (long long)ne1,
            (long long)ne2, n_dims, qk);
    if (strlen(name) >= sizeof f->t[0].name) die("%s: name too long", name);
    if (gg_find(f, name)) die("%s: duplicate tensor", name);
    if (f->n_t == f->cap_t) {
        f->cap_t = f->cap_t ? 2 * f->cap_t : 32;
        f->t = xrealloc(f->t, f->cap_t * sizeof *f->t);
    }
    gg_tensor_info *t = &f->t[f->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = n_dims >= 2 ? ne1 : 1;
    t->ne[2] = n_dims >= 3 ? ne2 : 1;
}

void gg_tensorf(gg_file *f, int type, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt, ...)
{
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    gg_tensor(f, name, type, n_dims, ne0, ne1, ne2);
}

size_t gg_tensor_count(const gg_file *f) { return f->n_t; }
const gg_tensor_info *gg_tensor_at(const gg_file *f, size_t i) { return i < f->n_t ? &f->t[i] : NULL; }

const gg_tensor_info *gg_find(const gg_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_t; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

static uint64_t tensor_bytes(const gg_tensor_info *t)
{
    int qk = 1, nb = 1;
    gg_type_block(t->type, &qk, &nb);
    return (uint64_t)(t->ne[0] / qk) * (uint64_t)nb * (uint64_t)t->ne[1] * (uint64_t)t->ne[2];
}

static uint64_t align_up(uint64_t x) { return (x + GG_ALIGN - 1) / GG_ALIGN * GG_ALIGN; }

/* One block of a supported type that dequantizes to finite values no larger
 * than 1e3 (a random scale can be anything in formats whose scale is not
 * where st_random_blocks puts it). */
static void valid_block(st_rng *r, int type, int qk, int nb, uint8_t *dst)
{
    float v[256];
    for (int attempt = 0; attempt < 16; attempt++) {
        st_random_blocks(r, (st_qtype)type, 1, qk, dst);
        if (st_dequantize_row((st_qtype)type, dst, v, qk) != ST_OK) continue;
        bool ok = true;
        for (int i = 0; i < qk && ok; i++) ok = isfinite(v[i]) && fabsf(v[i]) <= 1e3f;
        if (ok) return;
    }
    memset(dst, 0, (size_t)nb);
}

static void fill(const gg_tensor_info *t, uint64_t seed, uint8_t *dst)
{
    st_rng r;
    uint64_t h = seed ^ 0xcbf29ce484222325ull;
    for (const char *p = t->name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    st_rng_seed(&r, h);
    int qk = 1, nb = 1;
    gg_type_block(t->type, &qk, &nb);
    const uint64_t n = tensor_bytes(t);
    if (t->type == GG_F32 || t->type == GG_F16) {
        for (uint64_t i = 0; i < n / (uint64_t)nb; i++) {
            const float x = 0.5f * st_rng_float(&r);
            if (t->type == GG_F32) {
                memcpy(dst + 4 * i, &x, 4);
            } else {
                const uint16_t hv = st_f32_to_f16(x);
                dst[2 * i] = (uint8_t)hv;
                dst[2 * i + 1] = (uint8_t)(hv >> 8);
            }
        }
    } else if (st_qtype_valid(t->type)) {
        if (st_qtype_block_values((st_qtype)t->type) != qk || st_qtype_block_bytes((st_qtype)t->type) != nb)
            die("%s: the writer's block of type %d (%d values, %d bytes) is not the library's", t->name, t->type, qk, nb);
        for (uint64_t b = 0; b < n / (uint64_t)nb; b++) valid_block(&r, t->type, qk, nb, dst + b * (uint64_t)nb);
    } else {
        for (uint64_t i = 0; i < n; i++) dst[i] = (uint8_t)st_rng_u32(&r);
    }
}

void gg_bytes(const gg_file *f, uint64_t seed, uint8_t **buf, size_t *len)
{
    gbuf b = {0};
    put(&b, "GGUF", 4);
    put_le(&b, 3, 4);
    put_le(&b, f->n_t, 8);
    put_le(&b, f->n_kv, 8);
    put(&b, f->kv.p, f->kv.n);
    uint64_t off = 0;
    for (size_t i = 0; i < f->n_t; i++) {
        const gg_tensor_info *t = &f->t[i];
        put_str(&b, t->name);
        put_le(&b, (uint64_t)t->n_dims, 4);
        for (int d = 0; d < t->n_dims; d++) put_le(&b, (uint64_t)t->ne[d], 8);
        put_le(&b, (uint64_t)t->type, 4);
        put_le(&b, off, 8);
        off = align_up(off + tensor_bytes(t));
    }
    while (b.n % GG_ALIGN) put(&b, "", 1);
    const size_t data = b.n;
    b.p = xrealloc(b.p, data + off);
    memset(b.p + data, 0, off);
    off = 0;
    for (size_t i = 0; i < f->n_t; i++) {
        fill(&f->t[i], seed, b.p + data + off);
        off = align_up(off + tensor_bytes(&f->t[i]));
    }
    *buf = b.p;
    *len = data + off;
}

int gg_write(const gg_file *f, uint64_t seed, const char *path)
{
    uint8_t *buf;
    size_t len;
    gg_bytes(f, seed, &buf, &len);
    FILE *fp = fopen(path, "wb");
    int ok = fp && fwrite(buf, 1, len, fp) == len;
    if (fp && fclose(fp) != 0) ok = 0;
    free(buf);
    if (!ok) fprintf(stderr, "gguf_gen: cannot write %s\n", path);
    return ok ? 0 : -1;
}

/* ---- the tiny models ---- */

enum { E = 256, VOCAB = 512, HEAD = 64 };

static gg_file *begin(const char *arch, int n_layer)
{
    gg_file *f = gg_new();
    gg_kv_str(f, "general.architecture", arch);
    char name[96];
    snprintf(name, sizeof name, "tiny-%s", arch);
    gg_kv_str(f, "general.name", name);
    gg_kv_arch_u32(f, "block_count", (uint32_t)n_layer);
    gg_kv_arch_u32(f, "embedding_length", E);
    gg_kv_arch_u32(f, "context_length", 4096);
    gg_kv_arch_u32(f, "attention.head_count", 4);
    gg_kv_arch_u32(f, "attention.head_count_kv", 4);
    gg_kv_f32(f, "general.test_only", 1.0f); /* a float pair the reader must skip */
    return f;
}

static void embd_and_output(gg_file *f, int embd_type, int out_type)
{
    gg_tensor(f, "token_embd.weight", embd_type, 2, E, VOCAB, 1);
    gg_tensor(f, "output_norm.weight", GG_F32, 1, E, 1, 1);
    if (out_type >= 0) gg_tensor(f, "output.weight", out_type, 2, E, VOCAB, 1);
}

/* Attention: 4 heads of 64 (as many kv heads: the CPU-backend tests time
 * every distinct shape, so the four matrices share one), of one type. */
static void attn(gg_file *f, int i, int type, bool bias, bool qk_norm)
{
    gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.attn_norm.weight", i);
    gg_tensorf(f, type, 2, E, 4 * HEAD, 1, "blk.%d.attn_q.weight", i);
    gg_tensorf(f, type, 2, E, 4 * HEAD, 1, "blk.%d.attn_k.weight", i);
    gg_tensorf(f, type, 2, E, 4 * HEAD, 1, "blk.%d.attn_v.weight", i);
    gg_tensorf(f, type, 2, 4 * HEAD, E, 1, "blk.%d.attn_output.weight", i);
    if (bias) {
        gg_tensorf(f, GG_F32, 1, 4 * HEAD, 1, 1, "blk.%d.attn_q.bias", i);
        gg_tensorf(f, GG_F32, 1, 4 * HEAD, 1, 1, "blk.%d.attn_k.bias", i);
        gg_tensorf(f, GG_F32, 1, 4 * HEAD, 1, 1, "blk.%d.attn_v.bias", i);
    }
    if (qk_norm) {
        gg_tensorf(f, GG_F32, 1, HEAD, 1, 1, "blk.%d.attn_q_norm.weight", i);
        gg_tensorf(f, GG_F32, 1, HEAD, 1, 1, "blk.%d.attn_k_norm.weight", i);
    }
}

/* The routed experts of block I and their f32 router. */
static void experts(gg_file *f, int i, int n_expert, int n_ff, int gu, int dn)
{
    gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.ffn_norm.weight", i);
    gg_tensorf(f, GG_F32, 2, E, n_expert, 1, "blk.%d.ffn_gate_inp.weight", i);
    gg_tensorf(f, gu, 3, E, n_ff, n_expert, "blk.%d.ffn_gate_exps.weight", i);
    gg_tensorf(f, gu, 3, E, n_ff, n_expert, "blk.%d.ffn_up_exps.weight", i);
    gg_tensorf(f, dn, 3, n_ff, E, n_expert, "blk.%d.ffn_down_exps.weight", i);
}

/* The shared experts of block I (one FFN of N_FF rows), with the 1-D
 * sigmoid gate qwen2moe and qwen3next have when GATE_INP. */
static void shared(gg_file *f, int i, int n_ff, int gu, int dn, bool gate_inp)
{
    if (gate_inp) gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.ffn_gate_inp_shexp.weight", i);
    gg_tensorf(f, gu, 2, E, n_ff, 1, "blk.%d.ffn_gate_shexp.weight", i);
    gg_tensorf(f, gu, 2, E, n_ff, 1, "blk.%d.ffn_up_shexp.weight", i);
    gg_tensorf(f, dn, 2, n_ff, E, 1, "blk.%d.ffn_down_shexp.weight", i);
}

static gg_file *qwen3moe(void)
{
    gg_file *f = begin("qwen3moe", 2);
    gg_kv_arch_u32(f, "expert_count", 8);
    gg_kv_arch_u32(f, "expert_used_count", 2);
    gg_kv_arch_u32(f, "expert_feed_forward_length", 64);
    embd_and_output(f, GG_Q4_K, gg_pick(GG_Q6_K, GG_Q8_0));
    for (int i = 0; i < 2; i++) {
        attn(f, i, GG_Q4_K, false, true);
        experts(f, i, 8, 64, GG_IQ3_S, GG_IQ4_NL);
    }
    return f;
}

static gg_file *qwen2moe(void)
{
    gg_file *f = begin("qwen2moe", 2);
    gg_kv_arch_u32(f, "expert_count", 8);
    gg_kv_arch_u32(f, "expert_used_count", 4);
    gg_kv_arch_u32(f, "expert_feed_forward_length", 64);
    gg_kv_arch_u32(f, "expert_shared_feed_forward_length", 128);
    embd_and_output(f, GG_Q4_K, gg_pick(GG_Q6_K, GG_Q8_0));
    for (int i = 0; i < 2; i++) {
        attn(f, i, gg_pick(GG_Q5_K, GG_Q4_K), true, false);
        experts(f, i, 8, 64, GG_IQ4_XS, GG_Q8_0);
        shared(f, i, 128, GG_Q4_K, gg_pick(GG_Q5_0, GG_Q8_0), true);
    }
    return f;
}

/* Qwen3-Next's layout at the limits the issue names: 512 experts, top-10,
 * a shared expert, a full-attention block and a linear-attention one. */
static gg_file *qwen3next(void)
{
    gg_file *f = begin("qwen3next", 2);
    gg_kv_arch_u32(f, "expert_count", 512);
    gg_kv_arch_u32(f, "expert_used_count", 10);
    gg_kv_arch_u32(f, "expert_feed_forward_length", 32);
    gg_kv_arch_u32(f, "expert_shared_feed_forward_length", 64);
    gg_kv_arch_u32(f, "full_attention_interval", 2);
    embd_and_output(f, GG_Q4_K, gg_pick(GG_Q6_K, GG_Q8_0));
    /* blk.0: gated full attention (attn_q holds the query and its gate) */
    gg_tensor(f, "blk.0.attn_norm.weight", GG_F32, 1, E, 1, 1);
    gg_tensor(f, "blk.0.attn_q.weight", GG_Q4_K, 2, E, 8 * HEAD, 1);
    gg_tensor(f, "blk.0.attn_k.weight", GG_Q4_K, 2, E, 4 * HEAD, 1);
    gg_tensor(f, "blk.0.attn_v.weight", GG_Q4_K, 2, E, 4 * HEAD, 1);
    gg_tensor(f, "blk.0.attn_output.weight", GG_Q4_K, 2, 4 * HEAD, E, 1);
    gg_tensor(f, "blk.0.attn_q_norm.weight", GG_F32, 1, HEAD, 1, 1);
    gg_tensor(f, "blk.0.attn_k_norm.weight", GG_F32, 1, HEAD, 1, 1);
    /* blk.1: linear attention (gated delta net) */
    gg_tensor(f, "blk.1.attn_norm.weight", GG_F32, 1, E, 1, 1);
    gg_tensor(f, "blk.1.ssm_in.weight", GG_Q4_K, 2, E, 768, 1);
    gg_tensor(f, "blk.1.ssm_ba.weight", GG_Q8_0, 2, E, 32, 1);
    gg_tensor(f, "blk.1.ssm_conv1d.weight", GG_F32, 2, 4, 512, 1);
    gg_tensor(f, "blk.1.ssm_dt.bias", GG_F32, 1, 16, 1, 1);
    gg_tensor(f, "blk.1.ssm_a", GG_F32, 1, 16, 1, 1);
    gg_tensor(f, "blk.1.ssm_norm.weight", GG_F32, 1, 32, 1, 1);
    gg_tensor(f, "blk.1.ssm_out.weight", GG_Q4_K, 2, 512, E, 1);
    for (int i = 0; i < 2; i++) {
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.post_attention_norm.weight", i);
        gg_tensorf(f, GG_F32, 2, E, 512, 1, "blk.%d.ffn_gate_inp.weight", i);
        gg_tensorf(f, GG_IQ4_XS, 3, E, 32, 512, "blk.%d.ffn_gate_exps.weight", i);
        gg_tensorf(f, GG_IQ4_XS, 3, E, 32, 512, "blk.%d.ffn_up_exps.weight", i);
        gg_tensorf(f, GG_IQ4_NL, 3, 32, E, 512, "blk.%d.ffn_down_exps.weight", i);
        shared(f, i, 64, GG_Q4_K, GG_Q8_0, true);
    }
    return f;
}

/* MLA attention (q and kv through low-rank projections, per-head k_b and
 * v_b), a leading dense block, then a MoE block with one shared expert. */
static gg_file *deepseek2(void)
{
    gg_file *f = begin("deepseek2", 2);
    gg_kv_arch_u32(f, "expert_count", 8);
    gg_kv_arch_u32(f, "expert_used_count", 2);
    gg_kv_arch_u32(f, "expert_shared_count", 1);
    gg_kv_arch_u32(f, "expert_feed_forward_length", 64);
    gg_kv_arch_u32(f, "leading_dense_block_count", 1);
    gg_kv_arch_u32(f, "feed_forward_length", 512);
    gg_kv_arch_u32(f, "attention.q_lora_rank", 64);
    gg_kv_arch_u32(f, "attention.kv_lora_rank", 64);
    embd_and_output(f, GG_Q4_K, gg_pick(GG_Q6_K, GG_Q8_0));
    for (int i = 0; i < 2; i++) {
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.attn_norm.weight", i);
        gg_tensorf(f, GG_Q4_K, 2, E, 64, 1, "blk.%d.attn_q_a.weight", i);
        gg_tensorf(f, GG_F32, 1, 64, 1, 1, "blk.%d.attn_q_a_norm.weight", i);
        gg_tensorf(f, GG_Q8_0, 2, 64, 4 * 48, 1, "blk.%d.attn_q_b.weight", i);
        gg_tensorf(f, GG_Q4_K, 2, E, 64 + 32, 1, "blk.%d.attn_kv_a_mqa.weight", i);
        gg_tensorf(f, GG_F32, 1, 64, 1, 1, "blk.%d.attn_kv_a_norm.weight", i);
        gg_tensorf(f, GG_Q8_0, 3, 32, 64, 4, "blk.%d.attn_k_b.weight", i);
        gg_tensorf(f, GG_Q8_0, 3, 64, 32, 4, "blk.%d.attn_v_b.weight", i);
        gg_tensorf(f, GG_Q8_0, 2, 4 * 32, E, 1, "blk.%d.attn_output.weight", i);
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.ffn_norm.weight", i);
    }
    gg_tensor(f, "blk.0.ffn_gate.weight", GG_Q4_K, 2, E, 512, 1);
    gg_tensor(f, "blk.0.ffn_up.weight", GG_Q4_K, 2, E, 512, 1);
    gg_tensor(f, "blk.0.ffn_down.weight", gg_pick(GG_Q6_K, GG_Q4_K), 2, 512, E, 1);
    gg_tensor(f, "blk.1.ffn_gate_inp.weight", GG_F32, 2, E, 8, 1);
    gg_tensor(f, "blk.1.exp_probs_b.bias", GG_F32, 1, 8, 1, 1);
    gg_tensor(f, "blk.1.ffn_gate_exps.weight", gg_pick(GG_IQ2_XXS, GG_IQ2_S), 3, E, 64, 8);
    gg_tensor(f, "blk.1.ffn_up_exps.weight", gg_pick(GG_IQ2_XXS, GG_IQ2_S), 3, E, 64, 8);
    gg_tensor(f, "blk.1.ffn_down_exps.weight", GG_IQ4_NL, 3, 64, E, 8);
    shared(f, 1, 64, GG_Q4_K, GG_Q8_0, false);
    return f;
}

static gg_file *olmoe(void)
{
    gg_file *f = begin("olmoe", 2);
    gg_kv_arch_u32(f, "expert_count", 8);
    gg_kv_arch_u32(f, "expert_used_count", 2);
    embd_and_output(f, GG_Q4_K, gg_pick(GG_Q6_K, GG_Q8_0));
    for (int i = 0; i < 2; i++) {
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.attn_norm.weight", i);
        gg_tensorf(f, GG_Q4_K, 2, E, E, 1, "blk.%d.attn_q.weight", i);
        gg_tensorf(f, GG_Q4_K, 2, E, E, 1, "blk.%d.attn_k.weight", i);
        gg_tensorf(f, GG_Q4_K, 2, E, E, 1, "blk.%d.attn_v.weight", i);
        gg_tensorf(f, GG_Q4_K, 2, E, E, 1, "blk.%d.attn_output.weight", i);
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.attn_q_norm.weight", i);
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.attn_k_norm.weight", i);
        experts(f, i, 8, 64, GG_Q4_K, gg_pick(GG_Q5_0, GG_Q8_0));
    }
    return f;
}

/* Mixtral-style: llama with expert_count. Its second expert layer and one
 * attention matrix are f16, which no kernel here runs: the model is still
 * described, without them (one line each). */
static gg_file *llama(void)
{
    gg_file *f = begin("llama", 2);
    gg_kv_arch_u32(f, "expert_count", 8);
    gg_kv_arch_u32(f, "expert_used_count", 2);
    gg_kv_arch_u32(f, "feed_forward_length", 256);
    embd_and_output(f, GG_Q4_K, gg_pick(GG_Q6_K, GG_Q8_0));
    attn(f, 0, GG_Q4_K, false, false);
    gg_tensor(f, "blk.1.attn_norm.weight", GG_F32, 1, E, 1, 1);
    gg_tensor(f, "blk.1.attn_q.weight", GG_Q4_K, 2, E, 4 * HEAD, 1);
    gg_tensor(f, "blk.1.attn_k.weight", GG_Q4_K, 2, E, 4 * HEAD, 1);
    gg_tensor(f, "blk.1.attn_v.weight", GG_Q4_K, 2, E, 4 * HEAD, 1);
    gg_tensor(f, "blk.1.attn_output.weight", GG_F16, 2, 4 * HEAD, E, 1);
    experts(f, 0, 8, 256, gg_pick(GG_Q3_K, GG_Q4_K), gg_pick(GG_Q5_K, GG_Q4_K));
    experts(f, 1, 8, 256, GG_F16, GG_F16);
    return f;
}

/* gpt-oss: MXFP4 experts with biases, attention sinks, biased attention. */
static gg_file *gpt_oss(void)
{
    gg_file *f = begin("gpt-oss", 2);
    gg_kv_arch_u32(f, "expert_count", 8);
    gg_kv_arch_u32(f, "expert_used_count", 4);
    gg_kv_arch_u32(f, "expert_feed_forward_length", 64);
    gg_kv_arch_u32(f, "attention.sliding_window", 128);
    embd_and_output(f, GG_Q8_0, GG_Q8_0);
    for (int i = 0; i < 2; i++) {
        attn(f, i, GG_Q8_0, true, false);
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.attn_output.bias", i);
        gg_tensorf(f, GG_F32, 1, 4, 1, 1, "blk.%d.attn_sinks.weight", i);
        gg_tensorf(f, GG_F32, 1, E, 1, 1, "blk.%d.post_attention_norm.weight", i);
        gg_tensorf(f, GG_F32, 2, E, 8, 1, "blk.%d.ffn_gate_inp.weight", i);
        gg_tensorf(f, GG_F32, 1, 8, 1, 1, "blk.%d.ffn_gate_inp.bias", i);
        gg_tensorf(f, GG_MXFP4, 3, E, 64, 8, "blk.%d.ffn_gate_exps.weight", i);
        gg_tensorf(f, GG_MXFP4, 3, E, 64, 8, "blk.%d.ffn_up_exps.weight", i);
        gg_tensorf(f, GG_MXFP4, 3, 64, E, 8, "blk.%d.ffn_down_exps.weight", i);
        gg_tensorf(f, GG_F32, 2, 64, 8, 1, "blk.%d.ffn_gate_exps.bias", i);
        gg_tensorf(f, GG_F32, 2, 64, 8, 1, "blk.%d.ffn_up_exps.bias", i);
        gg_tensorf(f, GG_F32, 2, E, 8, 1, "blk.%d.ffn_down_exps.bias", i);
    }
    return f;
}

gg_file *gg_llama_qwen3moe(const char *vocab, const gg_llama_dims *d)
{
    if (d->n_embd % 256 || d->n_ff % 32 || d->n_layer < 1 || d->n_expert < 1 || d->top_k < 1 || d->top_k > d->n_expert)
        die("qwen3moe dims: n_embd a multiple of 256, n_ff of 32, 1 <= top_k <= n_expert");
    const int head = 64, n_head = d->n_embd / head, n_head_kv = n_head >= 8 ? n_head / 4 : n_head;
    gg_file *f = gg_new();
    gg_kv_str(f, "general.architecture", "qwen3moe");
    char name[96];
    snprintf(name, sizeof name, "strata-random-qwen3moe-%dx%d-e%d", d->n_layer, d->n_embd, d->n_expert);
    gg_kv_str(f, "general.name", name);
    gg_kv_arch_u32(f, "block_count", (uint32_t)d->n_layer);
    gg_kv_arch_u32(f, "context_length", 4096);
    gg_kv_arch_u32(f, "embedding_length", (uint32_t)d->n_embd);
    gg_kv_arch_u32(f, "feed_forward_length", (uint32_t)d->n_ff);
    gg_kv_arch_u32(f, "expert_feed_forward_length", (uint32_t)d->n_ff);
    gg_kv_arch_u32(f, "expert_count", (uint32_t)d->n_expert);
    gg_kv_arch_u32(f, "expert_used_count", (uint32_t)d->top_k);
    gg_kv_arch_u32(f, "attention.head_count", (uint32_t)n_head);
    gg_kv_arch_u32(f, "attention.head_count_kv", (uint32_t)n_head_kv);
    gg_kv_arch_u32(f, "attention.key_length", (uint32_t)head);
    gg_kv_arch_u32(f, "attention.value_length", (uint32_t)head);
    gg_kv_f32(f, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    gg_kv_f32(f, "qwen3moe.rope.freq_base", 1e6f);
    gg_kv_u32(f, "general.quantization_version", 2);
    const int n_vocab = gg_copy_tokenizer(f, vocab);
    const int ne0 = d->n_embd;
    gg_tensor(f, "token_embd.weight", gg_pick(GG_Q4_K, GG_Q8_0), 2, ne0, n_vocab, 1);
    gg_tensor(f, "output_norm.weight", GG_F32, 1, ne0, 1, 1);
    gg_tensor(f, "output.weight", gg_pick(GG_Q6_K, GG_Q8_0), 2, ne0, n_vocab, 1);
    const int at = gg_pick(GG_Q4_K, GG_Q8_0), dn = d->n_ff % 256 ? GG_IQ4_NL : GG_IQ3_S;
    for (int i = 0; i < d->n_layer; i++) {
        gg_tensorf(f, GG_F32, 1, ne0, 1, 1, "blk.%d.attn_norm.weight", i);
        gg_tensorf(f, at, 2, ne0, n_head * head, 1, "blk.%d.attn_q.weight", i);
        gg_tensorf(f, at, 2, ne0, n_head_kv * head, 1, "blk.%d.attn_k.weight", i);
        gg_tensorf(f, at, 2, ne0, n_head_kv * head, 1, "blk.%d.attn_v.weight", i);
        gg_tensorf(f, at, 2, n_head * head, ne0, 1, "blk.%d.attn_output.weight", i);
        gg_tensorf(f, GG_F32, 1, head, 1, 1, "blk.%d.attn_q_norm.weight", i);
        gg_tensorf(f, GG_F32, 1, head, 1, 1, "blk.%d.attn_k_norm.weight", i);
        gg_tensorf(f, GG_F32, 1, ne0, 1, 1, "blk.%d.ffn_norm.weight", i);
        gg_tensorf(f, GG_F32, 2, ne0, d->n_expert, 1, "blk.%d.ffn_gate_inp.weight", i);
        gg_tensorf(f, GG_IQ3_S, 3, ne0, d->n_ff, d->n_expert, "blk.%d.ffn_gate_exps.weight", i);
        gg_tensorf(f, GG_IQ3_S, 3, ne0, d->n_ff, d->n_expert, "blk.%d.ffn_up_exps.weight", i);
        gg_tensorf(f, dn, 3, d->n_ff, ne0, d->n_expert, "blk.%d.ffn_down_exps.weight", i);
    }
    return f;
}

const char *const GG_ARCHS[] = {"qwen3moe", "qwen2moe", "qwen3next", "deepseek2", "olmoe", "llama", "gpt-oss", NULL};

gg_file *gg_arch_model(const char *arch)
{
    static const struct {
        const char *name;
        gg_file *(*make)(void);
    } M[] = {{"qwen3moe", qwen3moe}, {"qwen2moe", qwen2moe}, {"qwen3next", qwen3next}, {"deepseek2", deepseek2},
             {"olmoe", olmoe},       {"llama", llama},       {"gpt-oss", gpt_oss}};
    for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
        if (!strcmp(M[i].name, arch)) return M[i].make();
    return NULL;
}
