/* Fuzz target: the GGUF reader and the model description built on it.
 * After a successful parse, everything the parser vouched for is touched
 * (every KV, array element, string, the first and last byte of every tensor's
 * data), so a wrong bounds check shows up under ASan. */
#include "fuzz_target.h"
#include "gguf.h"
#include "model_extra.h"
#include "strata/limits.h"
#include "strata/tools/model.h"

#include <stdint.h>
#include <string.h>

static volatile uint64_t g_sink;

static void touch(const void *p, size_t n)
{
    if (!p || !n) return;
    const volatile uint8_t *b = p;
    g_sink += b[0] + b[n - 1];
}

static void walk_gguf(const st_gguf *g)
{
    g_sink += st_gguf_version(g) + st_gguf_alignment(g) + st_gguf_data_offset(g);
    for (size_t i = 0; i < st_gguf_kv_count(g); i++) {
        const st_gguf_kv *kv = st_gguf_kv_at(g, i);
        g_sink += strlen(kv->key) + kv->key_len;
        int64_t v;
        if (st_gguf_kv_int(kv, &v)) g_sink += (uint64_t)v;
        const char *s = st_gguf_kv_str(kv);
        if (s) g_sink += strlen(s);
        if (kv->type != ST_GGUF_ARRAY) continue;
        touch(kv->v.arr.raw, kv->v.arr.raw_len);
        for (uint64_t e = 0; e < kv->v.arr.count && e < 4096; e++)
            if (st_gguf_array_int(kv, e, &v)) g_sink += (uint64_t)v;
        size_t pos = 0, n;
        const char *str;
        while (st_gguf_array_next_str(kv, &pos, &str, &n)) touch(str, n);
        if (st_gguf_find_kv(g, kv->key) == NULL && strlen(kv->key) == kv->key_len) __builtin_trap();
    }
    for (size_t i = 0; i < st_gguf_tensor_count(g); i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(g, i);
        g_sink += strlen(st_gguf_type_name(t->type)) + (uint64_t)t->n_elements;
        if (t->size_known) touch(t->data, (size_t)t->size);
        if (strlen(t->name) == t->name_len && st_gguf_find_tensor(g, t->name) != t) __builtin_trap();
    }
}

static void walk_model(const st_model *m)
{
    g_sink += strlen(st_model_arch(m)) + strlen(st_model_name(m)) + (uint64_t)st_model_expert_used(m);
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *L = st_model_expert_layer_at(m, i);
        touch(L->gate, L->gu_bytes);
        touch(L->up, L->gu_bytes);
        touch(L->down, L->down_bytes);
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *mx = st_model_matrix_at(m, i);
        touch(mx->data, mx->bytes);
        g_sink += strlen(mx->name) + strlen(mx->type_name);
    }
    for (size_t i = 0; i < st_model_skipped_count(m); i++)
        touch(st_model_skipped_at(m, i)->data, st_model_skipped_at(m, i)->bytes);
    for (size_t i = 0; i < st_model_omitted_count(m); i++) {
        const st_model_omission *o = st_model_omitted_at(m, i);
        g_sink += strlen(o->name) + strlen(o->reason) + (uint64_t)(o->layer + 1);
        if (i > 0 && st_model_omitted_at(m, i - 1)->layer > o->layer) __builtin_trap();
    }
    const st_model_moe *md = st_model_moe_info(m);
    if (md->n_expert > ST_MAX_EXPERTS || md->n_expert_used > ST_MAX_TOPK) __builtin_trap();
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++)
        if (st_model_expert_layer_at(m, i)->n_expert > ST_MAX_EXPERTS ||
            !st_qtype_valid(st_model_expert_layer_at(m, i)->gu_type))
            __builtin_trap();
    for (size_t i = 0; i < st_model_expert_shape_count(m); i++) {
        const st_model_expert_shape *s = st_model_expert_shape_at(m, i);
        if (!st_model_expert_layer_at(m, s->first)) __builtin_trap();
    }
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        const st_model_matrix *mx = st_model_matrix_at(m, s->first);
        if (!mx || mx->type != s->type || mx->type == ST_QTYPE_NONE) __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_gguf *g = NULL;
    if (st_gguf_parse(data, size, &g) != ST_OK) return 0;
    walk_gguf(g);
    st_model *m = NULL;
    if (st_model_from_gguf(g, "fuzz", &m) == ST_OK) {
        walk_model(m);
        st_model_close(m);
    }
    return 0;
}
