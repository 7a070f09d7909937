/* ggml's operations as calls (issue 24) on the GPU, byte-compared with the
 * CPU backend (itself byte-compared with the reference by
 * tests/runtime/engine_ops_test.c): the dense call with row strides, the
 * expert matrix call (MUL_MAT_ID) with per-slot activations and outputs and
 * an ids row stride, expert ids out of range on every expert path, the
 * fused FFN with every combine, biases and strides (the composed launches
 * beside the fused kernels), a matrix used by a second context, and the
 * stream set per context. */
#include "parity_util.h"

static const uint32_t CANARY = 0x7fc01234u;
static size_t g_cmp, g_mis;

static float *canaries(size_t n)
{
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) memcpy(f + i, &CANARY, 4);
    return f;
}

/* N floats of backend memory at P, to the host. */
static float *fetch(st_ctx *c, const void *p, size_t n)
{
    float *h = malloc(n * sizeof *h);
    CHECK_OK(st_ctx_sync(c));
    CHECK_OK(st_ctx_download(c, h, p, n * sizeof *h));
    return h;
}

static void compare(const char *what, const float *a, const float *b, size_t n)
{
    g_mis += diff_floats(what, a, b, n) ? 1 : 0;
    g_cmp++;
}

/* ---- MUL_MAT with row strides ---------------------------------------------- */
static void strided_dense(st_ctx *cpu, st_ctx *gpu, st_qtype t, int rows, int cols)
{
    st_rng r;
    st_rng_seed(&r, 500u + (unsigned)t);
    void *wh = malloc((size_t)rows * st_qtype_row_bytes(t, cols));
    st_random_blocks(&r, t, rows, cols, wh);
    st_matrix *wc = NULL, *wg = NULL;
    CHECK_OK(st_matrix_create(cpu, t, rows, cols, wh, &wc));
    CHECK_OK(st_matrix_create(gpu, t, rows, cols, wh, &wg));
    const int nts[] = {1, 2, 3, 8, 16, 32};
    const int64_t xss[] = {cols, cols + 64}, yss[] = {rows, rows + 5};
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++)
        for (int s = 0; s < 4; s++) {
            const int nt = nts[i];
            const int64_t xs = xss[s & 1], ys = yss[s >> 1];
            float *x = malloc(sizeof(float) * (size_t)(nt * xs));
            st_random_floats(&r, x, (size_t)(nt * xs), 1.0f);
            float *yc = canaries((size_t)(nt * ys));
            float *xd = to_backend(gpu, x, sizeof(float) * (size_t)(nt * xs));
            float *yd = to_backend(gpu, yc, sizeof(float) * (size_t)(nt * ys));
            CHECK_OK(st_iq_mmvq_strided(cpu, wc, x, xs, nt, yc, ys));
            CHECK_OK(st_iq_mmvq_strided(gpu, wg, xd, xs, nt, yd, ys));
            float *yg = fetch(gpu, yd, (size_t)(nt * ys));
            char what[160];
            snprintf(what, sizeof what, "strided %s %dx%d nt=%d x_stride %lld y_stride %lld", st_qtype_name(t), rows,
                     cols, nt, (long long)xs, (long long)ys);
            compare(what, yg, yc, (size_t)(nt * ys)); /* the gaps too: canaries on both */
            st_ctx_free(gpu, xd);
            st_ctx_free(gpu, yd);
            free(x);
            free(yc);
            free(yg);
        }
    st_matrix_destroy(wc);
    st_matrix_destroy(wg);
    free(wh);
}

static void strided_dense_matches_cpu(void **state)
{
    (void)state;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    strided_dense(cpu, gpu, ST_IQ3_S, 300, 1024);
    strided_dense(cpu, gpu, ST_Q4_K, 256, 512);
    strided_dense(cpu, gpu, ST_IQ4_NL, 129, 4096);
    strided_dense(cpu, gpu, ST_MXFP4, 64, 256);
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    printf("strided dense: %zu compares, %zu mismatches\n", g_cmp, g_mis);
    assert_int_equal(g_mis, 0);
}

/* ---- MUL_MAT_ID ---------------------------------------------------------------- */
enum { NEXP = 8, TOPK = 4 };

static void expert_mat(st_ctx *cpu, st_ctx *gpu, st_qtype t, int rows, int cols, int x_slots)
{
    st_rng r;
    st_rng_seed(&r, 900u + (unsigned)t * 3u + (unsigned)x_slots);
    void *wh = malloc((size_t)NEXP * (size_t)rows * st_qtype_row_bytes(t, cols));
    st_random_blocks(&r, t, (int64_t)NEXP * rows, cols, wh);
    st_matrix *wc = NULL, *wg = NULL;
    CHECK_OK(st_matrix_create(cpu, t, (int64_t)NEXP * rows, cols, wh, &wc));
    CHECK_OK(st_matrix_create(gpu, t, (int64_t)NEXP * rows, cols, wh, &wg));
    const int nts[] = {1, 3, 8, 32};
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++)
        for (int spaced = 0; spaced < 2; spaced++) {
            const int nt = nts[i];
            const int64_t is = TOPK + 2 * spaced;
            const int64_t xss = x_slots == 1 ? 0 : cols + 32 * spaced;
            const int64_t xts = x_slots == 1 ? cols + 32 * spaced : xss * TOPK + 16 * spaced;
            const int64_t yss = rows + 3 * spaced, yts = yss * TOPK + 5 * spaced;
            int32_t *ids = malloc(sizeof(int32_t) * (size_t)(nt * is));
            for (int j = 0; j < nt * is; j++) ids[j] = (int32_t)(st_rng_u32(&r) % NEXP);
            ids[0] = NEXP;                            /* out of range: zeros */
            if (nt > 1) ids[is + TOPK - 1] = -1;
            float *x = malloc(sizeof(float) * (size_t)(nt * xts));
            st_random_floats(&r, x, (size_t)(nt * xts), 1.0f);
            float *yc = canaries((size_t)(nt * yts));
            float *xd = to_backend(gpu, x, sizeof(float) * (size_t)(nt * xts));
            int32_t *idd = to_backend(gpu, ids, sizeof(int32_t) * (size_t)(nt * is));
            float *yd = to_backend(gpu, yc, sizeof(float) * (size_t)(nt * yts));
            CHECK_OK(st_expert_mat(cpu, wc, NEXP, x, x_slots, xss, xts, ids, is, nt, TOPK, yc, yss, yts));
            CHECK_OK(st_expert_mat(gpu, wg, NEXP, xd, x_slots, xss, xts, idd, is, nt, TOPK, yd, yss, yts));
            float *yg = fetch(gpu, yd, (size_t)(nt * yts));
            char what[200];
            snprintf(what, sizeof what, "expert_mat %s %d x%d/%d x_slots %d nt=%d spaced %d", st_qtype_name(t), NEXP,
                     rows, cols, x_slots, nt, spaced);
            compare(what, yg, yc, (size_t)(nt * yts));
            st_ctx_free(gpu, xd);
            st_ctx_free(gpu, idd);
            st_ctx_free(gpu, yd);
            free(ids);
            free(x);
            free(yc);
            free(yg);
        }
    st_matrix_destroy(wc);
    st_matrix_destroy(wg);
    free(wh);
}

static void expert_mat_matches_cpu(void **state)
{
    (void)state;
    g_cmp = g_mis = 0;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    for (int i = 0; i < N_ALL_TYPES; i++) {
        const st_qtype t = ALL_TYPES[i];
        expert_mat(cpu, gpu, t, 64, 512, 1);         /* gate / up: the token's one vector */
        expert_mat(cpu, gpu, t, 96, 256, TOPK);      /* down: a vector per slot */
    }
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    printf("expert_mat: %zu compares, %zu mismatches\n", g_cmp, g_mis);
    assert_int_equal(g_mis, 0);
}

/* ---- expert ids out of range, every expert path ------------------------------- */
static void out_of_range_ids_match_cpu_on_every_path(void **state)
{
    (void)state;
    g_cmp = g_mis = 0;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    enum { EMBD = 512, FF = 128 };
    st_rng r;
    st_rng_seed(&r, 4242);
    void *h[3];
    const size_t gb = (size_t)NEXP * FF * st_qtype_row_bytes(ST_IQ3_S, EMBD);
    const size_t db = (size_t)NEXP * EMBD * st_qtype_row_bytes(ST_IQ4_NL, FF);
    h[0] = malloc(gb);
    h[1] = malloc(gb);
    h[2] = malloc(db);
    st_random_blocks(&r, ST_IQ3_S, NEXP * FF, EMBD, h[0]);
    st_random_blocks(&r, ST_IQ3_S, NEXP * FF, EMBD, h[1]);
    st_random_blocks(&r, ST_IQ4_NL, NEXP * EMBD, FF, h[2]);
    st_matrix *m[2][3];
    st_ctx *cs[2] = {cpu, gpu};
    st_experts ex[2];
    for (int c = 0; c < 2; c++) {
        CHECK_OK(st_matrix_create(cs[c], ST_IQ3_S, NEXP * FF, EMBD, h[0], &m[c][0]));
        CHECK_OK(st_matrix_create(cs[c], ST_IQ3_S, NEXP * FF, EMBD, h[1], &m[c][1]));
        CHECK_OK(st_matrix_create(cs[c], ST_IQ4_NL, NEXP * EMBD, FF, h[2], &m[c][2]));
        CHECK_OK(st_experts_make(cs[c], m[c][0], m[c][1], m[c][2], NEXP, &ex[c]));
    }
    path paths[32];
    const int np = expert_paths(paths);
    const int32_t bad[] = {-1, NEXP, INT32_MIN, INT32_MAX, NEXP + 1000};
    const int nts[] = {1, 4, 32};
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++) {
        const int nt = nts[i];
        int32_t ids[ST_MAX_PAIRS];
        float w[ST_MAX_PAIRS];
        st_random_routing(&r, nt, TOPK, NEXP, ids, w);
        for (int p = 0; p < nt * TOPK; p += 3) ids[p] = bad[(p / 3) % 5];
        float *x = malloc(sizeof(float) * (size_t)nt * EMBD);
        st_random_floats(&r, x, (size_t)nt * EMBD, 1.0f);
        float *ref = malloc(sizeof(float) * (size_t)nt * EMBD);
        CHECK_OK(st_expert_grouped(cpu, &ex[0], x, ids, w, nt, TOPK, ref));
        float *xd = to_backend(gpu, x, sizeof(float) * (size_t)nt * EMBD);
        int32_t *idd = to_backend(gpu, ids, sizeof(int32_t) * (size_t)(nt * TOPK));
        float *wd = to_backend(gpu, w, sizeof(float) * (size_t)(nt * TOPK));
        float *od = NULL;
        CHECK_OK(st_ctx_alloc(gpu, sizeof(float) * (size_t)nt * EMBD, (void **)&od));
        for (int p = 0; p < np; p++) {
            set_knob(gpu, paths[p].knob);
            CHECK_OK(st_expert_grouped_variant(gpu, &ex[1], xd, idd, wd, nt, TOPK, od, paths[p].gu_rows, paths[p].dn_rows));
            float *y = fetch(gpu, od, (size_t)nt * EMBD);
            char what[160];
            snprintf(what, sizeof what, "ids out of range nt=%d %s", nt, paths[p].name);
            compare(what, y, ref, (size_t)nt * EMBD);
            free(y);
        }
        set_knob(gpu, -1);
        st_ctx_free(gpu, xd);
        st_ctx_free(gpu, idd);
        st_ctx_free(gpu, wd);
        st_ctx_free(gpu, od);
        free(x);
        free(ref);
    }
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < 3; j++) st_matrix_destroy(m[c][j]);
    for (int j = 0; j < 3; j++) free(h[j]);
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    printf("ids out of range: %zu compares, %zu mismatches\n", g_cmp, g_mis);
    assert_int_equal(g_mis, 0);
}

/* ---- the FFN, sharing, streams -------------------------------------------------- */
static void ffn_sharing_and_streams(void **state)
{
    (void)state;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *a = make_ctx(ST_BACKEND_GPU), *b = make_ctx(ST_BACKEND_GPU);
    enum { EMBD = 256, FF = 64, NT = 3 };
    st_rng r;
    st_rng_seed(&r, 77);
    void *h[3];
    h[0] = malloc((size_t)NEXP * FF * st_qtype_row_bytes(ST_Q4_K, EMBD));
    h[1] = malloc((size_t)NEXP * FF * st_qtype_row_bytes(ST_Q4_K, EMBD));
    h[2] = malloc((size_t)NEXP * EMBD * st_qtype_row_bytes(ST_Q8_0, FF));
    st_random_blocks(&r, ST_Q4_K, NEXP * FF, EMBD, h[0]);
    st_random_blocks(&r, ST_Q4_K, NEXP * FF, EMBD, h[1]);
    st_random_blocks(&r, ST_Q8_0, NEXP * EMBD, FF, h[2]);
    st_matrix *mc[3], *mg[3];
    for (int j = 0; j < 3; j++) {
        const st_qtype t = j < 2 ? ST_Q4_K : ST_Q8_0;
        const int rows = j < 2 ? NEXP * FF : NEXP * EMBD, cols = j < 2 ? EMBD : FF;
        CHECK_OK(st_matrix_create(cpu, t, rows, cols, h[j], &mc[j]));
        CHECK_OK(st_matrix_create(a, t, rows, cols, h[j], &mg[j]));
    }
    st_experts exc, exg;
    CHECK_OK(st_experts_make(cpu, mc[0], mc[1], mc[2], NEXP, &exc));
    CHECK_OK(st_experts_make(b, mg[0], mg[1], mg[2], NEXP, &exg)); /* a's matrices, b's set */
    float x[NT * (EMBD + 8)], w[NT * TOPK];
    int32_t ids[NT * TOPK];
    st_random_floats(&r, x, sizeof x / sizeof x[0], 1.0f);
    st_random_routing(&r, NT, TOPK, NEXP, ids, w);
    float ref[NT * EMBD];
    st_ffn_options o;
    st_ffn_options_init(&o);
    o.x_stride = EMBD + 8;
    CHECK_OK(st_expert_ffn(cpu, &exc, &o, x, ids, w, NT, TOPK, ref));
    float *xd = to_backend(b, x, sizeof x), *wd = to_backend(b, w, sizeof w);
    int32_t *idd = to_backend(b, ids, sizeof ids);
    float *od = NULL;
    CHECK_OK(st_ctx_alloc(b, sizeof ref, (void **)&od));
    /* b on a's stream, then on its own again */
    void *own = st_ctx_stream(b);
    CHECK_OK(st_ctx_set_stream(b, st_ctx_stream(a)));
    assert_ptr_equal(st_ctx_stream(b), st_ctx_stream(a));
    CHECK_OK(st_expert_ffn(b, &exg, &o, xd, idd, wd, NT, TOPK, od));
    float *y = fetch(b, od, NT * EMBD);
    compare("ffn defaults, x_stride, a's matrices on b, on a's stream", y, ref, NT * EMBD);
    free(y);
    CHECK_OK(st_ctx_set_stream(b, NULL));
    assert_ptr_equal(st_ctx_stream(b), own);
    /* every combine, with and without biases, strided ids, weights and
     * outputs (spaced 1), strided ids and weights only (spaced 2: llama.cpp's
     * layout, the fused kernels after packing them), ids out of range: the
     * CPU's bytes */
    float bias[2 * NEXP * FF + NEXP * EMBD];
    st_random_floats(&r, bias, sizeof bias / sizeof bias[0], 1.0f);
    float *bd = to_backend(b, bias, sizeof bias);
    enum { OS = EMBD + 3, IS = TOPK + 1 };
    int32_t ids2[NT * IS];
    float w2[NT * IS];
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < IS; k++) {
            ids2[t * IS + k] = k < TOPK ? ids[t * TOPK + k] : 99;
            w2[t * IS + k] = k < TOPK ? w[t * TOPK + k] : 5.0f;
        }
    ids2[IS + 1] = -1;
    int32_t *id2d = to_backend(b, ids2, sizeof ids2);
    float *w2d = to_backend(b, w2, sizeof w2);
    float *o2d = NULL;
    CHECK_OK(st_ctx_alloc(b, sizeof(float) * NT * OS, (void **)&o2d));
    const st_activation acts[] = {ST_ACT_SILU, ST_ACT_GELU, ST_ACT_SWIGLU_OAI};
    for (int a_ = 0; a_ < 3; a_++)
        for (int bias_on = 0; bias_on < 2; bias_on++)
            for (int spaced = 0; spaced < 3; spaced++) {
                st_ffn_options oc, og;
                st_ffn_options_init(&oc);
                oc.act = acts[a_];
                oc.limit = 0.05f;
                oc.x_stride = EMBD + 8;
                if (spaced) {
                    oc.ids_stride = IS;
                    oc.wts_stride = IS;
                    oc.out_stride = spaced == 1 ? OS : 0;
                }
                og = oc;
                if (bias_on) {
                    oc.gate_bias = bias;
                    oc.up_bias = bias + NEXP * FF;
                    oc.down_bias = bias + 2 * NEXP * FF;
                    og.gate_bias = bd;
                    og.up_bias = bd + NEXP * FF;
                    og.down_bias = bd + 2 * NEXP * FF;
                }
                float *yc = canaries(NT * OS), *zero = canaries(NT * OS);
                CHECK_OK(st_ctx_upload(b, o2d, zero, sizeof(float) * NT * OS));
                CHECK_OK(st_expert_ffn(cpu, &exc, &oc, x, spaced ? ids2 : ids, spaced ? w2 : w, NT, TOPK, yc));
                CHECK_OK(st_expert_ffn(b, &exg, &og, xd, spaced ? id2d : idd, spaced ? w2d : wd, NT, TOPK, o2d));
                float *yg = fetch(b, o2d, NT * OS);
                char what[120];
                snprintf(what, sizeof what, "ffn act %d bias %d spaced %d", (int)acts[a_], bias_on, spaced);
                compare(what, yg, yc, spaced == 1 ? NT * OS : NT * EMBD);
                free(yc);
                free(zero);
                free(yg);
            }
    st_ctx_free(b, bd);
    st_ctx_free(b, id2d);
    st_ctx_free(b, w2d);
    st_ctx_free(b, o2d);
    st_ctx_free(b, xd);
    st_ctx_free(b, wd);
    st_ctx_free(b, idd);
    st_ctx_free(b, od);
    for (int j = 0; j < 3; j++) {
        st_matrix_destroy(mc[j]);
        st_matrix_destroy(mg[j]);
        free(h[j]);
    }
    st_ctx_destroy(b);
    st_ctx_destroy(a);
    st_ctx_destroy(cpu);
    assert_int_equal(g_mis, 0);
}

/* ---- the in-place layout (st_matrix_wrap) ------------------------------------- */
/* Every format, ggml's blocks uploaded as an engine holds them and wrapped
 * (at a base on the blocks' boundary, not more aligned: an over-wide load
 * faults), against the CPU reference at n_tokens 1..32 on every path the
 * in-place layout has (the default chain, the matrix-unit variants, the
 * grid-staging knob), on a 32-stream, a two-row and a 128-stream shape;
 * expert sets in place on the default chain and the matrix units, and
 * st_expert_mat. */
static void in_place_dense(st_ctx *cpu, st_ctx *gpu, st_qtype t, int rows, int cols, bool every_nt, bool aligned)
{
    st_rng r;
    st_rng_seed(&r, 7000u + (unsigned)t * 13u + (unsigned)cols);
    const size_t wb = (size_t)rows * st_qtype_row_bytes(t, cols);
    void *wh = malloc(wb);
    st_random_blocks(&r, t, rows, cols, wh);
    const size_t a = (size_t)st_qtype_block_bytes(t) & (size_t)-st_qtype_block_bytes(t);
    /* 256-aligned allocation + the boundary itself; ALIGNED: at the
     * allocation's start, at 1 and 2 tokens, where a 16-aligned base and
     * row stride send the 18-byte blocks through shared memory at one
     * token on the rows of one warp or more (dot.h st_coop_blocks: the
     * default chain and its knobs there; 300 x 1024 and 8192 x 256 take
     * sub-warp rows and the per-lane loads at that base) */
    const size_t off = aligned ? 0 : a < 16 ? a : 16;
    uint8_t *raw = NULL;
    CHECK_OK(st_ctx_alloc(gpu, wb + off, (void **)&raw));
    CHECK_OK(st_ctx_upload(gpu, raw + off, wh, wb));
    st_matrix *wc = NULL, *wi = NULL;
    CHECK_OK(st_matrix_create(cpu, t, rows, cols, wh, &wc));
    CHECK_OK(st_matrix_wrap(gpu, t, rows, cols, raw + off, &wi));
    path paths[16];
    int np = 0;
    paths[np++] = (path){"default", 0, 0, 0, -1};
    /* at the racecheck size the 8192-row shape (there for the two-row
     * kernels the default picks by row count) runs the default chain only:
     * the matrix-unit kernels do not depend on the row count and run on
     * the other shapes (this shape's rows of 8 units, a partial round,
     * still reach the mma kernels through the default chain at 9-32
     * tokens, 6-32 for iq3_s/iq4_xs/iq4_nl on NVIDIA) */
    const bool race = racecheck_size();
    if (!(race && rows >= 8192) && !aligned) {
#define ADD_MMA(W) paths[np++] = (path){"mma" #W, STRATA_MMVQ_ID_MMA(W), 0, 0, -1};
        STRATA_MMVQ_MMA_VARIANTS(ADD_MMA)
#undef ADD_MMA
    }
    paths[np++] = (path){"STRATA_IQ_STAGE_GRID_MMVQ=1", 0, 0, 0, ST_KNOB_IQ_STAGE_GRID_MMVQ};
    paths[np++] = (path){"STRATA_MMVQ_ONE_ROW", 0, 0, 0, ST_KNOB_MMVQ_ONE_ROW};
    paths[np++] = (path){"STRATA_MMA_ONE_PASS", 0, 0, 0, ST_KNOB_MMA_ONE_PASS};
    /* every count on the small shape, the buckets' edges on the others; at
     * the racecheck size one count per kernel (gpu_test_size.h) */
    static const int some[] = {1, 2, 3, 4, 5, 6, 8, 9, 16, 17, 24, 25, 32}, one_each[] = TEST_NT_PER_KERNEL;
    const int *counts = some; /* NULL: every count 1..nn */
    int nn = (int)(sizeof some / sizeof some[0]);
    if (aligned) {
        nn = 2; /* some's 1 and 2 */
    } else if (every_nt && !sanitizer_size()) {
        counts = NULL;
        nn = ST_MAX_TOKENS;
    } else if (race) {
        counts = one_each;
        nn = (int)(sizeof one_each / sizeof one_each[0]);
    }
    for (int k = 0; k < nn; k++) {
        const int nt = counts ? counts[k] : k + 1;
        float *x = malloc(sizeof(float) * (size_t)nt * (size_t)cols);
        st_random_floats(&r, x, (size_t)nt * (size_t)cols, 1.0f);
        float *ref = malloc(sizeof(float) * (size_t)nt * (size_t)rows), *y = malloc(sizeof(float) * (size_t)nt * (size_t)rows);
        run_mmvq(cpu, wc, x, nt, NULL, ref);
        for (int p = 0; p < np; p++) {
            if (racecheck_repeat(paths[p].rows, paths[p].knob, nt, rows)) continue;
            run_mmvq(gpu, wi, x, nt, &paths[p], y);
            char what[160];
            snprintf(what, sizeof what, "in place%s %s %dx%d nt=%d %s", aligned ? " (16-aligned)" : "", st_qtype_name(t), rows, cols,
                     nt, paths[p].name);
            compare(what, y, ref, (size_t)nt * (size_t)rows);
        }
        free(x);
        free(ref);
        free(y);
    }
    set_knob(gpu, -1);
    st_matrix_destroy(wc);
    st_matrix_destroy(wi);
    st_ctx_free(gpu, raw);
    free(wh);
}

static void in_place_experts(st_ctx *cpu, st_ctx *gpu, st_qtype tg, st_qtype td, int embd, int ff)
{
    st_rng r;
    st_rng_seed(&r, 8100u + (unsigned)tg * 17u + (unsigned)td);
    void *h[3];
    uint8_t *d[3];
    size_t n[3];
    const st_qtype ty[3] = {tg, tg, td};
    const int64_t rows[3] = {(int64_t)NEXP * ff, (int64_t)NEXP * ff, (int64_t)NEXP * embd};
    const int64_t cols[3] = {embd, embd, ff};
    st_matrix *mc[3], *mi[3];
    for (int j = 0; j < 3; j++) {
        n[j] = (size_t)rows[j] * st_qtype_row_bytes(ty[j], cols[j]);
        h[j] = malloc(n[j]);
        st_random_blocks(&r, ty[j], rows[j], cols[j], h[j]);
        d[j] = to_backend(gpu, h[j], n[j]);
        CHECK_OK(st_matrix_create(cpu, ty[j], rows[j], cols[j], h[j], &mc[j]));
        CHECK_OK(st_matrix_wrap(gpu, ty[j], rows[j], cols[j], d[j], &mi[j]));
    }
    st_experts ec, ei;
    CHECK_OK(st_experts_make(cpu, mc[0], mc[1], mc[2], NEXP, &ec));
    CHECK_OK(st_experts_make(gpu, mi[0], mi[1], mi[2], NEXP, &ei));
    const int nts[] = {1, 2, 4, 8, 9, 16, 24, 32};
    const int knobs[] = {-1, ST_KNOB_EXPERT_MMA, ST_KNOB_IQ_STAGE_GRID_OFF};
    for (size_t i = 0; i < sizeof nts / sizeof nts[0]; i++) {
        const int nt = nts[i];
        int32_t ids[ST_MAX_PAIRS];
        float w[ST_MAX_PAIRS];
        st_random_routing(&r, nt, TOPK, NEXP, ids, w);
        float *x = malloc(sizeof(float) * (size_t)nt * (size_t)embd), *ref = malloc(sizeof(float) * (size_t)nt * (size_t)embd);
        st_random_floats(&r, x, (size_t)nt * (size_t)embd, 1.0f);
        CHECK_OK(st_expert_grouped(cpu, &ec, x, ids, w, nt, TOPK, ref));
        float *xd = to_backend(gpu, x, sizeof(float) * (size_t)nt * (size_t)embd);
        int32_t *idd = to_backend(gpu, ids, sizeof(int32_t) * (size_t)(nt * TOPK));
        float *wd = to_backend(gpu, w, sizeof(float) * (size_t)(nt * TOPK));
        float *od = NULL;
        CHECK_OK(st_ctx_alloc(gpu, sizeof(float) * (size_t)nt * (size_t)embd, (void **)&od));
        for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
            set_knob(gpu, knobs[k]);
            CHECK_OK(st_expert_grouped(gpu, &ei, xd, idd, wd, nt, TOPK, od));
            float *y = fetch(gpu, od, (size_t)nt * (size_t)embd);
            char what[160];
            snprintf(what, sizeof what, "in place experts %s/%s %d/%d nt=%d %s", st_qtype_name(tg), st_qtype_name(td),
                     embd, ff, nt, knobs[k] < 0 ? "default" : st_knob_label((st_knob)knobs[k]));
            compare(what, y, ref, (size_t)nt * (size_t)embd);
            free(y);
        }
        set_knob(gpu, -1);
        /* MUL_MAT_ID in place: the gate matrix, per-token vectors */
        float *yc = malloc(sizeof(float) * (size_t)nt * TOPK * (size_t)ff), *yd = NULL;
        CHECK_OK(st_ctx_alloc(gpu, sizeof(float) * (size_t)nt * TOPK * (size_t)ff, (void **)&yd));
        CHECK_OK(st_expert_mat(cpu, mc[0], NEXP, x, 1, 0, embd, ids, TOPK, nt, TOPK, yc, ff, (int64_t)ff * TOPK));
        CHECK_OK(st_expert_mat(gpu, mi[0], NEXP, xd, 1, 0, embd, idd, TOPK, nt, TOPK, yd, ff, (int64_t)ff * TOPK));
        float *yg = fetch(gpu, yd, (size_t)nt * TOPK * (size_t)ff);
        char what[160];
        snprintf(what, sizeof what, "in place expert_mat %s nt=%d", st_qtype_name(tg), nt);
        compare(what, yg, yc, (size_t)nt * TOPK * (size_t)ff);
        free(yg);
        free(yc);
        st_ctx_free(gpu, yd);
        st_ctx_free(gpu, xd);
        st_ctx_free(gpu, idd);
        st_ctx_free(gpu, wd);
        st_ctx_free(gpu, od);
        free(x);
        free(ref);
    }
    for (int j = 0; j < 3; j++) {
        st_matrix_destroy(mc[j]);
        st_matrix_destroy(mi[j]);
        st_ctx_free(gpu, d[j]);
        free(h[j]);
    }
}

/* The in-place layout against the CPU: an eighth of the formats' dense
 * shapes per case (PART 0-7), the expert shapes in the ninth (8): nine
 * cases, so that tools/device-sanitize.sh shards them apart (racecheck of
 * a quarter of the formats took over 120 s on an H100, 2026-12-06) */
#define IN_PLACE_PARTS 8
static void in_place_part(int part)
{
    g_cmp = g_mis = 0;
    st_ctx *cpu = make_ctx_dims(ST_BACKEND_CPU, 8192, 8448), *gpu = make_ctx_dims(ST_BACKEND_GPU, 8192, 8448);
    size_t free0 = 0, free1 = 0, total = 0;
    CHECK_OK(st_ctx_mem_info(gpu, &free0, &total));
    for (int i = part * N_ALL_TYPES / IN_PLACE_PARTS; part < IN_PLACE_PARTS && i < (part + 1) * N_ALL_TYPES / IN_PLACE_PARTS; i++) {
        const st_qtype t = ALL_TYPES[i];
        for (int al = 0; al < 2; al++) {
            in_place_dense(cpu, gpu, t, 300, 1024, true, al);  /* one group of 32 streams */
            in_place_dense(cpu, gpu, t, 8192, 256, false, al); /* many rows: the two-row kernels */
            in_place_dense(cpu, gpu, t, 64, 8192, false, al);  /* 128 streams: the wide rows */
        }
        /* 80 units a row: two batches of two chunks of 32 blocks, the last
         * chunk partial (the shared-memory path's second buffer and its
         * copy of a row's end), one warp a row; 264 units: the same with
         * four warps on a row (128 streams), where 64 x 8192 is one batch */
        in_place_dense(cpu, gpu, t, 33, 2560, false, true);
        in_place_dense(cpu, gpu, t, 8, 8448, false, true);
    }
    if (part == IN_PLACE_PARTS) {
        in_place_experts(cpu, gpu, ST_IQ3_S, ST_IQ4_NL, 512, 256);
        in_place_experts(cpu, gpu, ST_Q4_K, ST_Q6_K, 256, 512);
        in_place_experts(cpu, gpu, ST_IQ2_XXS, ST_Q8_0, 256, 256);
    }
    CHECK_OK(st_ctx_mem_info(gpu, &free1, &total));
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    printf("in place (%s): %zu compares, %zu mismatches (device free memory %zu -> %zu bytes)\n",
           part < IN_PLACE_PARTS ? "dense, an eighth of the formats" : "experts", g_cmp, g_mis, free0, free1);
    assert_int_equal(g_mis, 0);
    assert_true(g_cmp > 0);
}

#define IN_PLACE_CASE(k) \
    static void in_place_dense_matches_cpu_##k(void **state) { (void)state; in_place_part(k); }
IN_PLACE_CASE(0)
IN_PLACE_CASE(1)
IN_PLACE_CASE(2)
IN_PLACE_CASE(3)
IN_PLACE_CASE(4)
IN_PLACE_CASE(5)
IN_PLACE_CASE(6)
IN_PLACE_CASE(7)
#undef IN_PLACE_CASE
static void in_place_experts_match_cpu(void **state) { (void)state; in_place_part(IN_PLACE_PARTS); }

int main(void)
{
    int n = 0;
    if (st_device_count(ST_BACKEND_GPU, &n) != ST_OK || n < 1) {
        printf("engine_ops_gpu_test: no GPU: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strided_dense_matches_cpu),
        cmocka_unit_test(expert_mat_matches_cpu),
        cmocka_unit_test(out_of_range_ids_match_cpu_on_every_path),
        cmocka_unit_test(ffn_sharing_and_streams),
        cmocka_unit_test(in_place_dense_matches_cpu_0),
        cmocka_unit_test(in_place_dense_matches_cpu_1),
        cmocka_unit_test(in_place_dense_matches_cpu_2),
        cmocka_unit_test(in_place_dense_matches_cpu_3),
        cmocka_unit_test(in_place_dense_matches_cpu_4),
        cmocka_unit_test(in_place_dense_matches_cpu_5),
        cmocka_unit_test(in_place_dense_matches_cpu_6),
        cmocka_unit_test(in_place_dense_matches_cpu_7),
        cmocka_unit_test(in_place_experts_match_cpu),
    };
    /* under tools/device-sanitize.sh --shards: a shard's cases */
    struct CMUnitTest run[sizeof tests / sizeof tests[0]];
    size_t n_run;
    TEST_SHARD_CASES(tests, run, n_run);
    return _cmocka_run_group_tests("engine_ops_gpu_test", run, n_run, NULL, NULL);
}
