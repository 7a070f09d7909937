/* Shared by the GPU parity tests: contexts, random inputs, and runs of the
 * decode entry points with a chosen path, returning host copies of the
 * outputs so they can be byte-compared. */
#ifndef ST_PARITY_UTIL_H
#define ST_PARITY_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* setenv, strdup */
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <stdbool.h>

#include "gpu_test_size.h"
#include "randgen.h"
#include "strata/limits.h"
#include "strata/tools.h"

#define CHECK_OK(expr)                                                                   \
    do {                                                                                 \
        st_status s_ = (expr);                                                           \
        if (s_ != ST_OK) fail_msg("%s: %s (%s)", #expr, st_status_str(s_), st_last_error()); \
    } while (0)


/* A context sized for the tests' shapes (at most MAX_ROWS x MAX_COLS), as an
 * engine sizes one for its model: small enough that every knob path's
 * scratch is reserved (STRATA_EXPERT_V2K's included). */
static st_ctx *__attribute__((unused)) make_ctx_dims(st_backend b, int64_t max_rows, int64_t max_cols)
{
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = b;
    p.max_rows = max_rows;
    p.max_cols = max_cols;
    st_ctx *c = NULL;
    /* every knob path is swept later on this context: STRATA_EXPERT_V2K's
     * k-split scratch is reserved only when the knob is set at creation
     * (beyond 64 MiB), so the context is made with it set */
    const char *v2k = st_knob_env(ST_KNOB_EXPERT_V2K);
    char *was = getenv(v2k) ? strdup(getenv(v2k)) : NULL;
    setenv(v2k, "1", 1);
    const st_status cs = st_ctx_create_ex(&p, &c);
    if (was) setenv(v2k, was, 1); else unsetenv(v2k);
    free(was);
    CHECK_OK(cs);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    st_ctx_set_dispatch(c, &cfg); /* tests choose knob paths explicitly */
    return c;
}

static st_ctx *__attribute__((unused)) make_ctx_sized(st_backend b, int64_t max_rows)
{
    return make_ctx_dims(b, max_rows, 4096);
}

static st_ctx *make_ctx(st_backend b) { return make_ctx_sized(b, 4096); }

/* A path through the decode dispatch: a rows variant, or the default chain
 * with at most one knob. */
typedef struct {
    const char *name;
    int rows, gu_rows, dn_rows;
    int knob; /* -1 none */
} path;

static void set_knob(st_ctx *c, int knob)
{
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    if (knob >= 0) cfg.active[knob] = true;
    st_ctx_set_dispatch(c, &cfg);
}

static void *to_backend(st_ctx *c, const void *host, size_t n)
{
    void *p = NULL;
    CHECK_OK(st_ctx_alloc(c, n, &p));
    CHECK_OK(st_ctx_upload(c, p, host, n));
    return p;
}

/* y (host, [nt][rows]) = mmvq on context C through path P. */
static void run_mmvq(st_ctx *c, const st_matrix *w, const float *x_host, int nt, const path *p, float *y_host)
{
    const size_t xn = sizeof(float) * (size_t)nt * (size_t)st_matrix_cols(w);
    const size_t yn = sizeof(float) * (size_t)nt * (size_t)st_matrix_rows(w);
    float *x = to_backend(c, x_host, xn);
    float *y = NULL;
    CHECK_OK(st_ctx_alloc(c, yn, (void **)&y));
    /* poison: every output must be written */
    memset(y_host, 0xff, yn);
    CHECK_OK(st_ctx_upload(c, y, y_host, yn));
    set_knob(c, p ? p->knob : -1);
    CHECK_OK(st_iq_mmvq_variant(c, w, x, nt, y, p ? p->rows : 0));
    CHECK_OK(st_ctx_sync(c));
    CHECK_OK(st_ctx_download(c, y_host, y, yn));
    st_ctx_free(c, x);
    st_ctx_free(c, y);
}

/* Every expert_grouped path into PATHS (room for 32): the default chain,
 * each rows pair, each knob of the expert chain; returns the count. */
static int __attribute__((unused)) expert_paths(path *paths)
{
    int np = 0;
    paths[np++] = (path){"default", 0, 0, 0, -1};
#define ADD_PAIR(GU, DN) paths[np++] = (path){"rows " #GU "/" #DN, 0, GU, DN, -1};
    STRATA_EXPERT_ROWS_VARIANTS(ADD_PAIR)
#undef ADD_PAIR
    const int knobs[] = {ST_KNOB_NO_SUB16_GU, ST_KNOB_IQ_STAGE_GRID_OFF, ST_KNOB_EXPERT_V2, ST_KNOB_EXPERT_V2K,
                         ST_KNOB_TSUM, ST_KNOB_GROUPED_V1, ST_KNOB_EXPERT_MMA};
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++)
        paths[np++] = (path){st_knob_label((st_knob)knobs[k]), 0, 0, 0, knobs[k]};
    return np;
}

/* Reports the first differing float and returns the number of differing
 * floats (0 when the bytes are identical). */
static size_t diff_floats(const char *what, const float *a, const float *b, size_t n)
{
    if (memcmp(a, b, n * sizeof(float)) == 0) return 0;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            if (!bad) first = i;
            bad++;
        }
    printf("MISMATCH %s: %zu of %zu floats differ; first at %zu: %.9g vs %.9g\n", what, bad, n, first,
           (double)a[first], (double)b[first]);
    return bad;
}

/* Every weight format (ST_QTYPES, the one list). */
#define ST_ALL_TYPE_(id, name, ggml, qk, bytes) ST_##id,
static const st_qtype ALL_TYPES[] = {ST_QTYPES(ST_ALL_TYPE_)};
#undef ST_ALL_TYPE_
#define N_ALL_TYPES ((int)(sizeof ALL_TYPES / sizeof ALL_TYPES[0]))

/* Every mmvq path vs the CPU reference on one shape, for each token count.
 * CHAIN_ONLY: the default chain and its knobs only, leaving out the
 * variants (rows, mma, split, wide) whose kernels do not depend on the row
 * count: for a shape there only for the default's choice by row count (the
 * two-rows kernels from 8192 rows, st_mmvq_rows_per_group) when the other
 * shapes run every variant (the racecheck size, gpu_test_size.h). */

static size_t __attribute__((unused)) g_compares, g_bad;

static void __attribute__((unused)) sweep_paths(st_ctx *cpu, st_ctx *gpu, st_qtype t, int rows, int cols, const int *nts,
                                                int n_nt, bool chain_only)
{
    st_rng r;
    st_rng_seed(&r, 1000u + (unsigned)t * 7919u + (unsigned)rows * 31u + (unsigned)cols);
    const size_t wb = (size_t)rows * st_qtype_row_bytes(t, cols);
    void *wh = malloc(wb);
    st_random_blocks(&r, t, rows, cols, wh);
    st_matrix *wc = NULL, *wg = NULL;
    CHECK_OK(st_matrix_create(cpu, t, rows, cols, wh, &wc));
    CHECK_OK(st_matrix_create(gpu, t, rows, cols, wh, &wg));
    path paths[32];
    int np = 0;
    paths[np++] = (path){"default", 0, 0, 0, -1};
    if (!chain_only) {
#define ADD_ROWS(R) paths[np++] = (path){"rows " #R, R, 0, 0, -1};
        STRATA_MMVQ_ROWS_VARIANTS(ADD_ROWS)
#undef ADD_ROWS
#define ADD_MMA(W) paths[np++] = (path){"mma" #W, STRATA_MMVQ_ID_MMA(W), 0, 0, -1};
        STRATA_MMVQ_MMA_VARIANTS(ADD_MMA)
#undef ADD_MMA
#define ADD_SPLIT(W) paths[np++] = (path){"split" #W, STRATA_MMVQ_ID_SPLIT(W), 0, 0, -1};
        STRATA_MMVQ_SPLIT_VARIANTS(ADD_SPLIT)
#undef ADD_SPLIT
        /* the wide-row variants, on rows of 128 streams only */
#define ADD_WIDE(T, R) paths[np++] = (path){"wide" #T "x" #R, STRATA_MMVQ_ID_WIDE(T, R), 0, 0, -1};
        if (cols / 32 >= ST_CANON_WIDE_UNITS) {
            STRATA_MMVQ_WIDE_VARIANTS(ADD_WIDE)
        }
#undef ADD_WIDE
    }
    paths[np++] = (path){"STRATA_OLD_IQ_MMVQ", 0, 0, 0, ST_KNOB_OLD_IQ_MMVQ};
    paths[np++] = (path){"STRATA_IQ_STAGE_GRID_MMVQ=1", 0, 0, 0, ST_KNOB_IQ_STAGE_GRID_MMVQ};
    paths[np++] = (path){"STRATA_MMVQ_ONE_ROW", 0, 0, 0, ST_KNOB_MMVQ_ONE_ROW};
    paths[np++] = (path){"STRATA_MMA_ONE_PASS", 0, 0, 0, ST_KNOB_MMA_ONE_PASS};
    for (int k = 0; k < n_nt; k++) {
        const int nt = nts[k];
        float *x = malloc(sizeof(float) * (size_t)nt * (size_t)cols);
        st_random_floats(&r, x, (size_t)nt * (size_t)cols, 1.0f);
        float *ref = malloc(sizeof(float) * (size_t)nt * (size_t)rows);
        float *y = malloc(sizeof(float) * (size_t)nt * (size_t)rows);
        run_mmvq(cpu, wc, x, nt, NULL, ref);
        for (int p = 0; p < np; p++) {
            if (racecheck_repeat(paths[p].rows, paths[p].knob, nt, rows)) continue;
            run_mmvq(gpu, wg, x, nt, &paths[p], y);
            char what[160];
            snprintf(what, sizeof what, "%s %dx%d nt=%d %s vs CPU", st_qtype_name(t), rows, cols, nt, paths[p].name);
            g_bad += diff_floats(what, y, ref, (size_t)nt * (size_t)rows) ? 1 : 0;
            g_compares++;
        }
        free(x);
        free(ref);
        free(y);
    }
    st_matrix_destroy(wc);
    st_matrix_destroy(wg);
    free(wh);
}

static void __attribute__((unused)) sweep(st_ctx *cpu, st_ctx *gpu, st_qtype t, int rows, int cols, const int *nts, int n_nt)
{
    sweep_paths(cpu, gpu, t, rows, cols, nts, n_nt, false);
}

#endif
