/* The public model description (strata/tools/model.h), built on the GGUF reader.
 * It only ever looks at what the parser validated: names, shapes, types and
 * data spans that lie inside the file. A tensor of a type the kernels do not
 * support never refuses the model: its expert layer is left out with one
 * line (an omission), a dense matrix is listed with ST_QTYPE_NONE. What
 * refuses the model is a file llama.cpp would refuse as well (an incomplete
 * expert layer, tensors that contradict each other or the metadata) and a
 * model beyond the limits of strata/limits.h. */
#include "strata/tools/model.h"
#include "gguf.h"
#include "model_extra.h"
#include "tools_internal.h"
#include "model_internal.h"
#include "strata/limits.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tensors of one layer's experts while they are being collected. */
typedef struct {
    int layer;
    const st_gguf_tensor *t[ST_EXP_SLOTS];
    size_t first; /* tensor index of the first one seen (file order) */
} expert_slots;

static const char *const EXPERT_SUFFIX[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};

st_status st_model_grow(void **arr, size_t *cap, size_t need, size_t elem)
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

void st_model_type_label(char *dst, size_t n, uint32_t ggml_type)
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

static bool supported(uint32_t ggml_type) { return ggml_type <= INT_MAX && st_qtype_valid((int)ggml_type); }

static st_status fits_int(const st_gguf_tensor *t, int d, int *out)
{
    char pn[256];
    if (t->ne[d] <= 0 || t->ne[d] > INT_MAX)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s dimension %d is %" PRId64 " (must be 1..%d)",
                       st_gguf_printable(pn, sizeof pn, t->name, t->name_len), d, t->ne[d], INT_MAX);
    *out = (int)t->ne[d];
    return ST_OK;
}

st_status st_model_omit(st_model *m, int layer, size_t order, const char *name, const char *fmt, ...)
{
    ST_TRY(st_model_grow((void **)&m->omitted, &m->cap_omitted, m->n_omitted + 1, sizeof *m->omitted));
    ST_TRY(st_model_grow((void **)&m->omit_order, &m->cap_omit_order, m->n_omitted + 1, sizeof *m->omit_order));
    st_model_omission *o = &m->omitted[m->n_omitted];
    memset(o, 0, sizeof *o);
    o->layer = layer;
    snprintf(o->name, sizeof o->name, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->reason, sizeof o->reason, fmt, ap);
    va_end(ap);
    m->omit_order[m->n_omitted++] = order;
    return ST_OK;
}

/* ---- dense matrices ---- */

/* The 2-D weights a decode step multiplies by the activations. Only named
 * ones: a 2-D tensor such as ssm_conv1d (a convolution) is no matrix
 * product, so a prefix match would be wrong. */
static bool is_dense_suffix(const char *rest)
{
    static const char *const NAMED[] = {"ffn_gate.weight",       "ffn_up.weight",       "ffn_down.weight",
                                        "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
                                        "ssm_in.weight",         "ssm_out.weight",      "ssm_ba.weight"};
    if (strncmp(rest, "attn_", 5) == 0 && st_ends_with(rest, ".weight")) return true;
    for (size_t i = 0; i < ST_ARRAY_LEN(NAMED); i++)
        if (strcmp(rest, NAMED[i]) == 0) return true;
    return false;
}

static st_status add_matrix(st_model *m, const st_gguf_tensor *t, int layer, bool tied, bool *is_supported)
{
    st_model_matrix mx;
    memset(&mx, 0, sizeof mx);
    snprintf(mx.name, sizeof mx.name, "%s%s", t->name, tied ? " (tied output)" : "");
    mx.ggml_type = (int)(t->type <= INT_MAX ? t->type : INT_MAX);
    st_model_type_label(mx.type_name, sizeof mx.type_name, t->type);
    mx.type = supported(t->type) ? (st_qtype)mx.ggml_type : ST_QTYPE_NONE;
    mx.layer = layer;
    ST_TRY(fits_int(t, 0, &mx.n_cols));
    ST_TRY(fits_int(t, 1, &mx.n_rows));
    if (t->size_known) {
        mx.data = t->data;
        mx.bytes = (size_t)t->size;
    }
    *is_supported = mx.type != ST_QTYPE_NONE;
    ST_TRY(st_model_grow((void **)&m->mats, &m->cap_mats, m->n_mats + 1, sizeof *m->mats));
    m->mats[m->n_mats++] = mx;
    return ST_OK;
}

static st_status add_skipped(st_model *m, const st_gguf_tensor *t, int layer)
{
    ST_TRY(add_matrix(m, t, layer, false, &(bool){false}));
    /* add_matrix appended to mats; move it to the skipped list. */
    st_model_matrix mx = m->mats[--m->n_mats];
    ST_TRY(st_model_grow((void **)&m->skipped, &m->cap_skipped, m->n_skipped + 1, sizeof *m->skipped));
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
    ST_TRY(st_model_grow((void **)&m->mshapes, &m->cap_mshapes, m->n_mshapes + 1, sizeof *m->mshapes));
    m->mshapes[m->n_mshapes++] = (st_model_mmvq_shape){mx->type, mx->n_rows, mx->n_cols, 1, mi};
    return ST_OK;
}

/* ---- expert layers ---- */

/* Which expert slot REST names: the three merged tensors, the fused gate_up
 * tensor, or one tensor per expert ("ffn_gate.7.weight", the layout of old
 * mixtral files); -1 for anything else. */
static int expert_slot(const char *rest)
{
    for (int w = 0; w < 3; w++)
        if (strcmp(rest, EXPERT_SUFFIX[w]) == 0) return w;
    if (strcmp(rest, "ffn_gate_up_exps.weight") == 0) return ST_EXP_FUSED;
    static const char *const SPLIT[] = {"ffn_gate.", "ffn_up.", "ffn_down."};
    for (size_t i = 0; i < ST_ARRAY_LEN(SPLIT); i++) {
        size_t n = strlen(SPLIT[i]);
        if (strncmp(rest, SPLIT[i], n) != 0) continue;
        const char *p = rest + n;
        if (*p < '0' || *p > '9') return -1;
        while (*p >= '0' && *p <= '9') p++;
        return strcmp(p, ".weight") == 0 ? ST_EXP_SPLIT : -1;
    }
    return -1;
}

static st_status collect_expert(expert_slots **slots, size_t *n, size_t *cap, int layer, int which,
                                const st_gguf_tensor *t, size_t ti)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*slots)[i].layer == layer) {
            /* names are unique, so a merged slot is empty; the split layout
             * keeps its first tensor */
            if (!(*slots)[i].t[which]) (*slots)[i].t[which] = t;
            return ST_OK;
        }
    }
    ST_TRY(st_model_grow((void **)slots, cap, *n + 1, sizeof **slots));
    expert_slots *s = &(*slots)[(*n)++];
    memset(s, 0, sizeof *s);
    s->layer = layer;
    s->t[which] = t;
    s->first = ti;
    return ST_OK;
}

static int cmp_slots(const void *a, const void *b)
{
    int x = ((const expert_slots *)a)->layer, y = ((const expert_slots *)b)->layer;
    return (x > y) - (x < y);
}

static st_status check_expert_dims(const st_gguf_tensor *t, int64_t ne0, int64_t ne1, int64_t ne2)
{
    if (t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1) return ST_OK;
    return st_fail(ST_ERR_PARSE, "model: %s has ne {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                   "}, expected {%" PRId64 ", %" PRId64 ", %" PRId64 ", 1}", t->name, t->ne[0], t->ne[1], t->ne[2],
                   t->ne[3], ne0, ne1, ne2);
}

/* The experts' count and sizes against the limits and the metadata. */
static st_status check_expert_meta(const st_model *m, const st_gguf_tensor *gate, int layer, int n_embd, int n_ff,
                                   int n_expert)
{
    const st_model_moe *md = &m->moe;
    if (n_expert > ST_MAX_EXPERTS)
        return st_fail(ST_ERR_UNSUPPORTED, "model: %s has %d experts, more than ST_MAX_EXPERTS (%d), the most experts per "
                       "layer this build serves", gate->name, n_expert, ST_MAX_EXPERTS);
    if (m->has_expert_count && md->n_expert != n_expert)
        return st_fail(ST_ERR_PARSE, "model: %s has %d experts, but %s.expert_count says %d", gate->name, n_expert, m->arch,
                       md->n_expert);
    if (md->n_expert_used > n_expert)
        return st_fail(ST_ERR_PARSE, "model: %s.expert_used_count %d exceeds the %d experts of layer %d", m->arch,
                       md->n_expert_used, n_expert, layer);
    if (md->n_ff_expert > 0 && md->n_ff_expert != n_ff)
        return st_fail(ST_ERR_PARSE, "model: %s has n_ff %d, but %s.expert_feed_forward_length says %d", gate->name, n_ff,
                       m->arch, md->n_ff_expert);
    if (md->n_embd > 0 && md->n_embd != n_embd)
        return st_fail(ST_ERR_PARSE, "model: %s has n_embd %d, but %s.embedding_length says %d", gate->name, n_embd,
                       m->arch, md->n_embd);
    if (layer < md->n_leading_dense)
        return st_fail(ST_ERR_PARSE, "model: blk.%d has experts, but %s.leading_dense_block_count says blocks 0..%d are "
                       "dense", layer, m->arch, md->n_leading_dense - 1);
    return ST_OK;
}

/* The types of a complete layer: the one line of its omission in WHY, or
 * "" when the expert kernels run it. */
static void expert_types(const st_gguf_tensor *const t[3], char *why, size_t n)
{
    why[0] = '\0';
    for (int w = 0; w < 3; w++) {
        if (supported(t[w]->type)) continue;
        char label[24];
        st_model_type_label(label, sizeof label, t[w]->type);
        snprintf(why, n, "%s has type %s, which the expert kernels do not support", t[w]->name, label);
        return;
    }
    if (t[0]->type != t[1]->type)
        snprintf(why, n, "%s is %s but %s is %s: the expert kernels take gate and up of one type", t[0]->name,
                 st_qtype_name((st_qtype)t[0]->type), t[1]->name, st_qtype_name((st_qtype)t[1]->type));
}

static st_status add_expert_shape(st_model *m, size_t li)
{
    const st_model_expert_layer *L = &m->layers[li];
    for (size_t i = 0; i < m->n_eshapes; i++) {
        st_model_expert_shape *e = &m->eshapes[i];
        if (e->gu_type == L->gu_type && e->down_type == L->down_type && e->n_embd == L->n_embd && e->n_ff == L->n_ff) {
            e->n_layers++;
            return ST_OK;
        }
    }
    ST_TRY(st_model_grow((void **)&m->eshapes, &m->cap_eshapes, m->n_eshapes + 1, sizeof *m->eshapes));
    m->eshapes[m->n_eshapes++] =
        (st_model_expert_shape){L->gu_type, L->down_type, L->n_embd, L->n_ff, L->n_expert, 1, li};
    return ST_OK;
}

static st_status build_layer(st_model *m, const expert_slots *s)
{
    char what[32];
    snprintf(what, sizeof what, "blk.%d experts", s->layer);
    if (s->t[ST_EXP_SPLIT])
        return st_model_omit(m, s->layer, s->first, what,
                             "one tensor per expert (%s, ...), a layout the expert kernels do not run (a current "
                             "llama.cpp convert writes merged ffn_*_exps tensors)", s->t[ST_EXP_SPLIT]->name);
    if (s->t[ST_EXP_FUSED])
        return st_model_omit(m, s->layer, s->first, what,
                             "%s holds gate and up in one tensor, a layout the expert kernels do not run",
                             s->t[ST_EXP_FUSED]->name);
    for (int w = 0; w < 3; w++) {
        if (s->t[w]) continue;
        const char *have = s->t[0] ? EXPERT_SUFFIX[0] : s->t[1] ? EXPERT_SUFFIX[1] : EXPERT_SUFFIX[2];
        return st_fail(ST_ERR_PARSE, "model: layer %d has blk.%d.%s but no blk.%d.%s", s->layer, s->layer, have,
                       s->layer, EXPERT_SUFFIX[w]);
    }
    const st_gguf_tensor *gate = s->t[0], *up = s->t[1], *down = s->t[2];
    st_model_expert_layer L;
    memset(&L, 0, sizeof L);
    L.layer = s->layer;
    ST_TRY(fits_int(gate, 0, &L.n_embd));
    ST_TRY(fits_int(gate, 1, &L.n_ff));
    ST_TRY(fits_int(gate, 2, &L.n_expert));
    ST_TRY(check_expert_dims(gate, L.n_embd, L.n_ff, L.n_expert));
    ST_TRY(check_expert_dims(up, L.n_embd, L.n_ff, L.n_expert));
    ST_TRY(check_expert_dims(down, L.n_ff, L.n_embd, L.n_expert));
    ST_TRY(check_expert_meta(m, gate, L.layer, L.n_embd, L.n_ff, L.n_expert));
    char why[200];
    expert_types(s->t, why, sizeof why);
    if (why[0]) return st_model_omit(m, s->layer, s->first, what, "%s", why);
    L.gu_type = (st_qtype)gate->type;
    L.down_type = (st_qtype)down->type;
    L.n_expert_used = m->moe.n_expert_used;
    /* Supported types have a known layout, so the parser placed the data. */
    L.gate = gate->data;
    L.up = up->data;
    L.down = down->data;
    L.gu_bytes = (size_t)gate->size;
    L.down_bytes = (size_t)down->size;
    ST_TRY(st_model_grow((void **)&m->layers, &m->cap_layers, m->n_layers + 1, sizeof *m->layers));
    m->layers[m->n_layers++] = L;
    return add_expert_shape(m, m->n_layers - 1);
}

/* ---- the tensors ---- */

/* A 3-D weight inside a block that is not an expert tensor: per-head
 * matrices (deepseek2 attn_k_b, attn_v_b), no single decode matrix. */
static bool is_per_head(const st_gguf_tensor *t, const char *rest)
{
    return t->n_dims >= 3 && (t->ne[2] > 1 || t->ne[3] > 1) && st_ends_with(rest, ".weight") &&
           (strncmp(rest, "attn_", 5) == 0 || strncmp(rest, "ffn_", 4) == 0);
}

static st_status scan_block_tensor(st_model *m, const st_gguf_tensor *t, size_t ti, int layer, const char *rest,
                                   expert_slots **slots, size_t *n_slots, size_t *cap_slots, bool *is_supported)
{
    const int which = expert_slot(rest);
    if (which >= 0) return collect_expert(slots, n_slots, cap_slots, layer, which, t, ti);
    if (strcmp(rest, "ffn_gate_inp.weight") == 0 && is_matrix(t))
        return supported(t->type) ? add_matrix(m, t, layer, false, is_supported) : add_skipped(m, t, layer);
    if (is_dense_suffix(rest) && is_matrix(t)) return add_matrix(m, t, layer, false, is_supported);
    if (is_per_head(t, rest))
        return st_model_omit(m, layer, ti, t->name,
                             "a %" PRIu32 "-D weight (ne {%" PRId64 ", %" PRId64 ", %" PRId64 "}): per-head matrices, "
                             "no single decode matrix", t->n_dims, t->ne[0], t->ne[1], t->ne[2]);
    return ST_OK;
}

static st_status scan(st_model *m)
{
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
        bool is_supported = false;
        if (rest) {
            s = scan_block_tensor(m, t, i, layer, rest, &slots, &n_slots, &cap_slots, &is_supported);
        } else if (is_matrix(t) && (strcmp(t->name, "output.weight") == 0 ||
                                    (!has_output && strcmp(t->name, "token_embd.weight") == 0))) {
            s = add_matrix(m, t, -1, !has_output, &is_supported);
        }
        if (s == ST_OK && is_supported) s = add_mmvq_shape(m, m->n_mats - 1);
    }
    if (s == ST_OK && n_slots > 1) qsort(slots, n_slots, sizeof *slots, cmp_slots);
    for (size_t i = 0; i < n_slots && s == ST_OK; i++) s = build_layer(m, &slots[i]);
    free(slots);
    return s;
}

static st_status build(st_model *m, const char *name_fallback)
{
    const char *arch = st_gguf_kv_str(st_gguf_find_kv(m->g, "general.architecture"));
    const char *name = st_gguf_kv_str(st_gguf_find_kv(m->g, "general.name"));
    m->arch = dup_str(arch ? arch : "");
    m->name = dup_str(name ? name : name_fallback ? name_fallback : "");
    if (!m->arch || !m->name) return st_fail(ST_ERR_NOMEM, "model: out of memory");
    ST_TRY(st_model_read_moe(m));
    ST_TRY(scan(m));
    ST_TRY(st_model_check_shared(m));
    st_model_sort_omitted(m);
    return ST_OK;
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
    if (s && st_ends_with(s, ".gguf") && strlen(s) > 5) s[strlen(s) - 5] = '\0';
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
    free(m->omitted);
    free(m->omit_order);
    free(m->eshapes);
    free(m->mshapes);
    free(m);
}

const char *st_model_arch(const st_model *m) { return m->arch; }
const char *st_model_name(const st_model *m) { return m->name; }
int st_model_expert_used(const st_model *m) { return m->moe.n_expert_used; }
const st_model_moe *st_model_moe_info(const st_model *m) { return &m->moe; }

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

size_t st_model_omitted_count(const st_model *m) { return m->n_omitted; }
const st_model_omission *st_model_omitted_at(const st_model *m, size_t i)
{
    return i < m->n_omitted ? &m->omitted[i] : NULL;
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
