/* The context as an engine uses it (CPU backend): parameters and their
 * checks, the reserved and the engine-given workspace, calls beyond the
 * limits refused with a message naming the limit before anything runs, the
 * table line through the context's own log, and two contexts used at the
 * same time from two threads giving the bytes one context gives, also on
 * one shared set of matrices (this test also runs under ThreadSanitizer in
 * CI: the cpu-tsan preset). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/decode.h"
#include "strata/probe.h"
#include "strata/reference.h"
#include "randgen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EMBD = 256, FF = 64, NEXP = 8, TOPK = 2, ROWS = 96, COLS = 512 };

typedef struct {
    st_ctx *ctx;
    st_matrix *w, *gate, *up, *down;
    st_experts ex;
} fixture;

static void *rand_rows(st_rng *r, st_qtype t, int64_t rows, int64_t cols)
{
    size_t n = (size_t)rows * st_qtype_row_bytes(t, cols);
    void *w = malloc(n);
    assert_non_null(w);
    st_random_blocks(r, t, rows, cols, w);
    return w;
}

static void make_weights(fixture *f, uint32_t seed)
{
    st_rng r;
    st_rng_seed(&r, seed);
    void *w = rand_rows(&r, ST_IQ4_XS, ROWS, COLS);
    void *g = rand_rows(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD), *u = rand_rows(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD);
    void *d = rand_rows(&r, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF);
    assert_int_equal(st_matrix_create(f->ctx, ST_IQ4_XS, ROWS, COLS, w, &f->w), ST_OK);
    assert_int_equal(st_matrix_create(f->ctx, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, g, &f->gate), ST_OK);
    assert_int_equal(st_matrix_create(f->ctx, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, u, &f->up), ST_OK);
    assert_int_equal(st_matrix_create(f->ctx, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, d, &f->down), ST_OK);
    f->ex = (st_experts){f->gate, f->up, f->down, NEXP};
    free(w);
    free(g);
    free(u);
    free(d);
}

static void drop_weights(fixture *f)
{
    st_matrix_destroy(f->w);
    st_matrix_destroy(f->gate);
    st_matrix_destroy(f->up);
    st_matrix_destroy(f->down);
}

static void cpu_params(st_ctx_params *p)
{
    st_ctx_params_init(p);
    p->backend = ST_BACKEND_CPU;
    p->max_tokens = 4;
    p->max_topk = TOPK;
    p->max_experts = NEXP;
    p->max_rows = 1024;
    p->max_cols = 1024;
}

static void params_are_checked(void **state)
{
    st_ctx_params p;
    st_ctx *c = NULL;
    cpu_params(&p);
    p.struct_size = 3;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "struct_size"));
    assert_null(c);
    cpu_params(&p);
    p.max_tokens = ST_MAX_TOKENS + 1;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "max_tokens"));
    assert_non_null(strstr(st_last_error(), "ST_MAX_TOKENS"));
    cpu_params(&p);
    p.max_experts = ST_MAX_EXPERTS + 1;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "ST_MAX_EXPERTS"));
    cpu_params(&p);
    p.stream = &p; /* a stream means a GPU */
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "stream"));
    /* a workspace smaller than st_ctx_workspace_bytes says so with both numbers */
    cpu_params(&p);
    size_t need = 0;
    assert_int_equal(st_ctx_workspace_bytes(&p, &need), ST_OK);
    assert_true(need > 0);
    void *ws = aligned_alloc(256, need);
    p.workspace = ws;
    p.workspace_bytes = need - 1;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_ERR_INVALID_ARG);
    char want[64];
    snprintf(want, sizeof want, "needs %zu", need);
    assert_non_null(strstr(st_last_error(), want));
    p.workspace_bytes = need;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_OK);
    st_ctx_destroy(c);
    free(ws);
}

/* The CPU backend has no matrix-unit expert path: the default never takes
 * it, whatever the formats (IQ3_S/IQ4_NL: the block decode's on NVIDIA) or
 * knobs; a NULL argument says the same. */
static void cpu_default_never_takes_the_matrix_units(void **state)
{
    st_ctx_params p;
    cpu_params(&p);
    fixture f;
    assert_int_equal(st_ctx_create_ex(&p, &f.ctx), ST_OK);
    make_weights(&f, 5);
    assert_int_equal(st_ctx_default_expert_mma_tokens(f.ctx, &f.ex), ST_MAX_TOKENS + 1);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    cfg.active[ST_KNOB_EXPERT_MMA] = true;
    st_ctx_set_dispatch(f.ctx, &cfg);
    assert_int_equal(st_ctx_default_expert_mma_tokens(f.ctx, &f.ex), ST_MAX_TOKENS + 1);
    assert_int_equal(st_ctx_default_expert_mma_tokens(f.ctx, NULL), ST_MAX_TOKENS + 1);
    assert_int_equal(st_ctx_default_expert_mma_tokens(NULL, &f.ex), ST_MAX_TOKENS + 1);
    drop_weights(&f);
    st_ctx_destroy(f.ctx);
}

/* A smaller limit asks for less scratch, and the defaults are the largest. */
static void workspace_follows_the_limits(void **state)
{
    st_ctx_params p;
    cpu_params(&p);
    size_t small = 0, big = 0, dflt = 0;
    assert_int_equal(st_ctx_workspace_bytes(&p, &small), ST_OK);
    p.max_tokens = 8 <= ST_MAX_TOKENS ? 8 : ST_MAX_TOKENS;
    p.max_cols = 4096;
    p.max_rows = 4096;
    assert_int_equal(st_ctx_workspace_bytes(&p, &big), ST_OK);
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_CPU;
    assert_int_equal(st_ctx_workspace_bytes(&p, &dflt), ST_OK);
    assert_true(small < big);
    assert_true(big <= dflt);
}

static void calls_beyond_the_limits_are_refused(void **state)
{
    st_ctx_params p;
    cpu_params(&p);
    fixture f = {0};
    assert_int_equal(st_ctx_create_ex(&p, &f.ctx), ST_OK);
    make_weights(&f, 7);
    float *x = calloc((size_t)ST_MAX_TOKENS * COLS, sizeof(float)), *y = calloc((size_t)ST_MAX_TOKENS * ROWS, sizeof(float));
    float *out = calloc((size_t)ST_MAX_TOKENS * EMBD, sizeof(float));
    int32_t ids[ST_MAX_PAIRS] = {0};
    float wts[ST_MAX_PAIRS] = {0};
    st_ctx_stats before, after;
    st_ctx_stats_init(&before);
    st_ctx_stats_init(&after);
    st_ctx_get_stats(f.ctx, &before);
    memset(y, 0x7f, sizeof(float) * ROWS);
    assert_int_equal(st_iq_mmvq(f.ctx, f.w, x, 5, y), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "max_tokens"));
    assert_int_equal(((uint32_t *)y)[0], 0x7f7f7f7fu); /* nothing ran */
    assert_int_equal(st_expert_grouped(f.ctx, &f.ex, x, ids, wts, 1, TOPK + 1, out), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "max_topk"));
    st_ctx_get_stats(f.ctx, &after);
    assert_memory_equal(&before, &after, sizeof before); /* and nothing was counted */
    /* a matrix longer than max_cols is refused when it is made */
    st_matrix *wide = NULL;
    st_rng r;
    st_rng_seed(&r, 1);
    void *wb = rand_rows(&r, ST_Q8_0, 2, 2048);
    assert_int_equal(st_matrix_create(f.ctx, ST_Q8_0, 2, 2048, wb, &wide), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "max_cols"));
    assert_null(wide);
    free(wb);
    /* within the limits the calls run */
    assert_int_equal(st_iq_mmvq(f.ctx, f.w, x, 4, y), ST_OK);
    assert_int_equal(st_expert_grouped(f.ctx, &f.ex, x, ids, wts, 4, TOPK, out), ST_OK);
    drop_weights(&f);
    st_ctx_destroy(f.ctx);
    free(x);
    free(y);
    free(out);
}

typedef struct {
    int lines;
    char last[512];
} log_box;

static void box_line(void *user, const char *line)
{
    log_box *b = user;
    b->lines++;
    snprintf(b->last, sizeof b->last, "%s", line);
}

static void global_line(void *user, const char *line) { (*(int *)user)++; }

/* The table line reaches the context's log; the process's sink sees
 * nothing of it. */
static void table_line_goes_to_the_context_log(void **state)
{
    int global = 0;
    st_set_log(global_line, &global);
    log_box box = {0};
    st_ctx_params p;
    cpu_params(&p);
    p.log_fn = box_line;
    p.log_user = &box;
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create_ex(&p, &c), ST_OK);
    char path[64];
    snprintf(path, sizeof path, "/tmp/strata-ctx-test-%d.table", (int)getpid());
    char hdr[256];
    st_identity_header(st_ctx_identity(c), hdr, sizeof hdr);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "%s\nmmvq iq4_xs %d %d 2\n", hdr, ROWS, COLS);
    fclose(fp);
    assert_int_equal(st_ctx_load_table(c, path), ST_OK);
    assert_int_equal(box.lines, 1);
    assert_non_null(strstr(box.last, "decode tuning: 1 shapes from"));
    assert_int_equal(global, 0);
    unlink(path);
    assert_int_equal(st_ctx_load_table(c, path), ST_ERR_IO);
    assert_int_equal(box.lines, 2);
    assert_non_null(strstr(box.last, "cannot read"));
    assert_int_equal(global, 0);
    st_ctx_destroy(c);
    st_set_log(NULL, NULL);
}

/* ---- two contexts, two threads ------------------------------------------ */
enum { ROUNDS = 6 };

typedef struct {
    fixture f;
    float y[ROUNDS][4 * ROWS];
    float out[ROUNDS][4 * EMBD];
    const float *x;
    const int32_t *ids;
    const float *wts;
} worker;

/* Each round sets the stream first (NULL: the CPU has none), as an engine
 * moving its context between streams does. */
static void run_calls(worker *w)
{
    for (int i = 0; i < ROUNDS; i++) {
        assert_int_equal(st_ctx_set_stream(w->f.ctx, NULL), ST_OK);
        const int nt = 1 + i % 4;
        assert_int_equal(st_iq_mmvq(w->f.ctx, w->f.w, w->x, nt, w->y[i]), ST_OK);
        assert_int_equal(st_expert_grouped(w->f.ctx, &w->f.ex, w->x, w->ids, w->wts, nt, TOPK, w->out[i]), ST_OK);
    }
}

static void *thread_main(void *arg)
{
    run_calls(arg);
    return NULL;
}

/* The thread tests' inputs: 4 tokens (malloc'd) and their routing. */
static float *thread_inputs(uint32_t seed, int32_t *ids, float *wts)
{
    st_rng r;
    st_rng_seed(&r, seed);
    float *x = malloc(sizeof(float) * 4 * COLS);
    st_random_floats(&r, x, 4 * COLS, 1.0f);
    st_random_routing(&r, 4, TOPK, NEXP, ids, wts);
    return x;
}

/* W[2] alone (the reference), then W[0] and W[1] in two threads at once:
 * their bytes must be W[2]'s. */
static void race_two(worker *w)
{
    run_calls(&w[2]);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, thread_main, &w[i]), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        assert_memory_equal(w[i].y, w[2].y, sizeof w[2].y);
        assert_memory_equal(w[i].out, w[2].out, sizeof w[2].out);
    }
}

static void two_contexts_in_two_threads(void **state)
{
    static worker w[3];
    memset(w, 0, sizeof w);
    int32_t ids[4 * TOPK];
    float wts[4 * TOPK];
    float *x = thread_inputs(99, ids, wts);
    for (int i = 0; i < 3; i++) {
        st_ctx_params p;
        cpu_params(&p);
        assert_int_equal(st_ctx_create_ex(&p, &w[i].f.ctx), ST_OK);
        make_weights(&w[i].f, 5);
        w[i].x = x;
        w[i].ids = ids;
        w[i].wts = wts;
    }
    race_two(w);
    for (int i = 0; i < 3; i++) {
        drop_weights(&w[i].f);
        st_ctx_destroy(w[i].f.ctx);
    }
    free(x);
}

/* One set of matrices, made by a third context, used by two contexts in
 * two threads at the same time (a matrix is read-only once made): the bytes
 * one context gives alone. */
static void one_matrix_two_contexts_two_threads(void **state)
{
    static worker w[3];
    memset(w, 0, sizeof w);
    int32_t ids[4 * TOPK];
    float wts[4 * TOPK];
    float *x = thread_inputs(77, ids, wts);
    st_ctx_params p;
    cpu_params(&p);
    fixture owner = {0};
    assert_int_equal(st_ctx_create_ex(&p, &owner.ctx), ST_OK);
    make_weights(&owner, 6);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(st_ctx_create_ex(&p, &w[i].f.ctx), ST_OK);
        w[i].f.w = owner.w;
        assert_int_equal(st_experts_make(w[i].f.ctx, owner.gate, owner.up, owner.down, NEXP, &w[i].f.ex), ST_OK);
        w[i].x = x;
        w[i].ids = ids;
        w[i].wts = wts;
    }
    race_two(w);
    for (int i = 0; i < 3; i++) st_ctx_destroy(w[i].f.ctx);
    drop_weights(&owner);
    st_ctx_destroy(owner.ctx);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(params_are_checked),
        cmocka_unit_test(workspace_follows_the_limits),
        cmocka_unit_test(cpu_default_never_takes_the_matrix_units),
        cmocka_unit_test(calls_beyond_the_limits_are_refused),
        cmocka_unit_test(table_line_goes_to_the_context_log),
        cmocka_unit_test(two_contexts_in_two_threads),
        cmocka_unit_test(one_matrix_two_contexts_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
