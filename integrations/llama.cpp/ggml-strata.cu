// strata-tune in ggml-cuda / ggml-hip: see ggml-strata.cuh. Host code only
// (the kernels are the library's), compiled beside ggml-cuda's sources when
// GGML_CUDA_STRATA is defined, empty otherwise.
//
// What it does, per op, in the op's stream order:
//   - the weights (src0) are wrapped where ggml holds them (st_matrix_wrap,
//     cached by address, type and shape; a wrapped matrix owns nothing and
//     reads the bytes at that address each call);
//   - MUL_MAT with 1..32 tokens: st_iq_mmvq_strided (ggml's row strides);
//   - MUL_MAT_ID with 1..32 tokens: st_expert_mat (per-slot activations and
//     outputs, the ids row stride);
//   - unless GGML_STRATA_FFN=0, the whole MoE FFN (gate, up, GLU, down,
//     routing weights, the top-k sum: ggml_strata_match_moe_ffn) as one
//     st_expert_ffn, from ggml_cuda_try_fuse, when the library takes it;
//   - one strata-tune context per stream ggml runs ops on (made the first
//     time the stream is seen, its scratch sized by the library's default
//     limits), which engages $STRATA_DECODE_TUNING when set.
// Anything else (other types, prompt batches, non-contiguous weights, a
// refusal by the library) is left to ggml, which then computes it exactly
// as without the integration. GGML_STRATA=0 in the environment turns the
// integration off at run time (stock ggml in the same build).
#ifdef GGML_CUDA_STRATA

#include "ggml-strata.cuh"

#include "ggml-backend.h"
#include "ggml-impl.h"

#include <strata/strata.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

struct mat_key {
    const void * data;
    int type;
    int64_t rows, cols;
    int device;
    bool operator==(const mat_key & o) const {
        return data == o.data && type == o.type && rows == o.rows && cols == o.cols && device == o.device;
    }
};

struct mat_key_hash {
    size_t operator()(const mat_key & k) const {
        size_t h = std::hash<const void *>()(k.data);
        h ^= std::hash<int64_t>()(k.rows * 1000003 + k.cols) + 0x9e3779b9 + (h << 6) + (h >> 2);
        return h ^ (size_t) (k.type * 31 + k.device);
    }
};

struct state {
    std::mutex mu;
    uint64_t mul_mat = 0, mul_mat_id = 0, moe_ffn = 0, declined = 0; // ops run on strata-tune; taken but refused (ggml ran them)
    std::unordered_map<void *, st_ctx *> ctx;               // per stream (nullptr: refused, ggml runs)
    std::unordered_map<mat_key, st_matrix *, mat_key_hash> mats;
};

state & S() {
    static state s;
    return s;
}

// GGML_STRATA=0: off (read once, thread-safe).
bool enabled() {
    static const bool on = [] {
        const char * v = getenv("GGML_STRATA");
        const bool e = !(v && !strcmp(v, "0"));
        GGML_LOG_INFO("ggml_strata: strata-tune %s (%s) decodes MUL_MAT / MUL_MAT_ID of its weight types%s\n",
                      st_version(), st_gpu_backend_name(), e ? "" : ": off (GGML_STRATA=0)");
        return e;
    }();
    return on;
}

// The context on STREAM (device DEVICE), made once; nullptr when the
// library refused it (logged once: ggml then runs those ops).
st_ctx * ctx_for(int device, void * stream) {
    state & s = S();
    auto it = s.ctx.find(stream);
    if (it != s.ctx.end()) {
        return it->second;
    }
    st_ctx_params p;
    st_ctx_params_init(&p);
    p.backend = ST_BACKEND_GPU;
    p.device  = device;
    p.stream  = stream;
    st_ctx * c = nullptr;
    if (st_ctx_create_ex(&p, &c) != ST_OK) {
        GGML_LOG_WARN("%s: device %d: no strata-tune context (%s); ggml runs these ops\n", __func__, device,
                      st_last_error());
        c = nullptr;
    } else {
        size_t ws = 0;
        (void) st_ctx_workspace_bytes(&p, &ws);
        GGML_LOG_INFO("ggml_strata: device %d: a context on stream %p, scratch %.1f MiB (the weights stay ggml's)\n",
                      device, stream, (double) ws / 1048576.0);
        const st_status t = st_ctx_load_table_env(c); // one line of its own when set
        (void) t;
    }
    s.ctx[stream] = c;
    return c;
}

// SRC0 wrapped in place (cached); nullptr when the library refuses it.
st_matrix * wrap(st_ctx * c, int device, const ggml_tensor * src0, int64_t rows, int64_t cols) {
    state & s = S();
    const mat_key k = { src0->data, (int) src0->type, rows, cols, device };
    auto it = s.mats.find(k);
    if (it != s.mats.end()) {
        return it->second;
    }
    st_matrix * m = nullptr;
    if (st_matrix_wrap(c, (st_qtype) src0->type, rows, cols, src0->data, &m) != ST_OK) {
        GGML_LOG_WARN("%s: %s: %s; ggml runs it\n", __func__, src0->name, st_last_error());
        m = nullptr;
    }
    s.mats[k] = m;
    return m;
}

// The weights: a type the library runs, rows back to back. Any buffer: a
// wrapped matrix owns nothing and reads the bytes at the address each call,
// so a compute buffer reused for other tensors is read as it is then; an
// address the library cannot wrap (host memory, off the block boundary) is
// refused once and left to ggml.
bool weights_ok(const ggml_tensor * w) {
    return st_qtype_valid((int) w->type) && w->data && ggml_is_contiguous(w) && w->ne[3] == 1;
}

bool takes_mul_mat(const ggml_tensor * src0, const ggml_tensor * src1, const ggml_tensor * dst) {
    return weights_ok(src0) && src0->ne[2] == 1 && src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 &&
           src1->ne[1] >= 1 && src1->ne[1] <= ST_MAX_TOKENS && src1->ne[2] == 1 && src1->ne[3] == 1 &&
           src1->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) && src1->nb[1] % sizeof(float) == 0 &&
           dst->nb[1] % sizeof(float) == 0 && dst->ne[1] == src1->ne[1];
}

bool takes_mul_mat_id(const ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0], * src1 = dst->src[1], * ids = dst->src[2];
    const int64_t n_used = ids->ne[0], nt = ids->ne[1];
    return weights_ok(src0) && src0->ne[2] <= ST_MAX_EXPERTS && src1->type == GGML_TYPE_F32 &&
           dst->type == GGML_TYPE_F32 && ids->type == GGML_TYPE_I32 && nt >= 1 && nt <= ST_MAX_TOKENS &&
           n_used >= 1 && n_used <= ST_MAX_TOPK && (src1->ne[1] == 1 || src1->ne[1] == n_used) &&
           src1->ne[2] == nt && src1->ne[3] == 1 && dst->ne[1] == n_used && dst->ne[2] == nt &&
           src1->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) && ids->nb[0] == sizeof(int32_t) &&
           src1->nb[1] % sizeof(float) == 0 && src1->nb[2] % sizeof(float) == 0 && dst->nb[1] % sizeof(float) == 0 &&
           dst->nb[2] % sizeof(float) == 0 && ids->nb[1] % sizeof(int32_t) == 0;
}

// The bytes of T (its first to its last element).
bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    const char * a0 = (const char *) a->data, * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

// A MUL_MAT_ID of the FFN: f32 in and out, i32 ids.
bool is_expert_mm(const ggml_tensor * t) {
    return t->op == GGML_OP_MUL_MAT_ID && t->type == GGML_TYPE_F32 && t->src[1]->type == GGML_TYPE_F32 &&
           t->src[2]->type == GGML_TYPE_I32;
}

} // namespace

bool ggml_strata_match_moe_ffn(const ggml_cgraph * cg, int i, ggml_strata_ffn_match & m) {
    m = ggml_strata_ffn_match();
    if (i + 5 > cg->n_nodes) {
        return false;
    }
    const ggml_tensor * a = cg->nodes[i], * b = cg->nodes[i + 1], * glu = cg->nodes[i + 2], * down = cg->nodes[i + 3];
    ggml_tensor * mul = cg->nodes[i + 4];
    if (!is_expert_mm(a) || !is_expert_mm(b) || a->src[1] != b->src[1] || a->src[2] != b->src[2] ||
        !ggml_are_same_shape(a, b)) {
        return false;
    }
    // the GLU of the two, split form, not swapped: glu(src0) * src1
    if (glu->op != GGML_OP_GLU || glu->type != GGML_TYPE_F32 || ggml_get_op_params_i32(glu, 1) != 0) {
        return false;
    }
    const int gop = ggml_get_op_params_i32(glu, 0);
    if (gop != GGML_GLU_OP_SWIGLU && gop != GGML_GLU_OP_GEGLU) {
        return false;
    }
    const ggml_tensor * gate = glu->src[0], * up = glu->src[1];
    if (!((gate == a && up == b) || (gate == b && up == a))) {
        return false;
    }
    const ggml_tensor * x = a->src[1], * ids = a->src[2];
    if (!is_expert_mm(down) || down->src[1] != glu || down->src[2] != ids) {
        return false;
    }
    // the routing weights [1, topk, nt], either side of the MUL
    const int64_t topk = down->ne[1], nt = down->ne[2];
    const ggml_tensor * w = mul->src[0] == down ? mul->src[1] : mul->src[0];
    if (mul->op != GGML_OP_MUL || mul->type != GGML_TYPE_F32 || (mul->src[0] != down && mul->src[1] != down) ||
        w->type != GGML_TYPE_F32 || !ggml_is_contiguous(w) || w->ne[0] != 1 || w->ne[1] != topk || w->ne[2] != nt ||
        !ggml_are_same_shape(mul, down) || !ggml_is_contiguous(mul) || topk < 2) {
        return false;
    }
    // the slots' views of the weighted rows and the chain of adds over them
    const int n = 5 + 2 * (int) topk - 1;
    if (i + n > cg->n_nodes) {
        return false;
    }
    std::vector<ggml_op> ops(n);
    std::vector<int> idx(n);
    for (int k = 0; k < n; k++) {
        idx[k] = i + k;
    }
    for (int k = 0; k < 5; k++) {
        ops[k] = cg->nodes[i + k]->op;
    }
    std::vector<const ggml_tensor *> views;
    const ggml_tensor * sum = nullptr;
    int adds = 0;
    for (int k = 5; k < n; k++) {
        const ggml_tensor * t = cg->nodes[i + k];
        ops[k] = t->op;
        if (t->op == GGML_OP_VIEW) {
            const int64_t slot = (int64_t) views.size();
            if (slot >= topk || t->view_src != mul || t->src[0] != mul || t->type != GGML_TYPE_F32 ||
                t->ne[0] != mul->ne[0] || t->ne[1] != nt || t->ne[2] != 1 || t->ne[3] != 1 || t->nb[0] != mul->nb[0] ||
                t->nb[1] != mul->nb[2] || t->view_offs != (size_t) slot * mul->nb[1]) {
                return false;
            }
            views.push_back(t);
        } else if (t->op == GGML_OP_ADD && adds + 1 < (int) views.size() &&
                   t->src[0] == (adds ? sum : views[0]) && t->src[1] == views[adds + 1] && t->type == GGML_TYPE_F32) {
            sum = t;
            adds++;
        } else {
            return false;
        }
    }
    if ((int64_t) views.size() != topk || adds != topk - 1 || !ggml_is_contiguous(sum) || sum->ne[0] != mul->ne[0] ||
        sum->ne[1] != nt || sum->ne[2] != 1 || sum->ne[3] != 1) {
        return false;
    }
    const int out_idx = i + n - 1;
    if (!ggml_can_fuse_subgraph_ext(cg, idx.data(), n, ops.data(), &out_idx, 1)) {
        return false;
    }
    m.gate = gate->src[0];
    m.up = up->src[0];
    m.down = down->src[0];
    m.x = x;
    m.ids = ids;
    m.weights = w;
    m.out = cg->nodes[out_idx];
    m.geglu = gop == GGML_GLU_OP_GEGLU;
    m.n_nodes = n;
    return true;
}

namespace {

// The fused FFN is on unless GGML_STRATA_FFN=0 (then the per-op hooks
// serve the FFN: its three MUL_MAT_IDs, ggml the rest).
bool ffn_on() {
    static const bool on = [] {
        const char * v = getenv("GGML_STRATA_FFN");
        return !(v && !strcmp(v, "0"));
    }();
    return on;
}

} // namespace

void ggml_strata_graph_optimize(ggml_cgraph * cg, void (*add_dep)(void *, ggml_tensor *, ggml_tensor *), void * user) {
    if (!enabled() || !ffn_on() || !add_dep) {
        return;
    }
    for (int i = 0; i < cg->n_nodes; i++) {
        ggml_strata_ffn_match m;
        if (cg->nodes[i]->op != GGML_OP_MUL_MAT_ID || !ggml_strata_match_moe_ffn(cg, i, m)) {
            continue;
        }
        // the inputs live until the output is made: ggml's allocator would
        // otherwise give the first ADD (the output, the later ADDs in place)
        // the input x's memory, which it frees after the up MUL_MAT_ID
        add_dep(user, const_cast<ggml_tensor *>(m.x), m.out);
        add_dep(user, const_cast<ggml_tensor *>(m.ids), m.out);
        add_dep(user, const_cast<ggml_tensor *>(m.weights), m.out);
        i += m.n_nodes - 1;
    }
}

int ggml_strata_moe_ffn(int device, void * stream, const ggml_cgraph * cg, int i) {
    ggml_strata_ffn_match m;
    if (!enabled() || !ffn_on() || cg->nodes[i]->op != GGML_OP_MUL_MAT_ID || !ggml_strata_match_moe_ffn(cg, i, m)) {
        return 0;
    }
    const ggml_tensor * g = m.gate, * u = m.up, * d = m.down, * x = m.x, * ids = m.ids, * w = m.weights;
    const int64_t n_embd = g->ne[0], n_ff = g->ne[1], n_expert = g->ne[2], topk = ids->ne[0], nt = ids->ne[1];
    // the library's shapes: gate and up alike, down back from n_ff to n_embd,
    // one input row per token (x [n_embd, 1, nt]), ids [topk, nt]
    if (!weights_ok(g) || !weights_ok(u) || !weights_ok(d) || g->type != u->type || !ggml_are_same_shape(g, u) ||
        d->ne[0] != n_ff || d->ne[1] != n_embd || d->ne[2] != n_expert || n_expert > ST_MAX_EXPERTS ||
        x->ne[0] != n_embd || x->ne[1] != 1 || x->ne[2] != nt || x->ne[3] != 1 || x->nb[0] != sizeof(float) ||
        x->nb[2] % sizeof(float) != 0 || x->nb[2] < n_embd * sizeof(float) || ids->nb[0] != sizeof(int32_t) ||
        ids->nb[1] % sizeof(int32_t) != 0 || ids->nb[1] < topk * sizeof(int32_t) || nt < 1 || nt > ST_MAX_TOKENS ||
        topk > ST_MAX_TOPK || m.out->nb[1] % sizeof(float) != 0) {
        return 0;
    }
    // the output is written while the inputs are read: only when ggml's
    // allocator kept them apart (ggml_strata_graph_optimize asks it to)
    if (overlaps(m.out, x) || overlaps(m.out, ids) || overlaps(m.out, w)) {
        static bool said = false;
        if (!said) {
            said = true;
            GGML_LOG_WARN("%s: %s: the MoE FFN's output shares memory with its inputs; ggml runs it (and every such "
                          "one: counted as left to ggml)\n", __func__, m.out->name);
        }
        std::lock_guard<std::mutex> lock(S().mu);
        S().declined++;
        return 0;
    }
    std::lock_guard<std::mutex> lock(S().mu);
    st_ctx * c = ctx_for(device, stream);
    st_matrix * mg = c ? wrap(c, device, g, n_ff * n_expert, n_embd) : nullptr;
    st_matrix * mu = c ? wrap(c, device, u, n_ff * n_expert, n_embd) : nullptr;
    st_matrix * md = c ? wrap(c, device, d, n_embd * n_expert, n_ff) : nullptr;
    if (!mg || !mu || !md) {
        return 0;
    }
    const st_experts ex = { mg, mu, md, (int) n_expert };
    st_ffn_options o;
    st_ffn_options_init(&o);
    o.act = m.geglu ? ST_ACT_GELU : ST_ACT_SILU;
    // strides in elements, 0 where dense (the tuned kernels' layout)
    const int64_t xs = (int64_t) (x->nb[2] / sizeof(float)), is = (int64_t) (ids->nb[1] / sizeof(int32_t));
    const int64_t os = (int64_t) (m.out->nb[1] / sizeof(float));
    o.x_stride = xs == n_embd ? 0 : xs;
    o.ids_stride = is == topk ? 0 : is;
    o.wts_stride = 0; // contiguous [1, topk, nt]
    o.out_stride = os == n_embd ? 0 : os;
    const st_status s = st_expert_ffn(c, &ex, &o, (const float *) x->data, (const int32_t *) ids->data,
                                      (const float *) w->data, (int) nt, (int) topk, (float *) m.out->data);
    if (s != ST_OK) {
        GGML_LOG_WARN("%s: %s: %s; ggml runs it\n", __func__, m.out->name, st_last_error());
        S().declined++;
        return 0;
    }
    S().moe_ffn++;
    return m.n_nodes;
}

bool ggml_strata_takes(const ggml_tensor * node) {
    if (!enabled()) {
        return false;
    }
    if (node->op == GGML_OP_MUL_MAT) {
        return takes_mul_mat(node->src[0], node->src[1], node);
    }
    return node->op == GGML_OP_MUL_MAT_ID && takes_mul_mat_id(node);
}

bool ggml_strata_mul_mat(int device, void * stream, const ggml_tensor * src0, const ggml_tensor * src1, ggml_tensor * dst) {
    if (!enabled() || !takes_mul_mat(src0, src1, dst)) {
        return false;
    }
    std::lock_guard<std::mutex> lock(S().mu);
    st_ctx * c = ctx_for(device, stream);
    st_matrix * w = c ? wrap(c, device, src0, src0->ne[1], src0->ne[0]) : nullptr;
    if (!w) {
        return false;
    }
    const st_status s = st_iq_mmvq_strided(c, w, (const float *) src1->data, (int64_t) (src1->nb[1] / sizeof(float)),
                                           (int) src1->ne[1], (float *) dst->data, (int64_t) (dst->nb[1] / sizeof(float)));
    if (s != ST_OK) {
        GGML_LOG_WARN("%s: %s: %s; ggml runs it\n", __func__, dst->name, st_last_error());
        S().declined++;
        return false; // the library queued nothing
    }
    S().mul_mat++;
    return true;
}

bool ggml_strata_mul_mat_id(int device, void * stream, ggml_tensor * dst) {
    if (!enabled() || !takes_mul_mat_id(dst)) {
        return false;
    }
    const ggml_tensor * src0 = dst->src[0], * src1 = dst->src[1], * ids = dst->src[2];
    std::lock_guard<std::mutex> lock(S().mu);
    st_ctx * c = ctx_for(device, stream);
    const int n_expert = (int) src0->ne[2];
    st_matrix * w = c ? wrap(c, device, src0, src0->ne[1] * src0->ne[2], src0->ne[0]) : nullptr;
    if (!w) {
        return false;
    }
    const st_status s = st_expert_mat(c, w, n_expert, (const float *) src1->data, (int) src1->ne[1],
                                      (int64_t) (src1->nb[1] / sizeof(float)), (int64_t) (src1->nb[2] / sizeof(float)),
                                      (const int32_t *) ids->data, (int64_t) (ids->nb[1] / sizeof(int32_t)),
                                      (int) ids->ne[1], (int) ids->ne[0], (float *) dst->data,
                                      (int64_t) (dst->nb[1] / sizeof(float)), (int64_t) (dst->nb[2] / sizeof(float)));
    if (s != ST_OK) {
        GGML_LOG_WARN("%s: %s: %s; ggml runs it\n", __func__, dst->name, st_last_error());
        S().declined++;
        return false;
    }
    S().mul_mat_id++;
    return true;
}

void ggml_strata_stream_destroyed(void * stream) {
    state & s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.ctx.find(stream);
    if (it == s.ctx.end()) {
        return;
    }
    st_ctx * c = it->second;
    s.ctx.erase(it);
    if (!c) {
        return;
    }
    // the matrices this context made serve every context of the device,
    // but must be destroyed before it: drop them all (each owns nothing; the
    // next op wraps again on a live context)
    for (auto & m : s.mats) {
        st_matrix_destroy(m.second);
    }
    s.mats.clear();
    st_ctx_stats st;
    st_ctx_stats_init(&st);
    st_ctx_get_stats(c, &st);
    GGML_LOG_INFO("ggml_strata: a context ends with its stream: so far %llu MUL_MAT, %llu MUL_MAT_ID and %llu MoE FFN "
                  "(fused) ops ran on strata-tune, %llu taken ones were left to ggml; this context's table: %llu hits, "
                  "%llu tuned defaults, %llu misses, %llu rows of the other layout\n", (unsigned long long) s.mul_mat,
                  (unsigned long long) s.mul_mat_id, (unsigned long long) s.moe_ffn, (unsigned long long) s.declined,
                  (unsigned long long) st.table_hits, (unsigned long long) st.table_defaults,
                  (unsigned long long) st.table_misses, (unsigned long long) st.table_layout);
    st_ctx_destroy(c);
}

#endif // GGML_CUDA_STRATA
