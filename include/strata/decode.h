/* strata-tune: the decode entry points an inference engine calls.
 *
 * A context owns one backend (a GPU, or the CPU reference), the stream its
 * work goes to (the engine's own, or one it makes), the scratch memory its
 * decode calls use (reserved at creation, or handed in by the engine), the
 * dispatch configuration (knobs, read once at creation) and at most one
 * engaged tuning table. Memory passed to the operations is backend memory:
 * device memory from st_ctx_alloc (or the engine's own device pointers) on a
 * GPU, ordinary host memory on the CPU backend. Every backend, variant and
 * knob path produces the same output bytes (docs/DESIGN.md section 2).
 *
 * Decode calls (st_iq_mmvq, st_iq_mmvq_strided, st_expert_grouped,
 * st_expert_mat, st_expert_ffn and the _variant forms) never allocate or free memory, never wait for the device and never issue a
 * synchronous copy or memset: on a GPU they only queue kernels on the
 * context's stream, so an engine can order them with its own work and
 * capture them in a CUDA/HIP graph (docs/USER_GUIDE.md, "Linking into an
 * engine"). A call beyond the context's limits returns ST_ERR_INVALID_ARG,
 * its message naming the limit, and launches nothing.
 *
 * Threads: a context is used by one thread at a time; different contexts
 * may be used at the same time from different threads. A matrix is
 * read-only once made: every context on its backend and device may use it,
 * from any thread, at the same time. Each entry point makes the context's
 * GPU the current device and restores the caller's current device before
 * it returns. */
#ifndef STRATA_DECODE_H
#define STRATA_DECODE_H

#include "strata/version.h"

#include "strata/formats.h"
#include "strata/identity.h"
#include "strata/knobs.h"
#include "strata/limits.h"
#include "strata/status.h"
#include "strata/table.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ST_BACKEND_AUTO = 0, /* the GPU when this build has one and a device is present, else CPU */
    ST_BACKEND_CPU = 1,  /* the exact CPU reference, multi-threaded */
    ST_BACKEND_GPU = 2   /* HIP (gfx1100) or CUDA, as built */
} st_backend;

typedef struct st_ctx st_ctx;
typedef struct st_matrix st_matrix;

/* How a context is made. Fill with st_ctx_params_init (which sets
 * struct_size), then change what you need; a zero limit means the default
 * in brackets. The struct may grow: new members are appended and old
 * callers' smaller struct_size keeps its meaning. */
typedef struct {
    size_t struct_size;  /* sizeof(st_ctx_params), set by st_ctx_params_init */
    st_backend backend;  /* [ST_BACKEND_AUTO] */
    int device;          /* GPU index [0]; ignored on the CPU */
    /* The engine's stream: a cudaStream_t / hipStream_t on the context's
     * device that stays valid while the context lives. Every decode call is
     * queued on it. NULL: the context creates a stream of its own. */
    void *stream;
    /* The largest calls the context serves; its scratch is sized for them
     * and a call beyond them is refused. */
    int max_tokens;      /* n_tokens of one call, 1..ST_MAX_TOKENS [ST_MAX_TOKENS] */
    int max_topk;        /* experts per token, 1..ST_MAX_TOPK [ST_MAX_TOPK] */
    int max_experts;     /* experts of one layer, 1..ST_MAX_EXPERTS [ST_MAX_EXPERTS] */
    int64_t max_rows;    /* rows of one expert (its n_ff and n_embd: they size the expert
                            scratch) [32768]; a dense matrix's rows size nothing and are
                            not limited by it */
    int64_t max_cols;    /* values per row (K) of any matrix [32768] */
    /* Scratch handed in by the engine: WORKSPACE_BYTES of backend memory
     * (device memory on a GPU, host memory on the CPU), at least
     * st_ctx_workspace_bytes(), aligned to 256 bytes on a GPU (64 on the
     * CPU backend), owned by the engine
     * and used by nothing else while the context lives. NULL: the context
     * reserves its own at creation. */
    void *workspace;
    size_t workspace_bytes;
    /* Where this context's user-facing lines go (the table engagement or
     * refusal line, the tuner's progress). NULL: the process's sink
     * (st_set_log, by default stderr). */
    st_log_fn log_fn;
    void *log_user;
} st_ctx_params;

/* Defaults: auto backend, device 0, own stream, the largest limits, own
 * workspace, the process's log sink. */
ST_API void st_ctx_params_init_size(st_ctx_params *p, size_t size);
/* (sizeof *P is the caller's: the growth rule of docs/API.md) */
static inline void st_ctx_params_init(st_ctx_params *p) { st_ctx_params_init_size(p, sizeof *p); }

/* Creates a context from P. The dispatch knobs are read from the
 * environment here, once. All scratch of the decode calls is reserved here
 * (or checked in P->workspace). A GPU that cannot be used gives
 * ST_ERR_NO_DEVICE or ST_ERR_GPU with the runtime's message in
 * st_last_error(), or ST_ERR_UNSUPPORTED when this build has no code for
 * the device's architecture; ST_BACKEND_AUTO then falls back to the CPU.
 * Invalid parameters (a limit out of range, a workspace that is too small)
 * give ST_ERR_INVALID_ARG naming the field. */
ST_API st_status st_ctx_create_ex(const st_ctx_params *p, st_ctx **out);

/* st_ctx_create_ex with the defaults, BACKEND and DEVICE. */
ST_API st_status st_ctx_create(st_backend backend, int device, st_ctx **out);
ST_API void st_ctx_destroy(st_ctx *ctx);

/* Bytes of scratch a context made from P reserves (or needs in
 * P->workspace) on P's backend; ST_BACKEND_AUTO answers for the GPU when
 * this build has a GPU backend. The knobs of the environment count (some
 * reroutes need more scratch). */
ST_API st_status st_ctx_workspace_bytes(const st_ctx_params *p, size_t *bytes);

/* How many devices BACKEND has, into *COUNT: the GPUs the runtime reports
 * (0 when there are none, or in a build without a GPU backend), 1 for the
 * CPU backend (the whole host is one device, index 0), and for
 * ST_BACKEND_AUTO the GPUs when there are any, else 1 (the CPU, as
 * st_ctx_create then picks). Creates no context. */
ST_API st_status st_device_count(st_backend backend, int *count);

ST_API st_backend st_ctx_backend(const st_ctx *ctx);
/* The device index the context was created on (0 on the CPU backend). */
ST_API int st_ctx_device(const st_ctx *ctx);
/* The stream the context queues its work on (the engine's, or its own);
 * NULL on the CPU backend. */
ST_API void *st_ctx_stream(const st_ctx *ctx);
/* Queues the context's later calls on STREAM (a cudaStream_t / hipStream_t
 * on the context's device, valid while it is set), or on the context's own
 * stream for NULL (made now if it had none): between any two calls, as
 * cublasSetStream, but not while the context's stream is being captured
 * (ST_ERR_INVALID_ARG). Work queued before stays where it was queued; the
 * new stream waits, on the device, for the old stream's work queued so far
 * (the context has one scratch area), and the host does not wait. The CPU
 * backend takes only NULL (ST_ERR_INVALID_ARG otherwise). */
ST_API st_status st_ctx_set_stream(st_ctx *ctx, void *stream);
/* The identity tables are made for and checked against. */
ST_API const st_identity *st_ctx_identity(const st_ctx *ctx);
/* Dispatch configuration. Setting it drops an engaged table when any knob
 * becomes active (a table measured the default dispatch). A knob whose path
 * needs scratch the context did not reserve at creation (STRATA_EXPERT_V2K)
 * makes the calls that take that path fail with a message naming it (it is
 * reserved when the knob is set at creation, or when it takes at most 64
 * MiB for the context's limits). */
ST_API const st_dispatch_config *st_ctx_dispatch(const st_ctx *ctx);
ST_API void st_ctx_set_dispatch(st_ctx *ctx, const st_dispatch_config *cfg);

/* Engages the table at PATH (file, or tables directory: auto-selection).
 * Gives exactly one line (engagement or refusal) to the context's log. On
 * refusal the previously engaged table, if any, is dropped: the defaults are
 * in effect. */
ST_API st_status st_ctx_load_table(st_ctx *ctx, const char *path);
/* The same for $STRATA_DECODE_TUNING; ST_ERR_NOT_FOUND (and no line) when
 * the variable is unset or empty. */
ST_API st_status st_ctx_load_table_env(st_ctx *ctx);
ST_API void st_ctx_drop_table(st_ctx *ctx);
/* The engaged table or NULL. */
ST_API const st_table *st_ctx_table(const st_ctx *ctx);
/* Engages table T, already parsed (st_table_parse, st_table_load_msg),
 * without a log line: the context takes T, and the table engaged before
 * (or NULL) goes to *PREVIOUS for the caller to destroy or engage again. T
 * NULL engages none. Refused (ST_ERR_REFUSED, nothing changes) when T's
 * header and device line are not the context's, or while a dispatch knob
 * is active: the same guard as st_ctx_load_table. */
ST_API st_status st_ctx_swap_table(st_ctx *ctx, st_table *t, st_table **previous);

/* Backend memory (not decode calls: these may allocate and wait). */
ST_API st_status st_ctx_alloc(st_ctx *ctx, size_t bytes, void **ptr);
ST_API void st_ctx_free(st_ctx *ctx, void *ptr);
ST_API st_status st_ctx_upload(st_ctx *ctx, void *dst, const void *src, size_t bytes);
ST_API st_status st_ctx_download(st_ctx *ctx, void *dst, const void *src, size_t bytes);
/* Waits for the context's queued work. */
ST_API st_status st_ctx_sync(st_ctx *ctx);

/* Uploads a quantized matrix of ROWS rows of COLS values (ggml block bytes
 * in host memory, rows back to back) in the backend's layout. 3-D expert
 * tensors are matrices of n_expert * rows_per_expert rows. The limits are
 * checked here (one line naming the limit and the value): COLS at most the
 * context's max_cols, ROWS at most INT32_MAX; an expert set's own limits
 * when it is made (st_experts_make). The matrix may be used by every
 * context on the same backend and device (not only CTX); it must be
 * destroyed before CTX. */
ST_API st_status st_matrix_create(st_ctx *ctx, st_qtype type, int64_t rows, int64_t cols,
                                  const void *ggml_bytes, st_matrix **out);
/* The same from ggml block bytes the engine already holds in backend memory
 * (device memory on a GPU): the repack into the layout runs on the device,
 * on the context's stream, and gives the same bytes as st_matrix_create.
 * DEVICE_BYTES may be freed once this returns (it waits for the repack). */
ST_API st_status st_matrix_create_from_device(st_ctx *ctx, st_qtype type, int64_t rows, int64_t cols,
                                              const void *device_bytes, st_matrix **out);
/* Wraps ggml block bytes the engine already holds in backend memory
 * (device memory on a GPU, host memory on the CPU backend), ROWS rows of
 * COLS values back to back (a contiguous ggml tensor; 3-D expert tensors
 * as for st_matrix_create), with no copy and no repack: the in-place
 * layout, read by kernels of its own, the same bytes out as a repacked
 * matrix of the same blocks. Nothing is allocated; the engine keeps BYTES
 * alive and unchanged until st_matrix_destroy (which frees nothing of
 * them). BYTES must be on the boundary of the type's blocks (the largest
 * power of two dividing the block size, at most 16: ggml's allocations
 * are); on a GPU context they must be memory of the context's device.
 * The limits are checked as for st_matrix_create; one line names what is
 * wrong. The in-place layout runs the default chain and the matrix-unit
 * variants (st_mmvq_in_place_variant); a table row naming another variant
 * for its shape runs the default chain there (st_ctx_stats.table_layout),
 * a forced one or a knob of another path is refused (ST_ERR_UNSUPPORTED).
 * What the repacked layout buys over it on a machine: the `in-place` rows
 * of `tune_decode bench` on a GPU, beside the default's. */
ST_API st_status st_matrix_wrap(st_ctx *ctx, st_qtype type, int64_t rows, int64_t cols, const void *bytes,
                                st_matrix **out);
/* 1 when M reads ggml's blocks in place (st_matrix_wrap), else 0. */
ST_API int st_matrix_in_place(const st_matrix *m);
/* Backend-memory bytes a matrix of TYPE, ROWS x COLS takes in the layout
 * (0 when the shape does not fit the type), so an engine can budget before
 * it creates one. The same on every backend of this build for the GPU; the
 * CPU backend keeps ggml's bytes (st_qtype_row_bytes * ROWS). */
ST_API size_t st_matrix_layout_bytes(st_qtype type, int64_t rows, int64_t cols);
ST_API void st_matrix_destroy(st_matrix *m);
ST_API st_qtype st_matrix_type(const st_matrix *m);
ST_API int64_t st_matrix_rows(const st_matrix *m);
ST_API int64_t st_matrix_cols(const st_matrix *m);

/* y[t][r] = W[r] . q8_1(x[t]) for t < NT (1..max_tokens); X is [nt][cols] f32, Y is
 * [nt][rows] f32, both backend memory. Uses the engaged table's variant for
 * (type, rows, cols) on a hit, else the default chain. */
ST_API st_status st_iq_mmvq(st_ctx *ctx, const st_matrix *w, const float *x, int nt, float *y);
/* ggml's MUL_MAT at decode: st_iq_mmvq with token t's activations at
 * X + t * X_STRIDE and its outputs at Y + t * Y_STRIDE (elements between
 * token rows: X_STRIDE >= cols, Y_STRIDE >= rows; ggml's nb[1] / 4). The
 * same bytes as st_iq_mmvq; the floats of Y between rows are not touched. */
ST_API st_status st_iq_mmvq_strided(st_ctx *ctx, const st_matrix *w, const float *x, int64_t x_stride, int nt,
                                    float *y, int64_t y_stride);
/* Forces a launch: ROWS is a variant id (strata/variants.h:
 * st_mmvq_variant_id, st_mmvq_variant_parse): 0 the default chain (never the
 * table), else a compiled-in variant (a wide-row one only on a matrix of
 * 8192 columns or more, else refused with the reason); anything else is
 * refused. For the tuner, bench and the parity tests. */
ST_API st_status st_iq_mmvq_variant(st_ctx *ctx, const st_matrix *w, const float *x, int nt, float *y,
                                    int rows);

typedef struct {
    const st_matrix *gate; /* [n_expert * n_ff][n_embd] */
    const st_matrix *up;   /* same shape and type as gate */
    const st_matrix *down; /* [n_expert * n_embd][n_ff] */
    int n_expert;
} st_experts;

/* Makes the expert set *OUT of a layer from its three matrices (gate, up:
 * [n_expert * n_ff][n_embd]; down: [n_expert * n_embd][n_ff]) and checks
 * it against CTX's limits now, so a layer the context cannot serve is
 * refused when the model is loaded, not in the middle of a step: n_expert
 * at most max_experts, n_ff and n_embd at most max_rows (and max_cols),
 * gate and up of one type and shape. ST_ERR_INVALID_ARG with one line
 * naming the limit and the value; *OUT is left as it was then. */
ST_API st_status st_experts_make(st_ctx *ctx, const st_matrix *gate, const st_matrix *up, const st_matrix *down,
                                 int n_expert, st_experts *out);

/* The MoE FFN of a decode step (see st_ref_expert_grouped for the maths):
 * X [nt][n_embd] f32, IDS [nt][topk] int32 expert ids, WTS [nt][topk] f32,
 * OUT [nt][n_embd] f32, all backend memory; NT 1..max_tokens, TOPK
 * 1..max_topk, n_expert 1..max_experts (the context's limits). Uses the
 * table's (gu_rows, down_rows) for the shape on a hit. */
ST_API st_status st_expert_grouped(st_ctx *ctx, const st_experts *ex, const float *x, const int32_t *ids,
                                   const float *wts, int nt, int topk, float *out);
/* Forces a launch: GU_ROWS = DOWN_ROWS = 0 is the default chain, else a pair
 * from STRATA_EXPERT_ROWS_VARIANTS. */
ST_API st_status st_expert_grouped_variant(st_ctx *ctx, const st_experts *ex, const float *x,
                                           const int32_t *ids, const float *wts, int nt, int topk,
                                           float *out, int gu_rows, int down_rows);

/* Expert ids out of range (every call that takes IDS): an id outside
 * 0..n_expert-1 is not an error (the ids are in backend memory and a
 * decode call never waits to read them). Its slot reads no weight: in the
 * FFN its down output counts as 0 (the top-k sum still adds w * 0, so a
 * finite weight adds nothing), in st_expert_mat its output row is zeros.
 * The same bytes on every backend. */

/* ggml's MUL_MAT_ID at decode: the expert matrix call, the chosen experts'
 * weights not fused. W holds N_EXPERT experts of R = rows / N_EXPERT rows
 * each (a 3-D expert tensor). For token t < NT and slot k < TOPK, with
 * e = IDS[t * IDS_STRIDE + k]:
 *   Y[t * Y_TOKEN_STRIDE + k * Y_SLOT_STRIDE + r] = W_e[r] . q8_1(x_tk), r < R,
 * x_tk = X + t * X_TOKEN_STRIDE + (k % X_SLOTS) * X_SLOT_STRIDE (X_SLOTS 1:
 * every slot reads the token's one vector, ggml's broadcast src1; TOPK:
 * a vector per slot, the down projection's input). Strides in elements.
 * The rows are the expert kernels' (one group of 32 canonical streams at
 * any K, docs/DESIGN.md section 2), so gate, up, the combine and down by
 * this call give st_expert_grouped's h and y bytes. NT 1..max_tokens, TOPK
 * 1..max_topk, N_EXPERT 1..max_experts, R at most max_rows, and with a
 * vector per slot its length (cols) too. */
ST_API st_status st_expert_mat(st_ctx *ctx, const st_matrix *w, int n_expert, const float *x, int x_slots,
                               int64_t x_slot_stride, int64_t x_token_stride, const int32_t *ids,
                               int64_t ids_stride, int nt, int topk, float *y, int64_t y_slot_stride,
                               int64_t y_token_stride);

/* The gate-up combine of the fused FFN (st_expert_ffn). Each is one exact
 * sequence of IEEE operations (src/contract/st_canon.h), the same on every
 * backend. */
typedef enum {
    ST_ACT_SILU = 0,       /* silu(g) * u (ggml SWIGLU) */
    ST_ACT_GELU = 1,       /* gelu(g) * u, the tanh form (ggml GEGLU) */
    ST_ACT_SWIGLU_OAI = 2  /* gpt-oss: g = min(g, limit), u = clamp(u, -limit, limit),
                              g / (1 + exp(-alpha g)) * (u + 1) (ggml SWIGLU_OAI) */
} st_activation;

/* What st_expert_ffn computes beyond st_expert_grouped. Set up with
 * st_ffn_options_init (struct_size; may grow). Biases are f32 backend
 * memory, NULL for none; a bias is added (one IEEE add) to the finished
 * dot of its row: gate and up before the combine, down before the top-k
 * sum. Strides in elements, 0 for dense. */
typedef struct {
    size_t struct_size;      /* sizeof(st_ffn_options), set by st_ffn_options_init */
    st_activation act;       /* [ST_ACT_SILU] */
    float alpha, limit;      /* ST_ACT_SWIGLU_OAI [1.702, 7.0] */
    const float *gate_bias;  /* [n_expert][n_ff] */
    const float *up_bias;    /* [n_expert][n_ff] */
    const float *down_bias;  /* [n_expert][n_embd] */
    int64_t x_stride;        /* between tokens of X [n_embd] */
    int64_t ids_stride;      /* between tokens of IDS [topk] */
    int64_t wts_stride;      /* between tokens of WTS [topk] */
    int64_t out_stride;      /* between tokens of OUT [n_embd] */
} st_ffn_options;
ST_API void st_ffn_options_init_size(st_ffn_options *o, size_t size);
static inline void st_ffn_options_init(st_ffn_options *o) { st_ffn_options_init_size(o, sizeof *o); }

/* The fused MoE FFN with O's activation, biases and strides (NULL: the
 * defaults: st_expert_grouped, table included). On a GPU the defaults (also
 * with a strided X) run the tuned expert kernels; anything else runs as
 * st_expert_mat launches with a combine and a sum launch (the same bytes:
 * the same operations in the same order), 7 launches a call. */
ST_API st_status st_expert_ffn(st_ctx *ctx, const st_experts *ex, const st_ffn_options *o, const float *x,
                               const int32_t *ids, const float *wts, int nt, int topk, float *out);

/* Counters of where launches came from, so callers and tests can prove a
 * table engaged. Set up with st_ctx_stats_init (struct_size); the library
 * fills the members struct_size covers (the struct may grow). */
typedef struct {
    size_t struct_size;        /* sizeof(st_ctx_stats), set by st_ctx_stats_init */
    uint64_t table_hits;       /* entry-point calls that launched a table variant */
    uint64_t table_misses;     /* entry-point calls with a table that has nothing for the shape:
                                  no row and no tuned-default record (a gap: tune the model) */
    uint64_t default_launches; /* calls that ran the default chain */
    uint64_t variant_launches; /* calls that ran a rows variant (table or forced) */
    uint64_t table_defaults;   /* entry-point calls whose shape the tuner measured and kept the
                                  default for ("tuned default": covered, not a gap) */
    uint64_t table_layout;     /* entry-point calls on an in-place matrix (st_matrix_wrap) whose table
                                  row names a variant of the row-planar layout: the default chain ran */
    uint64_t mma_launches;     /* kernels launched on the integer matrix units (iq_mmvq's and the
                                  experts', default or variant; counted by the launcher itself when
                                  the launch succeeds, so a test can prove which kernel a call ran;
                                  a kernel captured into a graph counts once, its replays not);
                                  0 on the CPU backend */
} st_ctx_stats;
ST_API void st_ctx_stats_init_size(st_ctx_stats *stats, size_t size);
static inline void st_ctx_stats_init(st_ctx_stats *stats) { st_ctx_stats_init_size(stats, sizeof *stats); }
ST_API void st_ctx_get_stats(const st_ctx *ctx, st_ctx_stats *stats);
ST_API void st_ctx_reset_stats(st_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
