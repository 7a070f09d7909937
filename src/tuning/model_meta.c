/* The MoE layout a GGUF file's metadata declares (<arch>.expert_count and
 * the others, gguf-py's Keys.LLM), the limits checked against it, and the
 * shared-expert FFN checked against it the way llama.cpp creates those
 * tensors: a file llama.cpp would refuse to load is refused here too. */
#include "tools_internal.h"
#include "model_extra.h"
#include "model_internal.h"
#include "strata/limits.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* <arch>.<field>: *OUT = -1 when absent. A value of another type is an
 * error when STRICT (the keys the decode needs), else counts as absent: a
 * per-layer array (which GGUF allows for some keys) only disables a check. */
static st_status arch_int(const st_model *m, const char *field, bool strict, int64_t *out)
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
    if (!st_gguf_kv_int(kv, &v) || v < 0 || v > INT_MAX) {
        if (!strict) return ST_OK;
        return st_fail(ST_ERR_PARSE, "model: %s.%s must be an integer in 0..%d", m->arch, field, INT_MAX);
    }
    *out = v;
    return ST_OK;
}

st_status st_model_read_moe(st_model *m)
{
    static const struct {
        const char *key;
        size_t off;
        bool strict;
    } KEYS[] = {
        {"block_count", offsetof(st_model_moe, n_layer), false},
        {"embedding_length", offsetof(st_model_moe, n_embd), false},
        {"expert_count", offsetof(st_model_moe, n_expert), true},
        {"expert_used_count", offsetof(st_model_moe, n_expert_used), true},
        {"expert_shared_count", offsetof(st_model_moe, n_expert_shared), false},
        {"expert_feed_forward_length", offsetof(st_model_moe, n_ff_expert), false},
        {"expert_shared_feed_forward_length", offsetof(st_model_moe, n_ff_shared), false},
        {"leading_dense_block_count", offsetof(st_model_moe, n_leading_dense), false},
    };
    memset(&m->moe, 0, sizeof m->moe);
    for (size_t i = 0; i < ST_ARRAY_LEN(KEYS); i++) {
        int64_t v;
        ST_TRY(arch_int(m, KEYS[i].key, KEYS[i].strict, &v));
        if (!strcmp(KEYS[i].key, "expert_count")) m->has_expert_count = v >= 0;
        if (!strcmp(KEYS[i].key, "expert_used_count") && v > ST_MAX_TOPK)
            return st_fail(ST_ERR_UNSUPPORTED, "model: %s.expert_used_count is %" PRId64 ", more than ST_MAX_TOPK (%d), the "
                           "most experts per token this build serves", m->arch, v, ST_MAX_TOPK);
        if (!strcmp(KEYS[i].key, "expert_count") && v > ST_MAX_EXPERTS)
            return st_fail(ST_ERR_UNSUPPORTED, "model: %s.expert_count is %" PRId64 ", more than ST_MAX_EXPERTS (%d), the "
                           "most experts per layer this build serves", m->arch, v, ST_MAX_EXPERTS);
        *(int *)((char *)&m->moe + KEYS[i].off) = v < 0 ? 0 : (int)v;
    }
    return ST_OK;
}

/* The rows of a shared-expert FFN the metadata implies, 0 when it implies
 * none: expert_shared_feed_forward_length, else (deepseek2 and its kin)
 * expert_feed_forward_length x expert_shared_count. */
static int shared_ff(const st_model_moe *md)
{
    if (md->n_ff_shared > 0) return md->n_ff_shared;
    if (md->n_ff_expert > 0 && md->n_expert_shared > 0 && md->n_ff_expert <= INT_MAX / md->n_expert_shared)
        return md->n_ff_expert * md->n_expert_shared;
    return 0;
}

st_status st_model_check_shared(const st_model *m)
{
    const st_model_moe *md = &m->moe;
    const int ff = shared_ff(md);
    for (size_t i = 0; i < m->n_mats; i++) {
        const st_model_matrix *x = &m->mats[i];
        const bool down = st_ends_with(x->name, ".ffn_down_shexp.weight");
        if (!down && !st_ends_with(x->name, ".ffn_gate_shexp.weight") &&
            !st_ends_with(x->name, ".ffn_up_shexp.weight"))
            continue;
        /* ggml ne: gate/up {n_embd, n_ff}, down {n_ff, n_embd} */
        const int got_ff = down ? x->n_cols : x->n_rows, got_embd = down ? x->n_rows : x->n_cols;
        if (ff > 0 && got_ff != ff)
            return st_fail(ST_ERR_PARSE, "model: %s has n_ff %d, but the metadata says %d (%s.%s)", x->name, got_ff, ff,
                           m->arch, md->n_ff_shared > 0 ? "expert_shared_feed_forward_length"
                                                        : "expert_feed_forward_length x expert_shared_count");
        if (md->n_embd > 0 && got_embd != md->n_embd)
            return st_fail(ST_ERR_PARSE, "model: %s has n_embd %d, but %s.embedding_length says %d", x->name, got_embd,
                           m->arch, md->n_embd);
    }
    return ST_OK;
}

void st_model_sort_omitted(st_model *m)
{
    /* insertion sort: stable, and the list is short (one entry per layer) */
    for (size_t i = 1; i < m->n_omitted; i++) {
        st_model_omission o = m->omitted[i];
        size_t ord = m->omit_order[i], j = i;
        for (; j > 0; j--) {
            const st_model_omission *p = &m->omitted[j - 1];
            if (p->layer < o.layer || (p->layer == o.layer && m->omit_order[j - 1] <= ord)) break;
            m->omitted[j] = *p;
            m->omit_order[j] = m->omit_order[j - 1];
        }
        m->omitted[j] = o;
        m->omit_order[j] = ord;
    }
}

void st_model_log_skips(const st_model *m, const char *who)
{
    for (size_t i = 0; i < m->n_omitted; i++)
        st_log("%s: %s skipped: %s", who, m->omitted[i].name, m->omitted[i].reason);
    for (size_t i = 0; i < m->n_mats; i++)
        if (m->mats[i].type == ST_QTYPE_NONE)
            st_log("%s: %s skipped: type %s has no decode kernel", who, m->mats[i].name, m->mats[i].type_name);
}
