/* The tuner's list of shapes: a model's, hand-given ones, or the demo set. */
#include "strata/limits.h"
#include "tools_internal.h"
#include "tuner_shapes.h"
#include "strata/table_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The demo set, by ggml name: a type this build lacks (st_qtype_from_name
 * says ST_QTYPE_NONE) is left out, so the set follows the format list.
 * Expert pairs: each gate-up type with IQ4_NL down (n_ff 640 is no multiple
 * of 256), iq2_xxs being the low-bit MoE quants' gate-up. Dense: the IQ
 * shapes, then the K-quant matrices real quants keep beside their experts:
 * q5_K / q6_K attention (4096x4096) and a q6_K output-like slice of the
 * vocabulary (16384 rows of 4096). */
static const char *const DEMO_GU[] = {"iq3_xxs", "iq3_s", "iq2_s", "iq4_xs", "iq4_nl", "q8_0", "q4_K", "iq2_xxs"};
static const struct {
    const char *t;
    int rows, cols;
} DEMO_MMVQ[] = {{"iq3_s", 4096, 14336}, {"iq3_s", 14336, 4096}, {"iq4_xs", 4096, 14336}, {"iq4_nl", 14336, 4096},
                 {"iq3_s", 2560, 2560},  {"q5_K", 4096, 4096},   {"q6_K", 4096, 4096},    {"q6_K", 16384, 4096}};

static st_status fits(const st_tune_shape *s)
{
    if (s->kind == ST_SHAPE_MMVQ) {
        if (s->rows < 1 || s->cols < 1 || s->cols % st_qtype_block_values(s->type))
            return st_fail(ST_ERR_INVALID_ARG, "mmvq %s %d x %d: the row length must be a positive multiple of %d",
                           st_qtype_name(s->type), s->rows, s->cols, st_qtype_block_values(s->type));
        return ST_OK;
    }
    if (s->n_embd < 1 || s->n_embd % st_qtype_block_values(s->type))
        return st_fail(ST_ERR_INVALID_ARG, "expert: n_embd %d is not a positive multiple of %d, the block of %s",
                       s->n_embd, st_qtype_block_values(s->type), st_qtype_name(s->type));
    if (s->n_ff < 1 || s->n_ff % st_qtype_block_values(s->down_type))
        return st_fail(ST_ERR_INVALID_ARG, "expert: n_ff %d is not a positive multiple of %d, the block of %s",
                       s->n_ff, st_qtype_block_values(s->down_type), st_qtype_name(s->down_type));
    if (s->n_tokens < 1 || s->n_tokens > ST_MAX_TOKENS)
        return st_fail(ST_ERR_INVALID_ARG, "expert: n_tokens %d is out of range 1..%d (ST_MAX_TOKENS)", s->n_tokens,
                       ST_MAX_TOKENS);
    if (s->n_expert < 1 || s->n_expert > ST_MAX_EXPERTS || s->topk < 1 || s->topk > ST_MAX_TOPK || s->topk > s->n_expert)
        return st_fail(ST_ERR_INVALID_ARG,
                       "expert: %d experts with top-%d is out of range (experts 1..%d ST_MAX_EXPERTS, top-k 1..%d ST_MAX_TOPK, "
                       "at most the experts)",
                       s->n_expert, s->topk, ST_MAX_EXPERTS, ST_MAX_TOPK);
    return ST_OK;
}

static st_status parse_int(const char *tok, int *v)
{
    char *end;
    long x = strtol(tok, &end, 10);
    if (!*tok || *end || x < 1 || x > (1 << 20)) return st_fail(ST_ERR_INVALID_ARG, "'%s' is not a positive size", tok);
    *v = (int)x;
    return ST_OK;
}

static st_status parse_type(const char *tok, st_qtype *t)
{
    *t = st_qtype_from_name(tok);
    if (*t == ST_QTYPE_NONE) return st_fail(ST_ERR_INVALID_ARG, "unknown type '%s' (known: %s)", tok, st_qtype_names());
    return ST_OK;
}

st_status st_tune_parse_shape(const char *text, int n_expert, int topk, st_tune_shape *s)
{
    char buf[256], *tok[8];
    int n = 0;
    if (strlen(text) >= sizeof buf) /* never cut: the rest would be ignored */
        return st_fail(ST_ERR_INVALID_ARG, "shape '%.40s...': longer than %zu characters", text, sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", text);
    for (char *p = strtok(buf, " \t"); p && n < 8; p = strtok(NULL, " \t")) tok[n++] = p;
    memset(s, 0, sizeof *s);
    snprintf(s->source, sizeof s->source, "--shape");
    if (n >= 1 && !strcmp(tok[0], "mmvq")) {
        if (n != 4) return st_fail(ST_ERR_INVALID_ARG, "shape '%s': expected 'mmvq TYPE ROWS COLS'", text);
        s->kind = ST_SHAPE_MMVQ;
        ST_TRY(parse_type(tok[1], &s->type));
        ST_TRY(parse_int(tok[2], &s->rows));
        ST_TRY(parse_int(tok[3], &s->cols));
    } else if (n >= 1 && !strcmp(tok[0], "expert")) {
        if (n != 6) return st_fail(ST_ERR_INVALID_ARG, "shape '%s': expected 'expert GU_TYPE DOWN_TYPE N_EMBD N_FF N_TOKENS'", text);
        s->kind = ST_SHAPE_EXPERT;
        ST_TRY(parse_type(tok[1], &s->type));
        ST_TRY(parse_type(tok[2], &s->down_type));
        ST_TRY(parse_int(tok[3], &s->n_embd));
        ST_TRY(parse_int(tok[4], &s->n_ff));
        ST_TRY(parse_int(tok[5], &s->n_tokens));
        s->n_expert = n_expert;
        s->topk = topk;
    } else {
        return st_fail(ST_ERR_INVALID_ARG, "shape '%s': expected 'expert ...' or 'mmvq ...'", text);
    }
    return fits(s);
}

typedef struct {
    st_tune_shape *v;
    int n, cap;
} list;

static st_status push(list *l, const st_tune_shape *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 32;
        st_tune_shape *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) return st_fail(ST_ERR_NOMEM, "tune: out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *s;
    return ST_OK;
}

static int expert_nts(const st_tune_options *o, int *nts)
{
    if (o->n_expert_ntok > 0) {
        memcpy(nts, o->expert_ntok, sizeof(int) * (size_t)o->n_expert_ntok);
        return o->n_expert_ntok;
    }
    if (o->n_ntok_mix > 0) {
        memcpy(nts, o->ntok_mix, sizeof(int) * (size_t)o->n_ntok_mix);
        return o->n_ntok_mix;
    }
    for (int i = 0; i < ST_DECODE_TOKENS; i++) nts[i] = i + 1;
    return ST_DECODE_TOKENS;
}

static st_status from_model(const st_tune_options *o, const st_model *m, list *l)
{
    int nts[ST_MAX_TOKENS], nn = expert_nts(o, nts);
    if (o->do_expert)
        for (size_t i = 0; i < st_model_expert_shape_count(m); i++) {
            const st_model_expert_shape *es = st_model_expert_shape_at(m, i);
            const st_model_expert_layer *ly = st_model_expert_layer_at(m, es->first);
            for (int k = 0; k < nn; k++) {
                st_tune_shape s = {ST_SHAPE_EXPERT, es->gu_type, es->down_type, 0, 0, es->n_embd, es->n_ff, nts[k],
                                   es->n_expert, st_model_expert_used(m) > 0 ? st_model_expert_used(m) : o->topk,
                                   {ly->gate, ly->up, ly->down}, ""};
                if (s.topk > s.n_expert) s.topk = s.n_expert;
                snprintf(s.source, sizeof s.source, "blk.%d experts", ly->layer);
                ST_TRY(fits(&s));
                ST_TRY(push(l, &s));
            }
        }
    if (o->do_mmvq)
        for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
            const st_model_mmvq_shape *ms = st_model_mmvq_shape_at(m, i);
            const st_model_matrix *mx = st_model_matrix_at(m, ms->first);
            st_tune_shape s = {ST_SHAPE_MMVQ, ms->type, ST_QTYPE_NONE, ms->n_rows, ms->n_cols, 0, 0, 0, 0, 0,
                               {mx->data, NULL, NULL}, ""};
            snprintf(s.source, sizeof s.source, "%s", mx->name);
            ST_TRY(fits(&s));
            ST_TRY(push(l, &s));
        }
    return ST_OK;
}

static st_status demo(const st_tune_options *o, list *l)
{
    int nts[ST_MAX_TOKENS], nn = expert_nts(o, nts);
    if (o->do_expert)
        for (size_t i = 0; i < sizeof DEMO_GU / sizeof DEMO_GU[0]; i++) {
            const st_qtype gu = st_qtype_from_name(DEMO_GU[i]);
            for (int k = 0; k < nn && gu != ST_QTYPE_NONE; k++) {
                st_tune_shape s = {ST_SHAPE_EXPERT, gu, ST_IQ4_NL, 0, 0, 2560, 640, nts[k], o->n_expert, o->topk,
                                   {NULL, NULL, NULL}, "demo"};
                ST_TRY(fits(&s));
                ST_TRY(push(l, &s));
            }
        }
    if (o->do_mmvq)
        for (size_t i = 0; i < sizeof DEMO_MMVQ / sizeof DEMO_MMVQ[0]; i++) {
            const st_qtype t = st_qtype_from_name(DEMO_MMVQ[i].t);
            if (t == ST_QTYPE_NONE) continue;
            st_tune_shape s = {ST_SHAPE_MMVQ, t, ST_QTYPE_NONE, DEMO_MMVQ[i].rows, DEMO_MMVQ[i].cols,
                               0, 0, 0, 0, 0, {NULL, NULL, NULL}, "demo"};
            ST_TRY(fits(&s));
            ST_TRY(push(l, &s));
        }
    return ST_OK;
}

st_status st_tune_shapes(const st_tune_options *o, const st_model *model, st_tune_shape **out, int *n)
{
    list l = {NULL, 0, 0};
    st_status s = ST_OK;
    if (o->n_shapes > 0) {
        for (int i = 0; i < o->n_shapes && s == ST_OK; i++) {
            st_tune_shape sh;
            s = st_tune_parse_shape(o->shapes[i], o->n_expert, o->topk, &sh);
            if (s == ST_OK) s = push(&l, &sh);
        }
    } else if (model) {
        s = from_model(o, model, &l);
    } else {
        s = demo(o, &l);
    }
    if (s == ST_OK && l.n == 0) s = st_fail(ST_ERR_NOT_FOUND, "tune: no shapes to tune (check --shapes)");
    if (s != ST_OK) {
        free(l.v);
        return s;
    }
    *out = l.v;
    *n = l.n;
    return ST_OK;
}

const char *st_tune_shape_key(const st_tune_shape *s, char *buf, size_t n)
{
    if (s->kind == ST_SHAPE_MMVQ) {
        const st_mmvq_key k = {s->type, s->rows, s->cols};
        return st_mmvq_key_text(&k, buf, n);
    }
    const st_expert_key k = {s->type, s->down_type, s->n_embd, s->n_ff, s->n_tokens};
    return st_expert_key_text(&k, buf, n);
}
