/* The checking mode on the GPU (STRATA_CHECK=1, src/runtime/ctx.c): a host
 * pointer given to a decode call (x, y, ids, wts, out) and an expert id
 * outside 0..n_expert-1 held in device memory are each refused before the
 * call's kernels are queued, in one line naming the argument
 * (ids[token][slot]), and the context stays usable: the next correct calls
 * give the CPU reference's bytes. The ids are range-checked on the device
 * (kernels/check.hip): with a token stride the padding between rows is
 * never read as an id; a call captured into a graph is checked when the
 * graph is replayed and the next uncaptured call says so. Without the
 * variable the mode is off. Prints what the mode costs per call (the
 * pointer queries, the check kernel and the wait for its answer) as the
 * "STRATA_CHECK cost" line. */
#include "parity_util.h"

#include "strata/probe.h"

#include <time.h>

enum { EMBD = 256, FF = 64, NEXP = 8, TOPK = 2, ROWS = 128, COLS = 512, NT = 2 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct {
    st_ctx *c;
    st_matrix *w, *g, *u, *d;
    st_experts ex;
} setup_t;

static void make(setup_t *s, st_backend b, void *const host[4])
{
    s->c = make_ctx(b);
    CHECK_OK(st_matrix_create(s->c, ST_IQ4_XS, ROWS, COLS, host[0], &s->w));
    CHECK_OK(st_matrix_create(s->c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, host[1], &s->g));
    CHECK_OK(st_matrix_create(s->c, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, host[2], &s->u));
    CHECK_OK(st_matrix_create(s->c, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, host[3], &s->d));
    s->ex = (st_experts){s->g, s->u, s->d, NEXP};
}

static void drop(setup_t *s)
{
    st_matrix_destroy(s->w);
    st_matrix_destroy(s->g);
    st_matrix_destroy(s->u);
    st_matrix_destroy(s->d);
    st_ctx_destroy(s->c);
}

static void *dev_copy(st_ctx *c, const void *src, size_t n)
{
    void *p = NULL;
    CHECK_OK(st_ctx_alloc(c, n, &p));
    CHECK_OK(st_ctx_upload(c, p, src, n));
    return p;
}

static void expect_refused(st_status s, const char *want)
{
    if (s != ST_ERR_INVALID_ARG || !strstr(st_last_error(), want) || !strstr(st_last_error(), "STRATA_CHECK"))
        fail_msg("expected a refusal naming '%s', got %s: %s", want, st_status_str(s), st_last_error());
}

static void wrong_arguments_are_one_line_and_the_context_stays_usable(void **state)
{
    (void)state;
    int n = 0;
    if (st_device_count(ST_BACKEND_GPU, &n) != ST_OK || n < 1) skip();
    st_rng r;
    st_rng_seed(&r, 11);
    void *host[4] = {malloc((size_t)ROWS * st_qtype_row_bytes(ST_IQ4_XS, COLS)),
                     malloc((size_t)NEXP * FF * st_qtype_row_bytes(ST_IQ3_S, EMBD)),
                     malloc((size_t)NEXP * FF * st_qtype_row_bytes(ST_IQ3_S, EMBD)),
                     malloc((size_t)NEXP * EMBD * st_qtype_row_bytes(ST_IQ4_NL, FF))};
    st_random_blocks(&r, ST_IQ4_XS, ROWS, COLS, host[0]);
    st_random_blocks(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, host[1]);
    st_random_blocks(&r, ST_IQ3_S, (int64_t)NEXP * FF, EMBD, host[2]);
    st_random_blocks(&r, ST_IQ4_NL, (int64_t)NEXP * EMBD, FF, host[3]);
    float x[NT * COLS], xe[NT * EMBD], wts[NT * TOPK], y[NT * ROWS], out[NT * EMBD];
    for (int i = 0; i < NT * COLS; i++) x[i] = (float)((i * 37) % 19) - 9.0f;
    for (int i = 0; i < NT * EMBD; i++) xe[i] = (float)((i * 13) % 11) - 5.0f;
    for (int i = 0; i < NT * TOPK; i++) wts[i] = 0.25f * (float)(i + 1);
    int32_t ids[NT * TOPK] = {1, 5, 3, 7}, bad[NT * TOPK] = {1, 99, 3, 7};

    /* the CPU reference's bytes */
    setup_t cpu;
    make(&cpu, ST_BACKEND_CPU, host);
    float yref[NT * ROWS], oref[NT * EMBD];
    CHECK_OK(st_iq_mmvq(cpu.c, cpu.w, x, NT, yref));
    CHECK_OK(st_expert_grouped(cpu.c, &cpu.ex, xe, ids, wts, NT, TOPK, oref));
    drop(&cpu);

    setenv("STRATA_CHECK", "1", 1);
    setup_t g;
    make(&g, ST_BACKEND_GPU, host);
    unsetenv("STRATA_CHECK");
    float *xd = dev_copy(g.c, x, sizeof x), *xed = dev_copy(g.c, xe, sizeof xe), *wd = dev_copy(g.c, wts, sizeof wts);
    int32_t *idd = dev_copy(g.c, ids, sizeof ids), *badd = dev_copy(g.c, bad, sizeof bad);
    float *yd = dev_copy(g.c, y, sizeof y), *od = dev_copy(g.c, out, sizeof out);

    expect_refused(st_iq_mmvq(g.c, g.w, x, NT, yd), "iq_mmvq: x is host memory");
    expect_refused(st_iq_mmvq(g.c, g.w, xd, NT, y), "iq_mmvq: y is host memory");
    expect_refused(st_expert_grouped(g.c, &g.ex, xe, idd, wd, NT, TOPK, od), "expert_grouped: x is host memory");
    expect_refused(st_expert_grouped(g.c, &g.ex, xed, ids, wd, NT, TOPK, od), "expert_grouped: ids is host memory");
    expect_refused(st_expert_grouped(g.c, &g.ex, xed, idd, wts, NT, TOPK, od), "expert_grouped: wts is host memory");
    expect_refused(st_expert_grouped(g.c, &g.ex, xed, idd, wd, NT, TOPK, out), "expert_grouped: out is host memory");
    expect_refused(st_expert_grouped(g.c, &g.ex, xed, badd, wd, NT, TOPK, od), "ids[0][1] = 99 is outside 0..7");

    /* strided ids (st_expert_ffn, 3 ids per token row, the third a pad
     * holding garbage): the bad one is named by token and slot, the pads
     * are never taken for ids */
    {
        int32_t sids[NT * 3] = {1, 5, 1000, 42, 7, -5}, good[NT * 3] = {1, 5, 1000, 3, 7, -5};
        int32_t *sd = dev_copy(g.c, sids, sizeof sids), *gd = dev_copy(g.c, good, sizeof good);
        st_ffn_options fo;
        st_ffn_options_init(&fo);
        fo.ids_stride = 3;
        expect_refused(st_expert_ffn(g.c, &g.ex, &fo, xed, sd, wd, NT, TOPK, od), "ids[1][0] = 42 is outside 0..7");
        CHECK_OK(st_expert_ffn(g.c, &g.ex, &fo, xed, gd, wd, NT, TOPK, od));
        st_ctx_free(g.c, sd);
        st_ctx_free(g.c, gd);
    }
    /* captured into a graph: the check goes into the graph (no wait while
     * capturing); a replay that meets the bad id is reported by the next
     * uncaptured call, once */
    {
        st_ctx_graph *graph = NULL;
        CHECK_OK(st_ctx_capture_begin(g.c));
        const st_status cs = st_expert_grouped(g.c, &g.ex, xed, badd, wd, NT, TOPK, od);
        CHECK_OK(st_ctx_capture_end(g.c, &graph));
        CHECK_OK(cs);
        CHECK_OK(st_ctx_graph_launch(g.c, graph));
        expect_refused(st_expert_grouped(g.c, &g.ex, xed, idd, wd, NT, TOPK, od),
                       "a call captured into a graph and replayed before this one had ids[0][1] = 99");
        st_ctx_graph_destroy(g.c, graph);
    }

    /* still usable, and exact */
    CHECK_OK(st_iq_mmvq(g.c, g.w, xd, NT, yd));
    CHECK_OK(st_expert_grouped(g.c, &g.ex, xed, idd, wd, NT, TOPK, od));
    CHECK_OK(st_ctx_download(g.c, y, yd, sizeof y));
    CHECK_OK(st_ctx_download(g.c, out, od, sizeof out));
    assert_int_equal(diff_floats("mmvq after refusals vs CPU", y, yref, NT * ROWS), 0);
    assert_int_equal(diff_floats("expert_grouped after refusals vs CPU", out, oref, NT * EMBD), 0);

    /* what the mode costs: the same calls on a context without it */
    setup_t off;
    make(&off, ST_BACKEND_GPU, host);
    const int reps = 200;
    double ms[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        setup_t *s = k ? &off : &g;
        float *x2 = k ? dev_copy(s->c, x, sizeof x) : xd, *y2 = k ? dev_copy(s->c, y, sizeof y) : yd;
        float *xe2 = k ? dev_copy(s->c, xe, sizeof xe) : xed, *w2 = k ? dev_copy(s->c, wts, sizeof wts) : wd;
        int32_t *i2 = k ? dev_copy(s->c, ids, sizeof ids) : idd;
        float *o2 = k ? dev_copy(s->c, out, sizeof out) : od;
        CHECK_OK(st_ctx_sync(s->c));
        const double t0 = now_ms();
        for (int i = 0; i < reps; i++) {
            CHECK_OK(st_iq_mmvq(s->c, s->w, x2, NT, y2));
            CHECK_OK(st_expert_grouped(s->c, &s->ex, xe2, i2, w2, NT, TOPK, o2));
        }
        CHECK_OK(st_ctx_sync(s->c));
        ms[k] = now_ms() - t0;
        if (k) {
            /* without the mode the same wrong id is not looked at here (the
             * kernels would read out of bounds: not run) */
            st_ctx_free(s->c, x2); st_ctx_free(s->c, y2); st_ctx_free(s->c, xe2);
            st_ctx_free(s->c, w2); st_ctx_free(s->c, i2); st_ctx_free(s->c, o2);
        }
    }
    print_message("STRATA_CHECK cost: %.1f us per mmvq + expert_grouped pair (%.1f us with STRATA_CHECK=1, %.1f without, "
                  "%d pairs, host-timed, %d tokens, top-%d)\n",
                  1e3 * (ms[0] - ms[1]) / reps, 1e3 * ms[0] / reps, 1e3 * ms[1] / reps, reps, NT, TOPK);
    drop(&off);
    st_ctx_free(g.c, xd); st_ctx_free(g.c, xed); st_ctx_free(g.c, wd); st_ctx_free(g.c, idd);
    st_ctx_free(g.c, badd); st_ctx_free(g.c, yd); st_ctx_free(g.c, od);
    drop(&g);
    for (int i = 0; i < 4; i++) free(host[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(wrong_arguments_are_one_line_and_the_context_stays_usable)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
