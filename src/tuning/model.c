/* The public model description (strata/model.h), built on the GGUF reader.
 * It only ever looks at what the parser validated: names, shapes, types and
 * data spans that lie inside the file. */
#include "strata/model.h"
#include "gguf.h"
#include "internal.h"
#include "strata/limits.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct st_model {
    st_gguf *g;
    char *arch, *name;
    int expert_used;
    st_model_expert_layer *layers;
    size_t n_layers, cap_layers;
    st_model_matrix *mats;
    size_t n_mats, cap_mats;
    st_model_matrix *skipped;
    size_t n_skipped, cap_skipped;
    st_model_expert_shape *eshapes;
    size_t n_eshapes, cap_eshapes;
    st_model_mmvq_shape *mshapes;
    size_t n_mshapes, cap_mshapes;
};

/* The three expert tensors of one layer while they are being collected. */
typedef struct {
    int layer;
    const st_gguf_tensor *t[3]; /* gate, up, down */
} expert_slots;

enum { GATE, UP, DOWN };
static const char *const EXPERT_SUFFIX[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};

static st_status grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return ST_OK;
    size_t c = *cap ? *cap * 2 : 8;
    if (c < need) c = need;
    void *p = realloc(*arr, c * elem);
    if (!p) return st_fail(ST_ERR_NOMEM, "model: out of memory");
    *arr = p;
    *cap = c;
    return ST_OK;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* "blk.N.<rest>" with N in canonical decimal (no sign, no leading zero):
 * sets *LAYER and returns rest; NULL for any other name. */
static const char *block_suffix(const char *name, int *layer)
{
    if (strncmp(name, "blk.", 4) != 0) return NULL;
    const char *p = name + 4;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return NULL;
    long v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits >= 9) return NULL;
        v = v * 10 + (*p - '0');
    }
    if (*p != '.') return NULL;
    *layer = (int)v;
    return p + 1;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static void type_label(char *dst, size_t n, uint32_t ggml_type)
{
    const char *name = st_gguf_type_name(ggml_type);
    if (strcmp(name, "?") == 0)
        snprintf(dst, n, "type %" PRIu32, ggml_type);
    else
        snprintf(dst, n, "%s", name);
}

static bool is_matrix(const st_gguf_tensor *t)
{
    return t->n_dims >= 2 && t->ne[2] == 1 && t->ne[3] == 1;
}

static st_status fits_int(const st_gguf_tensor *t, int d, int *out)
{
    char pn[256];
    if (t->ne[d] <= 0 || t->ne[d] > INT_MAX)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s dimension %d is %" PRId64 " (must be 1..%d)",
                       st_gguf_printable(pn, sizeof pn, t->name, t->name_len), d, t->ne[d], INT_MAX);
    *out = (int)t->ne[d];
    return ST_OK;
}

/* ---- dense matrices ---- */

static bool is_dense_suffix(const char *rest)
{
    static const char *const FFN[] = {"ffn_gate.weight",       "ffn_up.weight",       "ffn_down.weight",
                                      "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"};
    if (strncmp(rest, "attn_", 5) == 0 && ends_with(rest, ".weight")) return true;
    for (size_t i = 0; i < ST_ARRAY_LEN(FFN); i++)
        if (strcmp(rest, FFN[i]) == 0) return true;
    return false;
}

static st_status add_matrix(st_model *m, const st_gguf_tensor *t, int layer, bool tied, bool *supported)
{
    st_model_matrix mx;
    memset(&mx, 0, sizeof mx);
    snprintf(mx.name, sizeof mx.name, "%s%s", t->name, tied ? " (tied output)" : "");
    mx.ggml_type = (int)(t->type <= INT_MAX ? t->type : INT_MAX);
    type_label(mx.type_name, sizeof mx.type_name, t->type);
    mx.type = st_qtype_valid(mx.ggml_type) ? (st_qtype)mx.ggml_type : ST_QTYPE_NONE;
    mx.layer = layer;
    ST_TRY(fits_int(t, 0, &mx.n_cols));
    ST_TRY(fits_int(t, 1, &mx.n_rows));
    if (t->size_known) {
        mx.data = t->data;
        mx.bytes = (size_t)t->size;
    }
    *supported = mx.type != ST_QTYPE_NONE;
    ST_TRY(grow((void **)&m->mats, &m->cap_mats, m->n_mats + 1, sizeof *m->mats));
    m->mats[m->n_mats++] = mx;
    return ST_OK;
}

static st_status add_skipped(st_model *m, const st_gguf_tensor *t, int layer)
{
    ST_TRY(add_matrix(m, t, layer, false, &(bool){false}));
    /* add_matrix appended to mats; move it to the skipped list. */
    st_model_matrix mx = m->mats[--m->n_mats];
    ST_TRY(grow((void **)&m->skipped, &m->cap_skipped, m->n_skipped + 1, sizeof *m->skipped));
    m->skipped[m->n_skipped++] = mx;
    return ST_OK;
}

static st_status add_mmvq_shape(st_model *m, size_t mi)
{
    const st_model_matrix *mx = &m->mats[mi];
    for (size_t i = 0; i < m->n_mshapes; i++) {
        st_model_mmvq_shape *s = &m->mshapes[i];
        if (s->type == mx->type && s->n_rows == mx->n_rows && s->n_cols == mx->n_cols) {
            s->n_matrices++;
            return ST_OK;
        }
    }
    ST_TRY(grow((void **)&m->mshapes, &m->cap_mshapes, m->n_mshapes + 1, sizeof *m->mshapes));
    m->mshapes[m->n_mshapes++] = (st_model_mmvq_shape){mx->type, mx->n_rows, mx->n_cols, 1, mi};
    return ST_OK;
}

/* ---- expert layers ---- */

static st_status collect_expert(expert_slots **slots, size_t *n, size_t *cap, int layer, int which,
                                const st_gguf_tensor *t)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*slots)[i].layer == layer) {
            (*slots)[i].t[which] = t; /* names are unique, so the slot is empty */
            return ST_OK;
        }
    }
    ST_TRY(grow((void **)slots, cap, *n + 1, sizeof **slots));
    expert_slots *s = &(*slots)[(*n)++];
    memset(s, 0, sizeof *s);
    s->layer = layer;
    s->t[which] = t;
    return ST_OK;
}

static int cmp_slots(const void *a, const void *b)
{
    int x = ((const expert_slots *)a)->layer, y = ((const expert_slots *)b)->layer;
    return (x > y) - (x < y);
}

static st_status expert_type(const st_gguf_tensor *t, st_qtype *out)
{
    if (t->type > INT_MAX || !st_qtype_valid((int)t->type)) {
        char label[24];
        type_label(label, sizeof label, t->type);
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s has type %s, which the expert kernels do not support "
                       "(supported: %s)", t->name, label, st_qtype_names());
    }
    *out = (st_qtype)t->type;
    return ST_OK;
}

static st_status check_expert_dims(const st_gguf_tensor *t, int64_t ne0, int64_t ne1, int64_t ne2)
{
    if (t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1) return ST_OK;
    return st_fail(ST_ERR_PARSE, "model: %s has ne {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                   "}, expected {%" PRId64 ", %" PRId64 ", %" PRId64 ", 1}", t->name, t->ne[0], t->ne[1], t->ne[2],
                   t->ne[3], ne0, ne1, ne2);
}

static st_status build_layer(st_model *m, const expert_slots *s, int64_t expert_count)
{
    for (int w = 0; w < 3; w++) {
        if (s->t[w]) continue;
        const char *have = s->t[GATE] ? EXPERT_SUFFIX[GATE] : s->t[UP] ? EXPERT_SUFFIX[UP] : EXPERT_SUFFIX[DOWN];
        return st_fail(ST_ERR_PARSE, "model: layer %d has blk.%d.%s but no blk.%d.%s", s->layer, s->layer, have,
                       s->layer, EXPERT_SUFFIX[w]);
    }
    const st_gguf_tensor *gate = s->t[GATE], *up = s->t[UP], *down = s->t[DOWN];
    st_model_expert_layer L;
    memset(&L, 0, sizeof L);
    L.layer = s->layer;
    ST_TRY(expert_type(gate, &L.gu_type));
    st_qtype up_type;
    ST_TRY(expert_type(up, &up_type));
    ST_TRY(expert_type(down, &L.down_type));
    if (up_type != L.gu_type)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s is %s but %s is %s (gate and up must share a type)", gate->name,
                       st_qtype_name(L.gu_type), up->name, st_qtype_name(up_type));
    ST_TRY(fits_int(gate, 0, &L.n_embd));
    ST_TRY(fits_int(gate, 1, &L.n_ff));
    ST_TRY(fits_int(gate, 2, &L.n_expert));
    ST_TRY(check_expert_dims(gate, L.n_embd, L.n_ff, L.n_expert));
    ST_TRY(check_expert_dims(up, L.n_embd, L.n_ff, L.n_expert));
    ST_TRY(check_expert_dims(down, L.n_ff, L.n_embd, L.n_expert));
    if (L.n_expert > ST_MAX_EXPERTS)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s has %d experts, more than ST_MAX_EXPERTS (%d), the most experts per "
                       "layer this build serves", gate->name, L.n_expert, ST_MAX_EXPERTS);
    if (expert_count >= 0 && expert_count != L.n_expert)
        return st_fail(ST_ERR_PARSE, "model: %s has %d experts, but %s.expert_count says %" PRId64, gate->name,
                       L.n_expert, m->arch, expert_count);
    if (m->expert_used > L.n_expert)
        return st_fail(ST_ERR_PARSE, "model: %s.expert_used_count %d exceeds the %d experts of layer %d", m->arch,
                       m->expert_used, L.n_expert, L.layer);
    L.n_expert_used = m->expert_used;
    /* Supported types have a known layout, so the parser placed the data. */
    L.gate = gate->data;
    L.up = up->data;
    L.down = down->data;
    L.gu_bytes = (size_t)gate->size;
    L.down_bytes = (size_t)down->size;
    ST_TRY(grow((void **)&m->layers, &m->cap_layers, m->n_layers + 1, sizeof *m->layers));
    size_t li = m->n_layers++;
    m->layers[li] = L;

    for (size_t i = 0; i < m->n_eshapes; i++) {
        st_model_expert_shape *e = &m->eshapes[i];
        if (e->gu_type == L.gu_type && e->down_type == L.down_type && e->n_embd == L.n_embd && e->n_ff == L.n_ff) {
            e->n_layers++;
            return ST_OK;
        }
    }
    ST_TRY(grow((void **)&m->eshapes, &m->cap_eshapes, m->n_eshapes + 1, sizeof *m->eshapes));
    m->eshapes[m->n_eshapes++] =
        (st_model_expert_shape){L.gu_type, L.down_type, L.n_embd, L.n_ff, L.n_expert, 1, li};
    return ST_OK;
}

/* ---- metadata ---- */

/* <arch>.<field> as an integer; -1 when absent. */
static st_status arch_int(const st_model *m, const char *field, int64_t *out)
{
    *out = -1;
    if (!m->arch[0]) return ST_OK;
    size_t n = strlen(m->arch) + strlen(field) + 2;
    char *key = malloc(n);
    if (!key) return st_fail(ST_ERR_NOMEM, "model: out of memory");
    snprintf(key, n, "%s.%s", m->arch, field);
    const st_gguf_kv *kv = st_gguf_find_kv(m->g, key);
    free(key);
    if (!kv) return ST_OK;
    int64_t v;
    if (!st_gguf_kv_int(kv, &v) || v < 0 || v > INT_MAX)
        return st_fail(ST_ERR_PARSE, "model: %s.%s must be an integer in 0..%d", m->arch, field, INT_MAX);
    *out = v;
    return ST_OK;
}

static st_status build(st_model *m, const char *name_fallback)
{
    const char *arch = st_gguf_kv_str(st_gguf_find_kv(m->g, "general.architecture"));
    const char *name = st_gguf_kv_str(st_gguf_find_kv(m->g, "general.name"));
    m->arch = dup_str(arch ? arch : "");
    m->name = dup_str(name ? name : name_fallback ? name_fallback : "");
    if (!m->arch || !m->name) return st_fail(ST_ERR_NOMEM, "model: out of memory");
    int64_t used, expert_count;
    ST_TRY(arch_int(m, "expert_used_count", &used));
    ST_TRY(arch_int(m, "expert_count", &expert_count));
    if (used > ST_MAX_TOPK)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s.expert_used_count is %" PRId64 ", more than ST_MAX_TOPK (%d), the most "
                       "experts per token this build serves", m->arch, used, ST_MAX_TOPK);
    if (expert_count > ST_MAX_EXPERTS)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s.expert_count is %" PRId64 ", more than ST_MAX_EXPERTS (%d), the most "
                       "experts per layer this build serves", m->arch, expert_count, ST_MAX_EXPERTS);
    m->expert_used = used < 0 ? 0 : (int)used;

    bool has_output = st_gguf_find_tensor(m->g, "output.weight") != NULL;
    expert_slots *slots = NULL;
    size_t n_slots = 0, cap_slots = 0;
    st_status s = ST_OK;
    size_t n = st_gguf_tensor_count(m->g);
    for (size_t i = 0; i < n && s == ST_OK; i++) {
        const st_gguf_tensor *t = st_gguf_tensor_at(m->g, i);
        if (strlen(t->name) != t->name_len) continue; /* an inner NUL: no llama.cpp name */
        int layer = -1;
        const char *rest = block_suffix(t->name, &layer);
        bool supported = false;
        if (rest) {
            int which = -1;
            for (int w = 0; w < 3; w++)
                if (strcmp(rest, EXPERT_SUFFIX[w]) == 0) which = w;
            if (which >= 0) {
                s = collect_expert(&slots, &n_slots, &cap_slots, layer, which, t);
            } else if (strcmp(rest, "ffn_gate_inp.weight") == 0 && is_matrix(t)) {
                if (t->type <= INT_MAX && st_qtype_valid((int)t->type))
                    s = add_matrix(m, t, layer, false, &supported);
                else
                    s = add_skipped(m, t, layer);
            } else if (is_dense_suffix(rest) && is_matrix(t)) {
                s = add_matrix(m, t, layer, false, &supported);
            }
        } else if (is_matrix(t) && (strcmp(t->name, "output.weight") == 0 ||
                                    (!has_output && strcmp(t->name, "token_embd.weight") == 0))) {
            s = add_matrix(m, t, -1, !has_output, &supported);
        }
        if (s == ST_OK && supported) s = add_mmvq_shape(m, m->n_mats - 1);
    }
    if (s == ST_OK && n_slots > 1) qsort(slots, n_slots, sizeof *slots, cmp_slots);
    for (size_t i = 0; i < n_slots && s == ST_OK; i++) s = build_layer(m, &slots[i], expert_count);
    free(slots);
    return s;
}

st_status st_model_from_gguf(st_gguf *g, const char *name_fallback, st_model **out)
{
    if (!out) {
        st_gguf_close(g);
        return st_fail(ST_ERR_INVALID_ARG, "model: no output pointer");
    }
    *out = NULL;
    if (!g) return st_fail(ST_ERR_INVALID_ARG, "model: no parsed file");
    st_model *m = calloc(1, sizeof *m);
    if (!m) {
        st_gguf_close(g);
        return st_fail(ST_ERR_NOMEM, "model: out of memory");
    }
    m->g = g;
    st_status s = build(m, name_fallback);
    if (s != ST_OK) {
        st_model_close(m);
        return s;
    }
    *out = m;
    return ST_OK;
}

/* The file's base name without a ".gguf" ending. */
static char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    char *s = dup_str(b);
    if (s && ends_with(s, ".gguf") && strlen(s) > 5) s[strlen(s) - 5] = '\0';
    return s;
}

st_status st_model_open(const char *path, st_model **out)
{
    if (!out || !path) return st_fail(ST_ERR_INVALID_ARG, "model: no path or output pointer");
    *out = NULL;
    st_gguf *g;
    ST_TRY(st_gguf_open(path, &g));
    char *fallback = base_name(path);
    if (!fallback) {
        st_gguf_close(g);
        return st_fail(ST_ERR_NOMEM, "model: out of memory");
    }
    st_status s = st_model_from_gguf(g, fallback, out);
    free(fallback);
    return s;
}

void st_model_close(st_model *m)
{
    if (!m) return;
    st_gguf_close(m->g);
    free(m->arch);
    free(m->name);
    free(m->layers);
    free(m->mats);
    free(m->skipped);
    free(m->eshapes);
    free(m->mshapes);
    free(m);
}

const char *st_model_arch(const st_model *m) { return m->arch; }
const char *st_model_name(const st_model *m) { return m->name; }
int st_model_expert_used(const st_model *m) { return m->expert_used; }

size_t st_model_expert_layer_count(const st_model *m) { return m->n_layers; }
const st_model_expert_layer *st_model_expert_layer_at(const st_model *m, size_t i)
{
    return i < m->n_layers ? &m->layers[i] : NULL;
}

size_t st_model_matrix_count(const st_model *m) { return m->n_mats; }
const st_model_matrix *st_model_matrix_at(const st_model *m, size_t i)
{
    return i < m->n_mats ? &m->mats[i] : NULL;
}

size_t st_model_skipped_count(const st_model *m) { return m->n_skipped; }
const st_model_matrix *st_model_skipped_at(const st_model *m, size_t i)
{
    return i < m->n_skipped ? &m->skipped[i] : NULL;
}

size_t st_model_expert_shape_count(const st_model *m) { return m->n_eshapes; }
const st_model_expert_shape *st_model_expert_shape_at(const st_model *m, size_t i)
{
    return i < m->n_eshapes ? &m->eshapes[i] : NULL;
}

size_t st_model_mmvq_shape_count(const st_model *m) { return m->n_mshapes; }
const st_model_mmvq_shape *st_model_mmvq_shape_at(const st_model *m, size_t i)
{
    return i < m->n_mshapes ? &m->mshapes[i] : NULL;
}
