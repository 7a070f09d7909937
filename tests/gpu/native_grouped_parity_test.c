/* expert_grouped on the GPU: the default chain, every (gate-up, down) rows
 * variant and every expert knob path give the same bytes as the CPU
 * reference, for n_tokens 1..ST_MAX_TOKENS and routings that put all tokens
 * on the same experts, every token on different experts, and random top-k,
 * up to ST_MAX_EXPERTS experts and top-ST_MAX_TOPK; every format of
 * ST_QTYPES as gate-up (with an IQ4_NL or Q8_0 down) and as down. */
#include "parity_util.h"

typedef struct {
    st_qtype gu, dn;
    int n_embd, n_ff, n_expert;
} eshape;

typedef struct {
    st_matrix *g, *u, *d;
} emats;

static size_t g_cmp, g_mis;

static void make_mats(st_ctx *c, const eshape *s, void *const *host, emats *m)
{
    CHECK_OK(st_matrix_create(c, s->gu, (int64_t)s->n_expert * s->n_ff, s->n_embd, host[0], &m->g));
    CHECK_OK(st_matrix_create(c, s->gu, (int64_t)s->n_expert * s->n_ff, s->n_embd, host[1], &m->u));
    CHECK_OK(st_matrix_create(c, s->dn, (int64_t)s->n_expert * s->n_embd, s->n_ff, host[2], &m->d));
}

static void run_expert(st_ctx *c, const emats *m, const eshape *s, const float *x, const int32_t *ids,
                       const float *w, int nt, int topk, const path *p, float *out_host)
{
    st_experts ex = {m->g, m->u, m->d, s->n_expert};
    float *xd = to_backend(c, x, sizeof(float) * (size_t)nt * (size_t)s->n_embd);
    int32_t *idd = to_backend(c, ids, sizeof(int32_t) * (size_t)(nt * topk));
    float *wd = to_backend(c, w, sizeof(float) * (size_t)(nt * topk));
    const size_t on = sizeof(float) * (size_t)nt * (size_t)s->n_embd;
    memset(out_host, 0xff, on);
    float *od = to_backend(c, out_host, on);
    set_knob(c, p->knob);
    CHECK_OK(st_expert_grouped_variant(c, &ex, xd, idd, wd, nt, topk, od, p->gu_rows, p->dn_rows));
    CHECK_OK(st_ctx_sync(c));
    CHECK_OK(st_ctx_download(c, out_host, od, on));
    st_ctx_free(c, xd);
    st_ctx_free(c, idd);
    st_ctx_free(c, wd);
    st_ctx_free(c, od);
}

/* routing kinds: 0 random distinct, 1 all tokens on the same experts,
 * 2 every (token, slot) on a different expert where possible */
static void route(st_rng *r, int kind, int nt, int topk, int n_expert, int32_t *ids, float *w)
{
    for (int t = 0; t < nt; t++) {
        for (int k = 0; k < topk; k++) {
            int e;
            if (kind == 1)
                e = k % n_expert;
            else if (kind == 2)
                e = (t * topk + k) % n_expert;
            else {
                for (;;) {
                    e = (int)(st_rng_u32(r) % (uint32_t)n_expert);
                    int dup = 0;
                    for (int j = 0; j < k; j++) dup |= ids[t * topk + j] == e;
                    if (!dup || topk > n_expert) break;
                }
            }
            ids[t * topk + k] = e;
            w[t * topk + k] = 0.05f + 0.9f * (st_rng_float(r) * 0.5f + 0.5f);
        }
    }
}

/* Every path against the CPU on shape S, each token count of NTS, the three
 * routings, or only routing ONLY (0..2; -1: all three). For a large shape
 * at the racecheck size (gpu_test_size.h): one routing, and CHAIN_ONLY
 * leaves out the rows pairs (the default chain and its knobs stay).
 * racecheck looks for hazards inside a block; the three routings'
 * per-expert counts and every rows pair's kernels also run on every
 * format's small shape, at a fraction of a large shape's time. What a
 * large shape then leaves out are branches after a block's shared-memory
 * work (the 32-lane gate-up's return for a group with no expert: random
 * routing uses every expert) and loop lengths (a rows pair's second pass
 * over more than 256 pairs), no shared-memory access. */
static void expert_sweep(st_ctx *cpu, st_ctx *gpu, const eshape *s, const int *nts, int n_nt, int topk, int only,
                         bool chain_only)
{
    st_rng r;
    st_rng_seed(&r, 77u + (unsigned)s->gu * 131u + (unsigned)s->dn * 17u + (unsigned)s->n_embd);
    void *host[3];
    const size_t gb = (size_t)s->n_expert * s->n_ff * st_qtype_row_bytes(s->gu, s->n_embd);
    const size_t db = (size_t)s->n_expert * s->n_embd * st_qtype_row_bytes(s->dn, s->n_ff);
    host[0] = malloc(gb);
    host[1] = malloc(gb);
    host[2] = malloc(db);
    st_random_blocks(&r, s->gu, (int64_t)s->n_expert * s->n_ff, s->n_embd, host[0]);
    st_random_blocks(&r, s->gu, (int64_t)s->n_expert * s->n_ff, s->n_embd, host[1]);
    st_random_blocks(&r, s->dn, (int64_t)s->n_expert * s->n_embd, s->n_ff, host[2]);
    emats mc, mg;
    make_mats(cpu, s, host, &mc);
    make_mats(gpu, s, host, &mg);
    path paths[32];
    int np = expert_paths(paths);
    if (chain_only) { /* the rows pairs out */
        int k = 0;
        for (int p = 0; p < np; p++)
            if (!paths[p].gu_rows && !paths[p].dn_rows) paths[k++] = paths[p];
        np = k;
    }
    for (int ni = 0; ni < n_nt; ni++) {
        const int nt = nts[ni];
        for (int kind = 0; kind < 3; kind++) {
            if (only >= 0 && kind != only) continue;
            int32_t ids[ST_MAX_PAIRS];
            float w[ST_MAX_PAIRS];
            route(&r, kind, nt, topk, s->n_expert, ids, w);
            float *x = malloc(sizeof(float) * (size_t)nt * (size_t)s->n_embd);
            st_random_floats(&r, x, (size_t)nt * (size_t)s->n_embd, 1.0f);
            float *ref = malloc(sizeof(float) * (size_t)nt * (size_t)s->n_embd);
            float *y = malloc(sizeof(float) * (size_t)nt * (size_t)s->n_embd);
            run_expert(cpu, &mc, s, x, ids, w, nt, topk, &paths[0], ref);
            for (int p = 0; p < np; p++) {
                run_expert(gpu, &mg, s, x, ids, w, nt, topk, &paths[p], y);
                char what[200];
                snprintf(what, sizeof what, "%s/%s %d/%d x%d nt=%d topk=%d routing %d %s vs CPU", st_qtype_name(s->gu),
                         st_qtype_name(s->dn), s->n_embd, s->n_ff, s->n_expert, nt, topk, kind, paths[p].name);
                g_mis += diff_floats(what, y, ref, (size_t)nt * (size_t)s->n_embd) ? 1 : 0;
                g_cmp++;
            }
            free(x);
            free(ref);
            free(y);
        }
    }
    st_matrix_destroy(mc.g); st_matrix_destroy(mc.u); st_matrix_destroy(mc.d);
    st_matrix_destroy(mg.g); st_matrix_destroy(mg.u); st_matrix_destroy(mg.d);
    free(host[0]); free(host[1]); free(host[2]);
}

static void expert_grouped_gpu_matches_cpu_bitwise(void **state)
{
    (void)state;
    st_ctx *cpu = make_ctx(ST_BACKEND_CPU), *gpu = make_ctx(ST_BACKEND_GPU);
    /* sanitizer size: token counts 1 and ST_MAX_TOKENS, one down token
     * count, and the campaign's 2560/640 (16 and 32 lanes per row) on 16
     * experts instead of 64; racecheck size: the large shapes with the
     * random routing, the limits' shapes with the most pairs on the same
     * experts and without the rows pairs (expert_sweep) */
    const bool small = sanitizer_size(), race = racecheck_size();
    int all[ST_MAX_TOKENS];
    for (int i = 0; i < ST_MAX_TOKENS; i++) all[i] = i + 1;
    const int few[] = {1, ST_MAX_TOKENS / 2, ST_MAX_TOKENS}, ends[] = {1, ST_MAX_TOKENS};
    const int *nts = small ? ends : all, n_nts = small ? 2 : ST_MAX_TOKENS;
    /* every format as gate-up, with an IQ4_NL or a Q8_0 down in turn (n_ff 64
     * fits their 32-value blocks), small shape, every token count */
    test_unit_time(NULL);
    for (int i = 0; i < N_ALL_TYPES; i++) {
        eshape s = {ALL_TYPES[i], i % 2 ? ST_Q8_0 : ST_IQ4_NL, 256, 64, 8};
        if (test_shard_next()) expert_sweep(cpu, gpu, &s, nts, n_nts, 2, -1, false);
    }
    test_unit_time("every format as gate-up");
    /* every format as down (n_ff 256 fits every block), IQ3_S gate-up */
    for (int i = 0; i < N_ALL_TYPES; i++) {
        eshape s = {ST_IQ3_S, ALL_TYPES[i], 512, 256, 4};
        if (test_shard_next()) expert_sweep(cpu, gpu, &s, small ? ends : few, small ? 1 : 3, 2, -1, false);
    }
    test_unit_time("every format as down");
    /* the campaign shape: 2560/640, 64 experts, top-8 */
    /* (at the racecheck size on 2 experts, each token on both: the same
     * kernels at an eighth of the weights, every expert's list full;
     * 2026-12-06, an H100: 8 experts there took over 300 s) */
    eshape big = {ST_IQ3_S, ST_IQ4_NL, 2560, 640, race ? 2 : small ? 16 : 64};
    if (test_shard_next()) expert_sweep(cpu, gpu, &big, small ? ends : few, small ? 2 : 3, race ? 2 : 8, race ? 0 : -1, false);
    test_unit_time("the campaign shape 2560/640");
    /* a gate-up row of 256 units (an expert row keeps the 32 canonical
     * streams at any length, where an iq_mmvq row this long takes 128), on
     * contexts that take 8192 values per row and 8192 rows per expert (the
     * down's) */
    {
        st_ctx *cpu8 = make_ctx_dims(ST_BACKEND_CPU, 8192, 8192), *gpu8 = make_ctx_dims(ST_BACKEND_GPU, 8192, 8192);
        eshape wide_row = {ST_IQ3_S, ST_IQ4_NL, 8192, 64, 4};
        if (test_shard_next()) expert_sweep(cpu8, gpu8, &wide_row, small ? ends : few, small ? 2 : 3, 2, race ? 0 : -1, false);
        test_unit_time("a gate-up row of 256 units");
        st_ctx_destroy(cpu8);
        st_ctx_destroy(gpu8);
    }
    /* at the limits: every expert id the kernels' lists hold, the most
     * (token, slot) pairs (ST_MAX_TOKENS x ST_MAX_TOPK), and Qwen3-Next's
     * 512 experts with top-10 (the sanitizer size: the end token counts) */
    eshape wide = {ST_IQ3_S, ST_IQ4_NL, 256, 64, ST_MAX_EXPERTS};
    /* (at the racecheck size the most pairs on the same ST_MAX_TOPK
     * experts, each expert's chunks of tokens full: every pair on its own
     * expert made every block of the 512 experts' grid scan the 512 pairs
     * in shared memory, over 135 s there on an H100, 2026-12-06; the
     * expert ids up to the last are the other tools' to check, and the
     * list's code is the same at any count) */
    if (test_shard_next()) expert_sweep(cpu, gpu, &wide, small ? ends : few, small ? 2 : 3, ST_MAX_TOPK, race ? 1 : -1, race);
    /* (not at the racecheck size: top-10 runs the kernels of the most
     * pairs above again, over 180 s there on an H100) */
    if (test_shard_next() && !race) expert_sweep(cpu, gpu, &wide, small ? ends : few, small ? 2 : 3, 10, -1, false);
    test_unit_time("the limits (every expert id, the most pairs, 512 experts top-10)");
    printf("native_grouped_parity%s%s: %zu comparisons, %zu mismatches\n", small ? " (sanitizer size)" : "",
           test_shard_label(), g_cmp, g_mis);
    st_ctx_destroy(cpu);
    st_ctx_destroy(gpu);
    assert_int_equal(g_mis, 0);
    assert_true(g_cmp > 0);
}

/* st_ctx_default_expert_mma_tokens on the GPU: where both formats take the
 * block decode (NVIDIA: IQ3_S, IQ4_XS, IQ4_NL, either layout) from
 * STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS, else from
 * STRATA_EXPERT_DEFAULT_MMA_TOKENS; 1 with the STRATA_EXPERT_MMA knob,
 * never with another expert path's knob. (The parity sweep above runs the
 * default chain at every token count on both sides of both counts.) */
static void default_mma_tokens_follow_the_formats(void **state)
{
    (void)state;
    st_ctx *gpu = make_ctx(ST_BACKEND_GPU);
    const bool nv = strncmp(st_ctx_identity(gpu)->arch, "sm_", 3) == 0;
    const struct {
        st_qtype gu, dn;
        bool block;
    } sets[] = {{ST_IQ3_S, ST_IQ4_NL, true}, {ST_IQ4_XS, ST_IQ4_XS, true}, {ST_IQ3_S, ST_Q8_0, false},
                {ST_Q4_K, ST_IQ4_NL, false}, {ST_Q4_K, ST_Q6_K, false}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        const eshape s = {sets[i].gu, sets[i].dn, 256, 256, 4};
        void *host[3];
        const size_t gb = (size_t)s.n_expert * s.n_ff * st_qtype_row_bytes(s.gu, s.n_embd);
        const size_t db = (size_t)s.n_expert * s.n_embd * st_qtype_row_bytes(s.dn, s.n_ff);
        host[0] = calloc(1, gb);
        host[1] = calloc(1, gb);
        host[2] = calloc(1, db);
        emats m;
        make_mats(gpu, &s, host, &m);
        st_experts ex = {m.g, m.u, m.d, s.n_expert};
        set_knob(gpu, -1);
        const int want = nv && sets[i].block ? STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS : STRATA_EXPERT_DEFAULT_MMA_TOKENS;
        assert_int_equal(st_ctx_default_expert_mma_tokens(gpu, &ex), want);
        /* and the default chain launches there, counted where it launches
         * (st_ctx_stats.mma_launches): none below WANT tokens, some from it */
        for (int nt = want - 1; nt <= want && nt <= ST_MAX_TOKENS; nt++) {
            const int topk = 2;
            float *x = calloc((size_t)nt * (size_t)s.n_embd, sizeof(float)), *w = calloc((size_t)nt * topk, sizeof(float));
            int32_t *id = calloc((size_t)nt * topk, sizeof(int32_t));
            for (int k = 0; k < nt * topk; k++) id[k] = k % s.n_expert;
            float *dx = to_backend(gpu, x, sizeof(float) * (size_t)nt * (size_t)s.n_embd), *dout = NULL;
            float *dw = to_backend(gpu, w, sizeof(float) * (size_t)nt * topk);
            int32_t *di = to_backend(gpu, id, sizeof(int32_t) * (size_t)nt * topk);
            CHECK_OK(st_ctx_alloc(gpu, sizeof(float) * (size_t)nt * (size_t)s.n_embd, (void **)&dout));
            st_ctx_reset_stats(gpu);
            CHECK_OK(st_expert_grouped(gpu, &ex, dx, di, dw, nt, topk, dout));
            CHECK_OK(st_ctx_sync(gpu));
            st_ctx_stats st;
            st_ctx_stats_init(&st);
            st_ctx_get_stats(gpu, &st);
            if ((nt >= want) != (st.mma_launches > 0))
                fail_msg("expert_grouped %s/%s, %d tokens: %llu matrix-unit launches (the matrix units from %d)",
                         st_qtype_name(s.gu), st_qtype_name(s.dn), nt, (unsigned long long)st.mma_launches, want);
            st_ctx_free(gpu, dx);
            st_ctx_free(gpu, dw);
            st_ctx_free(gpu, di);
            st_ctx_free(gpu, dout);
            free(x);
            free(w);
            free(id);
        }
        set_knob(gpu, ST_KNOB_EXPERT_MMA);
        assert_int_equal(st_ctx_default_expert_mma_tokens(gpu, &ex), 1);
        set_knob(gpu, ST_KNOB_EXPERT_V2);
        assert_int_equal(st_ctx_default_expert_mma_tokens(gpu, &ex), ST_MAX_TOKENS + 1);
        set_knob(gpu, -1);
        st_matrix_destroy(m.g);
        st_matrix_destroy(m.u);
        st_matrix_destroy(m.d);
        free(host[0]);
        free(host[1]);
        free(host[2]);
    }
    assert_int_equal(st_ctx_default_expert_mma_tokens(gpu, NULL), ST_MAX_TOKENS + 1);
    assert_int_equal(st_ctx_default_expert_mma_tokens(NULL, NULL), ST_MAX_TOKENS + 1);
    st_ctx_destroy(gpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(expert_grouped_gpu_matches_cpu_bitwise),
                                       cmocka_unit_test(default_mma_tokens_follow_the_formats)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
