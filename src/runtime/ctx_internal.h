/* The context's inside, shared by ctx.c (creation, tables, decode entry
 * points) and ctx_probe.c (strata/probe.h), and the test hooks (not
 * public API: the tests link the internal libraries). */
#ifndef ST_CTX_INTERNAL_H
#define ST_CTX_INTERNAL_H

#include "strata/decode.h"
#include "strata/probe.h"
#include "backend.h"
#include "internal.h"

struct st_ctx {
    st_backend backend;
    int device; /* the index it was created on (0 on the CPU) */
    st_identity id;
    st_dispatch_config cfg;
    st_ctx_limits lim;
    st_table *table;
    const st_backend_ops *ops;
    void *b;
    st_log_fn log_fn;
    void *log_user;
    st_ctx_stats stats;
    uint64_t mma_base; /* the backend's mma_launches at the last reset */
    double test_slow; /* st_ctx_test_slow_variants */
    double test_slow_default; /* st_ctx_test_slow_default */
    size_t test_llc;  /* st_ctx_test_set_llc */
    bool check;       /* STRATA_CHECK=1 at creation: the checking mode (ctx.c) */
};

struct st_matrix {
    st_ctx *ctx;
    st_bmatrix m;
};

/* Test hook: the context then reports BYTES of last-level cache (0: the
 * real figure again). */
void st_ctx_test_set_llc(st_ctx *c, size_t bytes);
/* Test hook: the device index st_ctx_device reports (what the context runs
 * on is unchanged), so the several-devices run can be tested with CPU
 * contexts that stand for devices 0 and 1. */
void st_ctx_test_set_device(st_ctx *c, int device);

/* Test hook: on the CPU backend every rows-variant launch (a table's or a
 * forced one) then spends EXTRA times its own duration again, busy, so a
 * test can make a table that is really slower by a known factor (the gate
 * measures it like any other). 0 (the default) turns it off. */
void st_ctx_test_slow_variants(st_ctx *c, double extra);
/* Test hook: the same for the default chain's calls (a table's variants
 * then measure faster). */
void st_ctx_test_slow_default(st_ctx *c, double extra);

/* Test hook: replaces the engaged table with T (may be NULL) with no
 * check and no log line, and returns the previous one (the caller owns
 * it); st_ctx_swap_table is the checked public form. */
st_table *st_ctx_test_swap_table(st_ctx *c, st_table *t);

/* The limits the context was made for. */
const st_ctx_limits *st_ctx_limits_of(const st_ctx *c);

#endif
