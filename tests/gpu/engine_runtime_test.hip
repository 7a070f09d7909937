/* The library inside an engine, on the GPU: the engine creates its stream
 * (and, for one context, its workspace) with its own runtime calls, makes
 * contexts on it, and
 *  - captures a whole decode step (every MoE layer and dense matrix of the
 *    tiny GGUF, and of a synthetic 48-layer step) in global capture mode,
 *    instantiates and replays it: the same bytes as the same calls made
 *    eagerly, and as the CPU reference;
 *  - creates weights from ggml bytes it already holds on the device: the
 *    device-side repack equals the host repack byte for byte;
 *  - runs two contexts on two streams of one device from two threads at the
 *    same time: the bytes of one context alone.
 * Compiled as GPU code (HIP or CUDA) only for the engine's own runtime
 * calls, through the project's portability header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include "st_gpu.h"

extern "C" {
#include "ctx_internal.h"
#include "gpu_test_size.h"
#include "randgen.h"
#include "strata/tools.h"
#include "vmodel.h"
}

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CHECK_OK(expr)                                                                        \
    do {                                                                                      \
        st_status s_ = (expr);                                                                \
        if (s_ != ST_OK) fail_msg("%s: %s (%s)", #expr, st_status_str(s_), st_last_error()); \
    } while (0)
#define CHECK_RT(expr)                                                                  \
    do {                                                                                \
        st_rt_error e_ = (expr);                                                        \
        if (e_ != ST_RT_SUCCESS) fail_msg("%s: %s", #expr, st_rt_error_string(e_));     \
    } while (0)

static st_ctx *engine_ctx(st_rt_stream stream, void *workspace, size_t ws_bytes)
{
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_GPU;
    p.stream = (void *)stream;
    p.workspace = workspace;
    p.workspace_bytes = ws_bytes;
    st_ctx *c = NULL;
    CHECK_OK(st_ctx_create_ex(&p, &c));
    if (stream) assert_ptr_equal(st_ctx_stream(c), (void *)stream);
    assert_non_null(st_ctx_stream(c));
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    st_ctx_set_dispatch(c, &cfg);
    return c;
}

static st_ctx *cpu_ctx(void)
{
    st_ctx *c = NULL;
    CHECK_OK(st_ctx_create(ST_BACKEND_CPU, 0, &c));
    return c;
}

static size_t count_diff(const float *a, const float *b, size_t n, const char *what, int nt)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            if (d == 0) printf("  %s, n_tokens %d: first difference at %zu: %a vs %a\n", what, nt, i, a[i], b[i]);
            d++;
        }
    return d;
}

/* Eager, captured-and-replayed (twice) and CPU-reference outputs of one
 * decode step for each n_tokens in NTS. */
static void step_three_ways(const st_verify_options *o, const int *nts, int n_nts, const int *cpu_nts, int n_cpu)
{
    st_rt_stream s;
    CHECK_RT(st_rt_stream_create(&s));
    st_ctx *g = engine_ctx(s, nullptr, 0), *c = cpu_ctx();
    st_vmodel *vg = nullptr, *vc = nullptr;
    CHECK_OK(st_vmodel_open(g, o, &vg));
    CHECK_OK(st_vmodel_open(c, o, &vc));
    int layers = 0;
    const int ops = st_vmodel_ops(vg, &layers);
    printf("  %d operations (%d MoE layers)\n", ops, layers);
    size_t diffs = 0;
    for (int k = 0; k < n_nts; k++) {
        const int nt = nts[k];
        const size_t n = st_vmodel_output_floats(vg, nt);
        std::vector<float> eager(n), replay(n), cpu(n);
        CHECK_OK(st_vmodel_step(g, vg, nt));
        CHECK_OK(st_vmodel_outputs(g, vg, nt, eager.data()));
        /* the engine captures the step on its own stream, globally */
        CHECK_RT(st_rt_begin_capture(s));
        st_status cs = st_vmodel_step(g, vg, nt);
        st_rt_graph graph = nullptr;
        st_rt_error ce = st_rt_end_capture(s, &graph);
        CHECK_OK(cs);
        CHECK_RT(ce);
        st_rt_graph_exec exec = nullptr;
        CHECK_RT(st_rt_graph_instantiate(&exec, graph));
        for (int rep = 0; rep < 2; rep++) {
            /* poisoned before each replay: the graph must write every output */
            CHECK_OK(st_vmodel_poison_outputs(g, vg, nt));
            CHECK_RT(st_rt_graph_launch(exec, s));
            CHECK_OK(st_vmodel_outputs(g, vg, nt, replay.data()));
            diffs += count_diff(eager.data(), replay.data(), n, "graph replay vs eager", nt);
        }
        CHECK_RT(st_rt_graph_exec_destroy(exec));
        CHECK_RT(st_rt_graph_destroy(graph));
        bool on_cpu = false;
        for (int i = 0; i < n_cpu; i++) on_cpu |= cpu_nts[i] == nt;
        if (on_cpu) {
            CHECK_OK(st_vmodel_step(c, vc, nt));
            CHECK_OK(st_vmodel_outputs(c, vc, nt, cpu.data()));
            diffs += count_diff(eager.data(), cpu.data(), n, "GPU vs CPU reference", nt);
        }
        printf("  n_tokens %d: %zu floats, eager = replay%s\n", nt, n, on_cpu ? " = CPU" : "");
    }
    assert_int_equal(diffs, 0);
    st_vmodel_close(g, vg);
    st_vmodel_close(c, vc);
    st_ctx_destroy(g);
    st_ctx_destroy(c);
    CHECK_RT(st_rt_stream_destroy(s));
}

/* sanitizer size (gpu_test_size.h): 2 layers instead of 48 (4 in the
 * two-context case) and one token count per kernel (TEST_NT_PER_KERNEL;
 * the racecheck size three: token_counts); every kernel family and the
 * capture still run. */

static int token_counts(int *nts)
{
    static const int buckets[] = TEST_NT_PER_KERNEL;
    /* racecheck size: one token count of the one-token kernels, one of the
     * several-token dp4a kernels and one of the matrix units (every format
     * these steps hold takes them at ST_MAX_TOKENS). racecheck looks
     * inside a block; the parity sweeps launch every kernel at every
     * count of TEST_NT_PER_KERNEL under it, and these steps' 8 counts,
     * eager, captured and replayed twice, were over 140 s a case there
     * (2026-12-06, an H100) */
    static const int race[] = {1, 5, ST_MAX_TOKENS};
    if (racecheck_size()) {
        memcpy(nts, race, sizeof race);
        return (int)(sizeof race / sizeof race[0]);
    }
    if (sanitizer_size()) {
        memcpy(nts, buckets, sizeof buckets);
        return (int)(sizeof buckets / sizeof buckets[0]);
    }
    for (int i = 0; i < ST_MAX_TOKENS; i++) nts[i] = i + 1;
    return ST_MAX_TOKENS;
}

static void capture_tiny_gguf(void **state)
{
    st_verify_options o;
    st_verify_options_default(&o);
    o.model_path = STRATA_TEST_DATA "/gguf/tiny-moe.gguf";
    int nts[ST_MAX_TOKENS];
    const int n = token_counts(nts);
    step_three_ways(&o, nts, n, nts, n);
}

static void capture_48_layer_step(void **state)
{
    st_verify_options o;
    st_verify_options_default(&o);
    const char *shapes[] = {"mmvq iq4_xs 2560 2560", "expert iq3_s iq4_nl 2560 640 1"};
    o.shapes = shapes;
    o.n_shapes = 2;
    o.n_layers = sanitizer_size() ? 2 : 48;
    o.n_expert = 64;
    o.topk = 8 <= ST_MAX_TOPK ? 8 : ST_MAX_TOPK;
    int nts[ST_MAX_TOKENS];
    const int n = token_counts(nts);
    const int cpu_nts[] = {1, ST_MAX_TOKENS};
    step_three_ways(&o, nts, n, cpu_nts, 2);
}

/* Weights the engine holds on the device, repacked there: the same layout
 * bytes as the host repack, and st_matrix_layout_bytes tells their size. */
static void device_repack_equals_host_repack(void **state)
{
    st_ctx *c = engine_ctx(nullptr, nullptr, 0);
    st_rng r;
    st_rng_seed(&r, 77);
    const st_qtype types[] = {
#define T_(id, name, ggml, qk, bytes) ST_##id,
        ST_QTYPES(T_)
#undef T_
    };
    const int64_t shapes[][2] = {{1, 256}, {7, 512}, {33, 2560}, {300, 4096}};
    size_t bad = 0;
    for (st_qtype t : types)
        for (auto &sh : shapes) {
            const int64_t rows = sh[0], cols = sh[1];
            const size_t n = (size_t)rows * st_qtype_row_bytes(t, cols);
            std::vector<uint8_t> host(n);
            st_random_blocks(&r, t, rows, cols, host.data());
            void *dev = nullptr;
            CHECK_OK(st_ctx_alloc(c, n, &dev));
            CHECK_OK(st_ctx_upload(c, dev, host.data(), n));
            st_matrix *a = nullptr, *b = nullptr;
            CHECK_OK(st_matrix_create(c, t, rows, cols, host.data(), &a));
            CHECK_OK(st_matrix_create_from_device(c, t, rows, cols, dev, &b));
            st_ctx_free(c, dev); /* the engine may drop its copy now */
            const size_t la = st_matrix_bytes(a);
            assert_int_equal(la, st_matrix_bytes(b));
            assert_int_equal(la, st_matrix_layout_bytes(t, rows, cols));
            std::vector<uint8_t> ba(la), bb(la);
            CHECK_OK(st_ctx_download(c, ba.data(), st_matrix_data(a), la));
            CHECK_OK(st_ctx_download(c, bb.data(), st_matrix_data(b), la));
            if (memcmp(ba.data(), bb.data(), la)) {
                printf("  %s %lld x %lld: device repack differs from the host repack\n", st_qtype_name(t),
                       (long long)rows, (long long)cols);
                bad++;
            }
            st_matrix_destroy(a);
            st_matrix_destroy(b);
        }
    printf("  %zu types x %zu shapes compared\n", sizeof types / sizeof types[0], sizeof shapes / sizeof shapes[0]);
    assert_int_equal(bad, 0);
    st_ctx_destroy(c);
}

/* ---- two contexts, two streams, two threads ------------------------------ */
typedef struct {
    st_ctx *ctx;
    st_vmodel *vm;
    std::vector<float> out[ST_MAX_TOKENS];
} engine_thread;

static void run_steps(engine_thread *e)
{
    int nts[ST_MAX_TOKENS];
    const int n = token_counts(nts);
    for (int i = 0; i < n; i++) {
        const int nt = nts[i];
        e->out[nt - 1].resize(st_vmodel_output_floats(e->vm, nt));
        CHECK_OK(st_vmodel_step(e->ctx, e->vm, nt));
        CHECK_OK(st_vmodel_outputs(e->ctx, e->vm, nt, e->out[nt - 1].data()));
    }
}

static void *thread_main(void *arg)
{
    run_steps(static_cast<engine_thread *>(arg));
    return nullptr;
}

static void two_contexts_two_streams(void **state)
{
    st_verify_options o;
    st_verify_options_default(&o);
    const char *shapes[] = {"mmvq iq3_s 4096 2560", "expert iq4_xs iq4_nl 2560 640 1"};
    o.shapes = shapes;
    o.n_shapes = 2;
    o.n_layers = sanitizer_size() ? 2 : 4;
    st_rt_stream s[3];
    engine_thread e[3];
    /* the third context (alone, the reference) runs on a workspace the
     * engine allocated itself */
    size_t wsb = 0;
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_GPU;
    CHECK_OK(st_ctx_workspace_bytes(&p, &wsb));
    void *ws = nullptr;
    CHECK_RT(st_rt_malloc(&ws, wsb));
    for (int i = 0; i < 3; i++) {
        CHECK_RT(st_rt_stream_create(&s[i]));
        e[i].ctx = engine_ctx(s[i], i == 2 ? ws : nullptr, i == 2 ? wsb : 0);
        e[i].vm = nullptr;
        CHECK_OK(st_vmodel_open(e[i].ctx, &o, &e[i].vm));
    }
    run_steps(&e[2]);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], nullptr, thread_main, &e[i]), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], nullptr), 0);
    size_t diffs = 0;
    int nts[ST_MAX_TOKENS];
    const int n = token_counts(nts);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < n; j++)
            diffs += count_diff(e[i].out[nts[j] - 1].data(), e[2].out[nts[j] - 1].data(), e[2].out[nts[j] - 1].size(),
                                "concurrent context vs alone", nts[j]);
    printf("  2 contexts x %d steps at the same time: %zu differing floats\n", n, diffs);
    assert_int_equal(diffs, 0);
    for (int i = 0; i < 3; i++) {
        st_vmodel_close(e[i].ctx, e[i].vm);
        st_ctx_destroy(e[i].ctx);
        CHECK_RT(st_rt_stream_destroy(s[i]));
    }
    CHECK_RT(st_rt_free(ws));
}

int main(void)
{
    st_ctx *probe = nullptr;
    if (st_ctx_create(ST_BACKEND_GPU, 0, &probe) != ST_OK) {
        printf("no usable GPU (%s): skipped\n", st_last_error());
        return 77;
    }
    st_ctx_destroy(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_repack_equals_host_repack),
        cmocka_unit_test(capture_tiny_gguf),
        cmocka_unit_test(two_contexts_two_streams),
        cmocka_unit_test(capture_48_layer_step),
    };
    /* under tools/device-sanitize.sh --shards: a shard's cases */
    struct CMUnitTest run[sizeof tests / sizeof tests[0]];
    size_t n_run;
    TEST_SHARD_CASES(tests, run, n_run);
    return _cmocka_run_group_tests("engine_runtime_test", run, n_run, nullptr, nullptr);
}
