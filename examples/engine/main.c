/* strata_engine_example: how an inference engine drives libstrata_tune (the
 * engine library; the GGUF is read through libstrata_tools).
 *
 *   strata_engine_example [--backend auto|cpu|gpu] [--steps N] MODEL.gguf [TABLE|DIR]
 *
 * 1. opens the GGUF model and sizes a decode context for it (st_ctx_params:
 *    the largest matrix, experts and top-k it has); on a GPU build the engine
 *    creates its own stream and hands it to the context, so every decode
 *    call is queued there (ST_BACKEND_AUTO: the GPU when the library has one
 *    and a device is present, else the CPU reference backend);
 * 2. engages a tuning table: the one given on the command line (a file, or a
 *    tables directory from which the table made for this machine is chosen),
 *    else $STRATA_DECODE_TUNING. The engagement or refusal line reaches the
 *    engine through the context's log callback; a refused table is not an
 *    error, the defaults run;
 * 3. uploads every expert layer and every dense matrix (the weights are
 *    copied: the model file is closed after);
 * 4. runs a few synthetic decode steps for 1 and 4 tokens: random
 *    activations, routing from random router logits (softmax over the top-k),
 *    every expert layer through st_expert_grouped and every dense matrix
 *    through st_iq_mmvq; a step only queues work (inputs are uploaded before
 *    it, outputs downloaded after), and one checksum per step is printed.
 *    The checksums do not depend on the backend, the table or the dispatch
 *    knobs: every path gives the same bytes;
 * 5. on a GPU, captures the decode step once per token count into a graph on
 *    its stream, replays it for the same steps and checks that the outputs
 *    are the eager steps' bytes;
 * 6. prints the launch counters (table hits, ...) and frees everything.
 *
 * Uses only the public, installed API (and, on a GPU build, the vendor's
 * runtime for the stream and the graph). Errors: one line with
 * st_status_str() and st_last_error(), exit status 1. */
#include <strata/strata.h>
#include <strata/tools/model.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(EXAMPLE_CUDA)
#include <cuda_runtime_api.h>
typedef cudaStream_t gpu_stream;
typedef cudaGraph_t gpu_graph;
typedef cudaGraphExec_t gpu_exec;
#define GPU_OK cudaSuccess
#define gpu_stream_create(s) cudaStreamCreateWithFlags(s, cudaStreamNonBlocking)
#define gpu_stream_destroy cudaStreamDestroy
#define gpu_begin_capture(s) cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal)
#define gpu_end_capture cudaStreamEndCapture
#define gpu_instantiate(e, g) cudaGraphInstantiate(e, g, 0)
#define gpu_launch cudaGraphLaunch
#define gpu_exec_destroy cudaGraphExecDestroy
#define gpu_graph_destroy cudaGraphDestroy
#define gpu_error_string cudaGetErrorString
#define EXAMPLE_GPU 1
#elif defined(EXAMPLE_HIP)
#include <hip/hip_runtime_api.h>
typedef hipStream_t gpu_stream;
typedef hipGraph_t gpu_graph;
typedef hipGraphExec_t gpu_exec;
#define GPU_OK hipSuccess
#define gpu_stream_create(s) hipStreamCreateWithFlags(s, hipStreamNonBlocking)
#define gpu_stream_destroy hipStreamDestroy
#define gpu_begin_capture(s) hipStreamBeginCapture(s, hipStreamCaptureModeGlobal)
#define gpu_end_capture hipStreamEndCapture
#define gpu_instantiate(e, g) hipGraphInstantiate(e, g, NULL, NULL, 0)
#define gpu_launch hipGraphLaunch
#define gpu_exec_destroy hipGraphExecDestroy
#define gpu_graph_destroy hipGraphDestroy
#define gpu_error_string hipGetErrorString
#define EXAMPLE_GPU 1
#else
#define EXAMPLE_GPU 0
#endif

#define MAX_STEP_TOKENS 4 /* the example's steps: 1 and 4 tokens */

/* One operation of the step with its own backend buffers, so the step is
 * nothing but kernel launches (a graph replays it on new inputs). */
typedef struct {
    st_matrix *m[3]; /* dense: m[0]; experts: gate, up, down */
    int n_expert;    /* 0 for a dense matrix */
    int in, out;     /* floats per token */
    float *d_x, *d_y;
    int32_t *d_ids;
    float *d_wts;
} engine_op;

typedef struct {
    st_ctx *ctx;
    void *stream; /* the engine's stream on a GPU; NULL on the CPU */
    engine_op *ops;
    size_t n_ops, n_expert_ops, skipped;
    int topk;
    size_t max_in, max_out;
    float *h_x, *h_y, *h_wts; /* host staging */
    int32_t *h_ids;
} engine;

static int report(const char *what, st_status s)
{
    const char *detail = st_last_error();
    fprintf(stderr, "strata_engine_example: %s: %s%s%s\n", what, st_status_str(s), detail[0] ? ": " : "", detail);
    return 1;
}

/* The context's lines (the table's engagement or refusal) as the engine
 * logs them. */
static void engine_log(void *user, const char *line)
{
    fflush(stdout);
    fprintf(stderr, "%s\n", line);
}

/* ---- deterministic random numbers (splitmix64) ------------------------ */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_float(uint64_t *s) { return (float)(rng_next(s) >> 40) * (2.0f / 16777216.0f) - 1.0f; }

/* FNV-1a over bytes, chained. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Routing for NT tokens of one layer: random router logits, the TOPK largest
 * (ties to the lower expert id), weights = softmax over the chosen logits. */
static void route(uint64_t *rng, int nt, int n_expert, int topk, int32_t *ids, float *wts)
{
    static float logits[ST_MAX_EXPERTS];
    for (int t = 0; t < nt; t++) {
        for (int e = 0; e < n_expert; e++) logits[e] = 4.0f * rng_float(rng);
        float sum = 0.0f;
        for (int k = 0; k < topk; k++) {
            int best = -1;
            for (int e = 0; e < n_expert; e++) {
                int taken = 0;
                for (int j = 0; j < k; j++) taken |= ids[t * topk + j] == e;
                if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
            }
            ids[t * topk + k] = best;
            wts[t * topk + k] = expf(logits[best]);
            sum += wts[t * topk + k];
        }
        for (int k = 0; k < topk; k++) wts[t * topk + k] /= sum;
    }
}

static void engine_free(engine *e)
{
    for (size_t i = 0; i < e->n_ops; i++) {
        engine_op *op = &e->ops[i];
        for (int k = 0; k < 3; k++) st_matrix_destroy(op->m[k]);
        st_ctx_free(e->ctx, op->d_x);
        st_ctx_free(e->ctx, op->d_y);
        st_ctx_free(e->ctx, op->d_ids);
        st_ctx_free(e->ctx, op->d_wts);
    }
    free(e->ops);
    free(e->h_x);
    free(e->h_y);
    free(e->h_ids);
    free(e->h_wts);
    st_ctx_destroy(e->ctx);
#if EXAMPLE_GPU
    if (e->stream) gpu_stream_destroy((gpu_stream)e->stream);
#endif
    memset(e, 0, sizeof *e);
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The limits the model needs, so the context reserves no more scratch than
 * it will use. */
static void size_for(const st_model *m, st_ctx_params *p)
{
    int64_t rows = 1, cols = 256;
    int experts = 1;
    for (size_t i = 0; i < st_model_expert_layer_count(m); i++) {
        const st_model_expert_layer *L = st_model_expert_layer_at(m, i);
        rows = max64(rows, max64(L->n_ff, L->n_embd));
        cols = max64(cols, max64(L->n_ff, L->n_embd));
        if (L->n_expert > experts) experts = L->n_expert;
    }
    for (size_t i = 0; i < st_model_matrix_count(m); i++) {
        const st_model_matrix *D = st_model_matrix_at(m, i);
        if (D->type == ST_QTYPE_NONE || !D->data) continue;
        rows = max64(rows, D->n_rows);
        cols = max64(cols, D->n_cols);
    }
    const int used = st_model_expert_used(m) > 0 ? st_model_expert_used(m) : 2;
    p->max_tokens = MAX_STEP_TOKENS;
    p->max_topk = used < experts ? used : experts;
    p->max_experts = experts;
    p->max_rows = rows;
    p->max_cols = cols;
}

static int alloc_io(engine *e, engine_op *op, int topk)
{
    st_status s;
    const size_t xb = (size_t)op->in * MAX_STEP_TOKENS * sizeof(float), yb = (size_t)op->out * MAX_STEP_TOKENS * sizeof(float);
    if ((s = st_ctx_alloc(e->ctx, xb, (void **)&op->d_x)) != ST_OK || (s = st_ctx_alloc(e->ctx, yb, (void **)&op->d_y)) != ST_OK)
        return report("st_ctx_alloc", s);
    if (op->n_expert) {
        const size_t rb = (size_t)MAX_STEP_TOKENS * (size_t)topk;
        if ((s = st_ctx_alloc(e->ctx, rb * sizeof(int32_t), (void **)&op->d_ids)) != ST_OK ||
            (s = st_ctx_alloc(e->ctx, rb * sizeof(float), (void **)&op->d_wts)) != ST_OK)
            return report("st_ctx_alloc", s);
    }
    if ((size_t)op->in > e->max_in) e->max_in = (size_t)op->in;
    if ((size_t)op->out > e->max_out) e->max_out = (size_t)op->out;
    return 0;
}

/* Uploads the model's weights to the context. */
static int engine_load(engine *e, const st_model *m)
{
    size_t nl = st_model_expert_layer_count(m), nm = st_model_matrix_count(m);
    e->ops = calloc(nl + nm + 1, sizeof *e->ops);
    if (!e->ops) {
        fprintf(stderr, "strata_engine_example: out of memory\n");
        return 1;
    }
    const int used = st_model_expert_used(m);
    e->topk = used > 0 ? used : 2;
    char what[160];
    st_status s;
    for (size_t i = 0; i < nl; i++) {
        const st_model_expert_layer *L = st_model_expert_layer_at(m, i);
        engine_op *op = &e->ops[e->n_ops++];
        op->n_expert = L->n_expert;
        op->in = op->out = L->n_embd;
        const int64_t gu_rows = (int64_t)L->n_expert * L->n_ff, dn_rows = (int64_t)L->n_expert * L->n_embd;
        snprintf(what, sizeof what, "blk.%d experts: upload", L->layer);
        if ((s = st_matrix_create(e->ctx, L->gu_type, gu_rows, L->n_embd, L->gate, &op->m[0])) != ST_OK ||
            (s = st_matrix_create(e->ctx, L->gu_type, gu_rows, L->n_embd, L->up, &op->m[1])) != ST_OK ||
            (s = st_matrix_create(e->ctx, L->down_type, dn_rows, L->n_ff, L->down, &op->m[2])) != ST_OK)
            return report(what, s);
        if (e->topk > L->n_expert) e->topk = L->n_expert;
        e->n_expert_ops++;
    }
    for (size_t i = 0; i < nl; i++)
        if (alloc_io(e, &e->ops[i], e->topk) != 0) return 1;
    for (size_t i = 0; i < nm; i++) {
        const st_model_matrix *D = st_model_matrix_at(m, i);
        if (D->type == ST_QTYPE_NONE || !D->data) { /* a type the kernels do not run */
            printf("  %s: %s, not a decode kernel type: left to the engine\n", D->name, D->type_name);
            e->skipped++;
            continue;
        }
        engine_op *op = &e->ops[e->n_ops++];
        op->in = D->n_cols;
        op->out = D->n_rows;
        snprintf(what, sizeof what, "%s: upload", D->name);
        if ((s = st_matrix_create(e->ctx, D->type, D->n_rows, D->n_cols, D->data, &op->m[0])) != ST_OK)
            return report(what, s);
        if (alloc_io(e, op, e->topk) != 0) return 1;
    }
    printf("uploaded: %zu expert layers (top-%d routing), %zu dense matrices (%zu skipped)\n", e->n_expert_ops, e->topk,
           e->n_ops - e->n_expert_ops, e->skipped);
    const size_t xb = (e->max_in ? e->max_in : 1) * MAX_STEP_TOKENS * sizeof(float);
    const size_t yb = (e->max_out ? e->max_out : 1) * MAX_STEP_TOKENS * sizeof(float);
    const size_t rb = (size_t)MAX_STEP_TOKENS * (size_t)e->topk;
    e->h_x = malloc(xb);
    e->h_y = malloc(yb);
    e->h_ids = malloc(rb * sizeof(int32_t));
    e->h_wts = malloc(rb * sizeof(float));
    if (!e->h_x || !e->h_y || !e->h_ids || !e->h_wts) {
        fprintf(stderr, "strata_engine_example: out of memory\n");
        return 1;
    }
    return 0;
}

/* The inputs of one step of NT tokens (random, from SEED) into every
 * operation's buffers. */
static int engine_inputs(engine *e, int nt, uint64_t seed)
{
    uint64_t rng = seed;
    st_status s;
    for (size_t i = 0; i < e->n_ops; i++) {
        const engine_op *op = &e->ops[i];
        const size_t n = (size_t)nt * (size_t)op->in;
        for (size_t j = 0; j < n; j++) e->h_x[j] = rng_float(&rng);
        if ((s = st_ctx_upload(e->ctx, op->d_x, e->h_x, n * sizeof(float))) != ST_OK) return report("upload", s);
        if (!op->n_expert) continue;
        const size_t rb = (size_t)nt * (size_t)e->topk;
        route(&rng, nt, op->n_expert, e->topk, e->h_ids, e->h_wts);
        if ((s = st_ctx_upload(e->ctx, op->d_ids, e->h_ids, rb * sizeof(int32_t))) != ST_OK ||
            (s = st_ctx_upload(e->ctx, op->d_wts, e->h_wts, rb * sizeof(float))) != ST_OK)
            return report("upload", s);
    }
    return 0;
}

/* The step itself: launches only (no copy, no wait), so it can be captured. */
static st_status engine_launch(engine *e, int nt)
{
    st_status s = ST_OK;
    for (size_t i = 0; i < e->n_ops && s == ST_OK; i++) {
        const engine_op *op = &e->ops[i];
        if (op->n_expert) {
            st_experts ex = {op->m[0], op->m[1], op->m[2], op->n_expert};
            s = st_expert_grouped(e->ctx, &ex, op->d_x, op->d_ids, op->d_wts, nt, e->topk, op->d_y);
        } else {
            s = st_iq_mmvq(e->ctx, op->m[0], op->d_x, nt, op->d_y);
        }
    }
    return s;
}

/* Waits for the step and checksums every output. */
static int engine_outputs(engine *e, int nt, uint64_t *sum)
{
    uint64_t h = 0xcbf29ce484222325ull;
    st_status s = st_ctx_sync(e->ctx);
    if (s != ST_OK) return report("st_ctx_sync", s);
    for (size_t i = 0; i < e->n_ops; i++) {
        const size_t n = (size_t)nt * (size_t)e->ops[i].out * sizeof(float);
        if ((s = st_ctx_download(e->ctx, e->h_y, e->ops[i].d_y, n)) != ST_OK) return report("download", s);
        h = fnv1a(h, e->h_y, n);
    }
    *sum = h;
    return 0;
}

static uint64_t step_seed(int nt, int step) { return 0x5eed0000ull + (uint64_t)nt * 1000u + (uint64_t)step; }

#if EXAMPLE_GPU
/* Captures the step of NT tokens once on the engine's stream and replays it
 * for STEPS new inputs; each replay's outputs must be the eager step's. */
static int replay_from_graph(engine *e, int nt, int steps, const uint64_t *eager)
{
    gpu_stream s = (gpu_stream)e->stream;
    gpu_graph g = NULL;
    gpu_exec x = NULL;
    if (gpu_begin_capture(s) != GPU_OK) {
        fprintf(stderr, "strata_engine_example: cannot begin stream capture\n");
        return 1;
    }
    st_status ls = engine_launch(e, nt);
    int ce = gpu_end_capture(s, &g);
    if (ls != ST_OK) return report("decode step under capture", ls);
    if (ce != GPU_OK || gpu_instantiate(&x, g) != GPU_OK) {
        fprintf(stderr, "strata_engine_example: capture failed: %s\n", gpu_error_string(ce));
        return 1;
    }
    int rc = 0;
    for (int step = 0; step < steps && rc == 0; step++) {
        uint64_t sum;
        rc = engine_inputs(e, nt, step_seed(nt, step));
        if (rc == 0 && gpu_launch(x, s) != GPU_OK) {
            fprintf(stderr, "strata_engine_example: graph launch failed\n");
            rc = 1;
        }
        if (rc == 0) rc = engine_outputs(e, nt, &sum);
        if (rc == 0 && sum != eager[step]) {
            fprintf(stderr, "strata_engine_example: n_tokens=%d #%d: the graph gave %016" PRIx64 ", eager %016" PRIx64 "\n",
                    nt, step, sum, eager[step]);
            rc = 1;
        }
    }
    if (rc == 0) printf("graph n_tokens=%d: captured once, replayed %d steps, outputs identical to the eager steps\n", nt, steps);
    gpu_exec_destroy(x);
    gpu_graph_destroy(g);
    return rc;
}
#endif

static const char USAGE[] =
    "usage: strata_engine_example [--backend auto|cpu|gpu] [--steps N] MODEL.gguf [TABLE|DIR]\n"
    "TABLE|DIR: a tuning table, or a tables directory (the table made for this machine is\n"
    "chosen); without it, $STRATA_DECODE_TUNING if set.\n";

int main(int argc, char **argv)
{
    st_backend backend = ST_BACKEND_AUTO;
    int steps = 3;
    const char *model_path = NULL, *table_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--backend") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto")) backend = ST_BACKEND_AUTO;
            else if (!strcmp(v, "cpu")) backend = ST_BACKEND_CPU;
            else if (!strcmp(v, "gpu")) backend = ST_BACKEND_GPU;
            else {
                fputs(USAGE, stderr);
                return 2;
            }
        } else if (!strcmp(a, "--steps") && i + 1 < argc) {
            steps = atoi(argv[++i]);
            if (steps < 1 || steps > 1000) {
                fputs(USAGE, stderr);
                return 2;
            }
        } else if (a[0] == '-') {
            fputs(USAGE, stderr);
            return 2;
        } else if (!model_path) {
            model_path = a;
        } else if (!table_path) {
            table_path = a;
        } else {
            fputs(USAGE, stderr);
            return 2;
        }
    }
    if (!model_path) {
        fputs(USAGE, stderr);
        return 2;
    }

    engine e;
    memset(&e, 0, sizeof e);
    int rc = 1;
    st_model *m = NULL;
    st_status s = st_model_open(model_path, &m);
    if (s != ST_OK) return report(model_path, s);
    printf("model: %s (%s): %zu expert layers, %zu dense matrices\n", st_model_name(m), st_model_arch(m),
           st_model_expert_layer_count(m), st_model_matrix_count(m));

    /* 1. The context, sized for the model, on the engine's stream. */
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = backend;
    p.log_fn = engine_log;
    size_for(m, &p);
#if EXAMPLE_GPU
    if (backend != ST_BACKEND_CPU) {
        gpu_stream gs;
        if (gpu_stream_create(&gs) == GPU_OK) {
            e.stream = (void *)gs;
            p.stream = e.stream;
        } else if (backend == ST_BACKEND_GPU) {
            fprintf(stderr, "strata_engine_example: cannot create a GPU stream\n");
            st_model_close(m);
            return 1;
        }
    }
#endif
    s = st_ctx_create_ex(&p, &e.ctx);
    if (s != ST_OK && backend == ST_BACKEND_AUTO && p.stream) {
        /* no usable GPU: the CPU, without a stream */
        p.stream = NULL;
        s = st_ctx_create_ex(&p, &e.ctx);
    }
    if (s != ST_OK) {
        st_model_close(m);
        engine_free(&e);
        return report("st_ctx_create_ex", s);
    }
    size_t ws = 0;
    st_ctx_workspace_bytes(&p, &ws);
    const st_identity *id = st_ctx_identity(e.ctx);
    char header[4 * ST_TOKEN_MAX + 16];
    st_identity_header(id, header, sizeof header);
    printf("strata-tune %s (GPU backend of the build: %s)\n", st_version(), st_gpu_backend_name());
    printf("backend: %s, device: %s\n", st_ctx_backend(e.ctx) == ST_BACKEND_GPU ? "gpu" : "cpu", id->device_name);
    printf("identity: %s\n", header);
    printf("context: up to %d tokens, %d experts, top-%d, %lld x %lld; workspace %.1f KiB; %s stream\n", p.max_tokens,
           p.max_experts, p.max_topk, (long long)p.max_rows, (long long)p.max_cols, (double)ws / 1024,
           st_ctx_stream(e.ctx) ? "the engine's" : "no");
    int knob = st_dispatch_config_first_active(st_ctx_dispatch(e.ctx));
    if (knob >= 0) printf("dispatch knob active: %s (no table engages)\n", st_knob_label((st_knob)knob));

    /* 2. The tuning table. Its one line comes through engine_log. A refusal
     *    leaves the defaults in effect: an engine goes on. */
    fflush(stdout);
    if (table_path) {
        s = st_ctx_load_table(e.ctx, table_path);
    } else {
        s = st_ctx_load_table_env(e.ctx);
        if (s == ST_ERR_NOT_FOUND) printf("table: STRATA_DECODE_TUNING is not set\n");
    }
    const st_table *t = st_ctx_table(e.ctx);
    if (t)
        printf("table: %zu shapes engaged\n", st_table_count(t));
    else
        printf("table: none engaged, default dispatch\n");

    /* 3. The weights; then the mapping can go. */
    int lr = engine_load(&e, m);
    st_model_close(m);
    if (lr != 0) goto out;

    /* 4. Decode steps, eagerly. */
    static const int token_counts[] = {1, MAX_STEP_TOKENS};
    uint64_t *sums = calloc((size_t)steps, sizeof *sums);
    if (!sums) goto out;
    for (size_t c = 0; c < sizeof token_counts / sizeof token_counts[0]; c++) {
        const int nt = token_counts[c];
        for (int step = 0; step < steps; step++) {
            if (engine_inputs(&e, nt, step_seed(nt, step)) != 0) goto out_sums;
            if ((s = engine_launch(&e, nt)) != ST_OK) {
                report("decode step", s);
                goto out_sums;
            }
            if (engine_outputs(&e, nt, &sums[step]) != 0) goto out_sums;
            printf("step n_tokens=%d #%d: checksum %016" PRIx64 "\n", nt, step, sums[step]);
        }
#if EXAMPLE_GPU
        /* 5. The same steps from a graph captured once. */
        if (st_ctx_backend(e.ctx) == ST_BACKEND_GPU && replay_from_graph(&e, nt, steps, sums) != 0) goto out_sums;
#endif
    }

    /* 6. Where the launches came from. */
    st_ctx_stats st;
    st_ctx_stats_init(&st);
    st_ctx_get_stats(e.ctx, &st);
    /* a tuned default is a shape the tuner measured and kept the default
     * for: covered; a miss is a shape the table knows nothing about */
    printf("launches: table hits %" PRIu64 ", table misses %" PRIu64 ", tuned defaults %" PRIu64 ", default %" PRIu64
           ", variant %" PRIu64 "\n",
           st.table_hits, st.table_misses, st.table_defaults, st.default_launches, st.variant_launches);
    rc = 0;
out_sums:
    free(sums);
out:
    engine_free(&e);
    return rc;
}
