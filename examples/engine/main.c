/* strata_engine_example: how an inference engine drives libstrata_tune.
 *
 *   strata_engine_example [--backend auto|cpu|gpu] [--steps N] MODEL.gguf [TABLE|DIR]
 *
 * 1. opens a decode context (ST_BACKEND_AUTO: the GPU when the library has
 *    one and a device is present, else the CPU reference backend);
 * 2. engages a tuning table: the one given on the command line (a file, or a
 *    tables directory from which the table made for this machine is chosen),
 *    else $STRATA_DECODE_TUNING. The library prints the one engagement or
 *    refusal line itself; a refused table is not an error, the defaults run;
 * 3. uploads every expert layer and every dense matrix of the GGUF model to
 *    the backend (the weights are copied: the model file is closed after);
 * 4. runs a few synthetic decode steps for 1 and 4 tokens: random
 *    activations, routing from random router logits (softmax over the top-k),
 *    every expert layer through st_expert_grouped and every dense matrix
 *    through st_iq_mmvq; downloads the outputs and prints one checksum per
 *    step. The checksums do not depend on the backend, the table or the
 *    dispatch knobs: every path gives the same bytes;
 * 5. prints the launch counters (table hits, ...) and frees everything.
 *
 * Uses only the public, installed API. Errors: one line with st_status_str()
 * and st_last_error(), exit status 1. */
#include <strata/strata.h>
#include <strata/model.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKENS 8 /* the decode kernels take 1..8 tokens */
#define MAX_TOPK 8

typedef struct {
    st_matrix *gate, *up, *down;
    int n_embd, n_ff, n_expert;
} engine_layer;

typedef struct {
    st_ctx *ctx;
    engine_layer *layers;
    size_t n_layers;
    st_matrix **dense;
    size_t n_dense;
    int topk;
    /* backend memory (device memory on a GPU, host memory on the CPU) */
    float *d_x, *d_y;
    int32_t *d_ids;
    float *d_wts;
    /* host staging */
    float *h_x, *h_y, *h_wts;
    int32_t *h_ids;
    size_t max_in, max_out; /* floats per token */
} engine;

static int report(const char *what, st_status s)
{
    const char *detail = st_last_error();
    fprintf(stderr, "strata_engine_example: %s: %s%s%s\n", what, st_status_str(s), detail[0] ? ": " : "",
            detail);
    return 1;
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
    float logits[256];
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
    for (size_t i = 0; i < e->n_layers; i++) {
        st_matrix_destroy(e->layers[i].gate);
        st_matrix_destroy(e->layers[i].up);
        st_matrix_destroy(e->layers[i].down);
    }
    free(e->layers);
    for (size_t i = 0; i < e->n_dense; i++) st_matrix_destroy(e->dense[i]);
    free(e->dense);
    if (e->ctx) {
        st_ctx_free(e->ctx, e->d_x);
        st_ctx_free(e->ctx, e->d_y);
        st_ctx_free(e->ctx, e->d_ids);
        st_ctx_free(e->ctx, e->d_wts);
    }
    free(e->h_x);
    free(e->h_y);
    free(e->h_ids);
    free(e->h_wts);
    st_ctx_destroy(e->ctx);
    memset(e, 0, sizeof *e);
}

/* Uploads the model's weights to the context. */
static int engine_load(engine *e, const char *model_path)
{
    st_model *m = NULL;
    st_status s = st_model_open(model_path, &m);
    if (s != ST_OK) return report(model_path, s);
    printf("model: %s (%s): %zu expert layers, %zu dense matrices\n", st_model_name(m), st_model_arch(m),
           st_model_expert_layer_count(m), st_model_matrix_count(m));

    size_t nl = st_model_expert_layer_count(m), nm = st_model_matrix_count(m);
    e->layers = calloc(nl ? nl : 1, sizeof *e->layers);
    e->dense = calloc(nm ? nm : 1, sizeof *e->dense);
    if (!e->layers || !e->dense) {
        st_model_close(m);
        fprintf(stderr, "strata_engine_example: out of memory\n");
        return 1;
    }
    int used = st_model_expert_used(m);
    e->topk = used > 0 ? used : 2;
    char what[160];
    for (size_t i = 0; i < nl; i++) {
        const st_model_expert_layer *L = st_model_expert_layer_at(m, i);
        engine_layer *el = &e->layers[e->n_layers++];
        el->n_embd = L->n_embd;
        el->n_ff = L->n_ff;
        el->n_expert = L->n_expert;
        int64_t gu_rows = (int64_t)L->n_expert * L->n_ff, dn_rows = (int64_t)L->n_expert * L->n_embd;
        snprintf(what, sizeof what, "blk.%d experts: upload", L->layer);
        if ((s = st_matrix_create(e->ctx, L->gu_type, gu_rows, L->n_embd, L->gate, &el->gate)) != ST_OK ||
            (s = st_matrix_create(e->ctx, L->gu_type, gu_rows, L->n_embd, L->up, &el->up)) != ST_OK ||
            (s = st_matrix_create(e->ctx, L->down_type, dn_rows, L->n_ff, L->down, &el->down)) != ST_OK) {
            st_model_close(m);
            return report(what, s);
        }
        if (L->n_expert > 256) {
            st_model_close(m);
            fprintf(stderr, "strata_engine_example: blk.%d: %d experts (this example routes at most 256)\n",
                    L->layer, L->n_expert);
            return 1;
        }
        if (e->topk > L->n_expert) e->topk = L->n_expert;
        if ((size_t)L->n_embd > e->max_in) e->max_in = (size_t)L->n_embd;
        if ((size_t)L->n_embd > e->max_out) e->max_out = (size_t)L->n_embd;
    }
    if (e->topk > MAX_TOPK) e->topk = MAX_TOPK;
    size_t skipped = 0;
    for (size_t i = 0; i < nm; i++) {
        const st_model_matrix *D = st_model_matrix_at(m, i);
        if (D->type == ST_QTYPE_NONE || !D->data) { /* a type the kernels do not run */
            printf("  %s: %s, not a decode kernel type: left to the engine\n", D->name, D->type_name);
            skipped++;
            continue;
        }
        snprintf(what, sizeof what, "%s: upload", D->name);
        s = st_matrix_create(e->ctx, D->type, D->n_rows, D->n_cols, D->data, &e->dense[e->n_dense]);
        if (s != ST_OK) {
            st_model_close(m);
            return report(what, s);
        }
        e->n_dense++;
        if ((size_t)D->n_cols > e->max_in) e->max_in = (size_t)D->n_cols;
        if ((size_t)D->n_rows > e->max_out) e->max_out = (size_t)D->n_rows;
    }
    /* The weights now live in the backend: the mapping can go. */
    st_model_close(m);
    printf("uploaded: %zu expert layers (top-%d routing), %zu dense matrices (%zu skipped)\n", e->n_layers,
           e->topk, e->n_dense, skipped);

    if (!e->max_in) e->max_in = 1;
    if (!e->max_out) e->max_out = 1;
    size_t xb = e->max_in * MAX_TOKENS * sizeof(float), yb = e->max_out * MAX_TOKENS * sizeof(float);
    size_t ib = MAX_TOKENS * MAX_TOPK * sizeof(int32_t), wb = MAX_TOKENS * MAX_TOPK * sizeof(float);
    if ((s = st_ctx_alloc(e->ctx, xb, (void **)&e->d_x)) != ST_OK ||
        (s = st_ctx_alloc(e->ctx, yb, (void **)&e->d_y)) != ST_OK ||
        (s = st_ctx_alloc(e->ctx, ib, (void **)&e->d_ids)) != ST_OK ||
        (s = st_ctx_alloc(e->ctx, wb, (void **)&e->d_wts)) != ST_OK)
        return report("st_ctx_alloc", s);
    e->h_x = malloc(xb);
    e->h_y = malloc(yb);
    e->h_ids = malloc(ib);
    e->h_wts = malloc(wb);
    if (!e->h_x || !e->h_y || !e->h_ids || !e->h_wts) {
        fprintf(stderr, "strata_engine_example: out of memory\n");
        return 1;
    }
    return 0;
}

/* One decode step of NT tokens; *SUM is the checksum of every output. */
static int engine_step(engine *e, int nt, uint64_t seed, uint64_t *sum)
{
    uint64_t rng = seed, h = 0xcbf29ce484222325ull;
    st_status s;
    for (size_t i = 0; i < e->n_layers; i++) {
        const engine_layer *L = &e->layers[i];
        size_t xb = (size_t)nt * (size_t)L->n_embd * sizeof(float);
        size_t rb = (size_t)nt * (size_t)e->topk;
        for (size_t j = 0; j < (size_t)nt * (size_t)L->n_embd; j++) e->h_x[j] = rng_float(&rng);
        route(&rng, nt, L->n_expert, e->topk, e->h_ids, e->h_wts);
        st_experts ex = {L->gate, L->up, L->down, L->n_expert};
        if ((s = st_ctx_upload(e->ctx, e->d_x, e->h_x, xb)) != ST_OK ||
            (s = st_ctx_upload(e->ctx, e->d_ids, e->h_ids, rb * sizeof(int32_t))) != ST_OK ||
            (s = st_ctx_upload(e->ctx, e->d_wts, e->h_wts, rb * sizeof(float))) != ST_OK)
            return report("upload", s);
        if ((s = st_expert_grouped(e->ctx, &ex, e->d_x, e->d_ids, e->d_wts, nt, e->topk, e->d_y)) != ST_OK)
            return report("st_expert_grouped", s);
        if ((s = st_ctx_download(e->ctx, e->h_y, e->d_y, xb)) != ST_OK) return report("download", s);
        h = fnv1a(h, e->h_y, xb);
    }
    for (size_t i = 0; i < e->n_dense; i++) {
        const st_matrix *w = e->dense[i];
        size_t cols = (size_t)st_matrix_cols(w), rows = (size_t)st_matrix_rows(w);
        for (size_t j = 0; j < (size_t)nt * cols; j++) e->h_x[j] = rng_float(&rng);
        if ((s = st_ctx_upload(e->ctx, e->d_x, e->h_x, (size_t)nt * cols * sizeof(float))) != ST_OK)
            return report("upload", s);
        if ((s = st_iq_mmvq(e->ctx, w, e->d_x, nt, e->d_y)) != ST_OK) return report("st_iq_mmvq", s);
        if ((s = st_ctx_download(e->ctx, e->h_y, e->d_y, (size_t)nt * rows * sizeof(float))) != ST_OK)
            return report("download", s);
        h = fnv1a(h, e->h_y, (size_t)nt * rows * sizeof(float));
    }
    if ((s = st_ctx_sync(e->ctx)) != ST_OK) return report("st_ctx_sync", s);
    *sum = h;
    return 0;
}

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

    /* 1. The context. ST_BACKEND_AUTO falls back to the CPU by itself. */
    st_status s = st_ctx_create(backend, 0, &e.ctx);
    if (s != ST_OK) return report("st_ctx_create", s);
    const st_identity *id = st_ctx_identity(e.ctx);
    char header[4 * ST_TOKEN_MAX + 16];
    st_identity_header(id, header, sizeof header);
    printf("strata-tune %s (GPU backend of the build: %s)\n", st_version(), st_gpu_backend_name());
    printf("backend: %s, device: %s\n", st_ctx_backend(e.ctx) == ST_BACKEND_GPU ? "gpu" : "cpu", id->device_name);
    printf("identity: %s\n", header);
    int knob = st_dispatch_config_first_active(st_ctx_dispatch(e.ctx));
    if (knob >= 0) printf("dispatch knob active: %s (no table engages)\n", st_knob_label((st_knob)knob));

    /* 2. The tuning table. The library prints the engagement or refusal line
     *    (through st_set_log's sink; stderr by default). A refusal leaves the
     *    defaults in effect: an engine goes on. */
    fflush(stdout); /* keep our lines and the library's stderr line in order */
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

    /* 3. The weights. */
    if (engine_load(&e, model_path) != 0) goto out;

    /* 4. Decode steps. */
    static const int token_counts[] = {1, 4};
    for (size_t c = 0; c < sizeof token_counts / sizeof token_counts[0]; c++) {
        int nt = token_counts[c];
        for (int step = 0; step < steps; step++) {
            uint64_t sum;
            if (engine_step(&e, nt, 0x5eed0000ull + (uint64_t)nt * 1000u + (uint64_t)step, &sum) != 0) goto out;
            printf("step n_tokens=%d #%d: checksum %016" PRIx64 "\n", nt, step, sum);
        }
    }

    /* 5. Where the launches came from. */
    st_ctx_stats st;
    st_ctx_get_stats(e.ctx, &st);
    /* a tuned default is a shape the tuner measured and kept the default
     * for: covered; a miss is a shape the table knows nothing about */
    printf("launches: table hits %" PRIu64 ", table misses %" PRIu64 ", tuned defaults %" PRIu64 ", default %" PRIu64
           ", variant %" PRIu64 "\n",
           st.table_hits, st.table_misses, st.table_defaults, st.default_launches, st.variant_launches);
    rc = 0;
out:
    engine_free(&e);
    return rc;
}
