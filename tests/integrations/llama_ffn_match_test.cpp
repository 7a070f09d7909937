// The MoE FFN matcher of the llama.cpp integration (ggml_strata_match_moe_ffn,
// integrations/llama.cpp/ggml-strata.cu) on graphs built with ggml itself,
// the way llama.cpp's build_moe_ffn builds them (qwen3moe: gate and up
// MUL_MAT_IDs, swiglu, down, the routing weights, the views and adds of the
// top-k sum), and on the variants it must not take: biases (gpt-oss), the
// weights applied before the FFN, an intermediate used elsewhere, a graph
// output inside, a different ids tensor for down, top-1. Then the
// allocation: a decode graph of several layers placed by ggml's allocator
// with the dependencies ggml_strata_graph_optimize asks for (the output of
// each FFN apart from its inputs) and without them (the output lands on the
// input x: what the fused call must refuse). No GPU: the matcher reads the
// graph only. Built and run by llama_ffn_match_test.sh
// against the shipped tree's headers and its libggml-base.
#include "ggml-strata.cuh"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int g_fail = 0, g_checks = 0;

void check(bool ok, const char * what, const char * name) {
    g_checks++;
    if (!ok) {
        printf("FAIL: %s: %s\n", name, what);
        g_fail++;
    }
}

struct variant {
    const char * name = "";
    int          n_embd = 0, n_ff = 0, n_expert = 0, topk = 0, nt = 0;
    int          glu = 0;              // 0 swiglu, 1 geglu (taken); 2 reglu, 3 geglu_erf, 4 swiglu_oai (not)
    bool         full_weights = false; // the MUL by a [n_embd, topk, nt] tensor, not the routing weights
    bool         gate_first = true;    // gate's MUL_MAT_ID built before up's
    bool         views_first = true;   // all views, then the adds (else interleaved)
    bool         down_bias = false;    // gpt-oss: ADD_ID after down
    bool         weight_before = false;  // the weights multiply the input instead
    bool         extra_use = false;    // up is read by another node too
    bool         glu_output = false;   // the GLU is a graph output
    bool         other_ids = false;    // down routed by another ids tensor
    bool         other_ids_built = false; // that tensor made (before the FFN) but down routed by the FFN's ids
    bool         expect = true;        // whether the matcher takes it
};

struct built {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf  = nullptr;
    ggml_tensor *  gate_w = nullptr, * up_w = nullptr, * down_w = nullptr, * x3 = nullptr, * ids = nullptr,
                *  weights = nullptr, * out = nullptr, * first_mm = nullptr;
};

built build(const variant & v) {
    built b;
    ggml_init_params ip = { 64u << 20, nullptr, true };
    b.ctx = ggml_init(ip);
    ggml_context * c = b.ctx;
    b.gate_w = ggml_new_tensor_3d(c, GGML_TYPE_IQ3_S, v.n_embd, v.n_ff, v.n_expert);
    b.up_w   = ggml_new_tensor_3d(c, GGML_TYPE_IQ3_S, v.n_embd, v.n_ff, v.n_expert);
    b.down_w = ggml_new_tensor_3d(c, GGML_TYPE_IQ4_NL, v.n_ff, v.n_embd, v.n_expert);
    ggml_tensor * cur = ggml_new_tensor_2d(c, GGML_TYPE_F32, v.n_embd, v.nt);
    ggml_tensor * logits = ggml_new_tensor_2d(c, GGML_TYPE_F32, v.n_expert, v.nt);
    b.gf = ggml_new_graph_custom(c, 1024, false);
    // the routing as llama.cpp computes it: softmax, top-k, the weights
    ggml_tensor * probs = ggml_soft_max(c, logits);
    b.ids = ggml_argsort_top_k(c, probs, v.topk);
    ggml_tensor * w = ggml_get_rows(c, ggml_reshape_3d(c, probs, 1, v.n_expert, v.nt), b.ids);
    w = ggml_reshape_2d(c, w, v.topk, v.nt);
    w = ggml_div(c, w, ggml_sum_rows(c, w));
    w = ggml_reshape_3d(c, w, 1, v.topk, v.nt);
    b.weights = w;
    ggml_build_forward_expand(b.gf, w);
    // down routed by other ids: made before the FFN, so its nodes do not
    // stand between the FFN's (only down's ids then differ)
    ggml_tensor * ids_down = b.ids;
    if (v.other_ids || v.other_ids_built) {
        ggml_tensor * other = ggml_argsort_top_k(c, ggml_soft_max(c, ggml_scale(c, logits, 2.0f)), v.topk);
        ggml_build_forward_expand(b.gf, other);
        if (v.other_ids) {
            ids_down = other;
        }
    }
    ggml_tensor * x3 = ggml_reshape_3d(c, cur, v.n_embd, 1, v.nt);
    b.x3 = x3;
    if (v.weight_before) {
        x3 = ggml_mul(c, ggml_repeat_4d(c, x3, v.n_embd, v.topk, v.nt, 1), w);
    }
    ggml_tensor * up = nullptr, * gate = nullptr;
    if (v.gate_first) {
        gate = ggml_mul_mat_id(c, b.gate_w, x3, b.ids);
        up   = ggml_mul_mat_id(c, b.up_w, x3, b.ids);
    } else {
        up   = ggml_mul_mat_id(c, b.up_w, x3, b.ids);
        gate = ggml_mul_mat_id(c, b.gate_w, x3, b.ids);
    }
    // expand in the order they were built (llama.cpp's graph gets them through the GLU)
    ggml_build_forward_expand(b.gf, v.gate_first ? gate : up);
    ggml_build_forward_expand(b.gf, v.gate_first ? up : gate);
    ggml_tensor * glu = v.glu == 1 ? ggml_geglu_split(c, gate, up)
                      : v.glu == 2 ? ggml_reglu_split(c, gate, up)
                      : v.glu == 3 ? ggml_geglu_erf_split(c, gate, up)
                      : v.glu == 4 ? ggml_swiglu_oai(c, gate, up, 1.702f, 7.0f)
                                   : ggml_swiglu_split(c, gate, up);
    if (v.glu_output) {
        ggml_set_output(glu);
    }
    ggml_tensor * experts = ggml_mul_mat_id(c, b.down_w, glu, ids_down);
    if (v.down_bias) {
        experts = ggml_add_id(c, experts, ggml_new_tensor_2d(c, GGML_TYPE_F32, v.n_embd, v.n_expert), b.ids);
    }
    if (v.full_weights) {
        experts = ggml_mul(c, experts, ggml_new_tensor_3d(c, GGML_TYPE_F32, v.n_embd, v.topk, v.nt));
    } else if (!v.weight_before) {
        experts = ggml_mul(c, experts, w);
    }
    ggml_build_forward_expand(b.gf, experts);
    std::vector<ggml_tensor *> views(v.topk);
    ggml_tensor * sum = nullptr;
    for (int k = 0; k < v.topk; k++) {
        views[k] = ggml_view_2d(c, experts, v.n_embd, v.nt, experts->nb[2], k * experts->nb[1]);
        ggml_build_forward_expand(b.gf, views[k]);
        if (!v.views_first && k > 0) {
            sum = ggml_add(c, k == 1 ? views[0] : sum, views[k]);
            ggml_build_forward_expand(b.gf, sum);
        }
    }
    if (v.views_first) {
        sum = views[0];
        for (int k = 1; k < v.topk; k++) {
            sum = ggml_add(c, sum, views[k]);
            ggml_build_forward_expand(b.gf, sum);
        }
    }
    if (v.extra_use) {
        ggml_build_forward_expand(b.gf, ggml_scale(c, up, 2.0f));
    }
    // the residual add llama.cpp puts after the FFN
    b.out = sum;
    ggml_build_forward_expand(b.gf, ggml_add(c, sum, cur));
    for (int i = 0; i < ggml_graph_n_nodes(b.gf); i++) {
        ggml_tensor * n = ggml_graph_node(b.gf, i);
        if (n->op == GGML_OP_MUL_MAT_ID) {
            b.first_mm = n;
            break;
        }
    }
    return b;
}

void run(const variant & v) {
    built b = build(v);
    int hits = 0, at = -1;
    ggml_strata_ffn_match m, found;
    for (int i = 0; i < ggml_graph_n_nodes(b.gf); i++) {
        if (ggml_strata_match_moe_ffn(b.gf, i, m)) {
            hits++;
            at = i;
            found = m;
        }
    }
    check(hits == (v.expect ? 1 : 0), v.expect ? "no single match" : "matched what it must not take", v.name);
    if (v.expect && hits == 1) {
        check(ggml_graph_node(b.gf, at) == b.first_mm, "the match does not start at the first MUL_MAT_ID", v.name);
        check(found.n_nodes == 4 + 2 * v.topk, "node count", v.name);
        check(found.gate == b.gate_w && found.up == b.up_w && found.down == b.down_w, "the weights", v.name);
        check(found.x == b.x3 && found.ids == b.ids && found.weights == b.weights, "the inputs", v.name);
        check(found.out == b.out, "the output (the last add)", v.name);
        check(found.geglu == (v.glu == 1 ? 1 : 0), "the activation", v.name);
        check(ggml_graph_node(b.gf, at + found.n_nodes - 1) == b.out, "the last node is not the sum", v.name);
    }
    printf("%-44s %s\n", v.name, hits ? "matched" : "not matched");
    ggml_free(b.ctx);
}

bool overlap(const ggml_tensor * a, const ggml_tensor * b) {
    const char * a0 = (const char *) a->data, * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

struct dep {
    ggml_tensor * keep, * until;
};

void collect(void * user, ggml_tensor * keep, ggml_tensor * until) {
    ((std::vector<dep> *) user)->push_back({ keep, until });
}

// N_LAYER layers of a qwen3moe-like decode step (norm, a projection, the
// MoE FFN, the residual), placed by ggml's allocator in a CPU buffer with
// the integration's dependencies or without; how many FFN outputs share
// memory with their inputs.
int overlaps_after_alloc(int nt, bool with_deps, int * n_ffn) {
    const int64_t n_embd = 512, n_ff = 256, n_expert = 32, topk = 8, n_layer = 4;
    ggml_init_params ip = { 64u << 20, nullptr, true };
    ggml_context * c = ggml_init(ip);
    ggml_cgraph * gf = ggml_new_graph_custom(c, 4096, false);
    ggml_tensor * inpL = ggml_new_tensor_2d(c, GGML_TYPE_F32, n_embd, nt);
    ggml_set_input(inpL);
    std::vector<ggml_tensor *> weights_made;
    auto weight = [&](ggml_type t, int64_t a, int64_t b, int64_t d) {
        ggml_tensor * w = ggml_new_tensor_3d(c, t, a, b, d);
        weights_made.push_back(w);
        return w;
    };
    for (int il = 0; il < n_layer; il++) {
        ggml_tensor * cur = ggml_mul_mat(c, weight(GGML_TYPE_Q4_0, n_embd, n_embd, 1), ggml_rms_norm(c, inpL, 1e-6f));
        ggml_tensor * ffn_inp = ggml_add(c, cur, inpL);
        cur = ggml_rms_norm(c, ffn_inp, 1e-6f);
        ggml_tensor * probs = ggml_soft_max(c, ggml_mul_mat(c, weight(GGML_TYPE_F32, n_embd, n_expert, 1), cur));
        ggml_tensor * sel = ggml_argsort_top_k(c, probs, topk);
        ggml_tensor * w = ggml_reshape_2d(c, ggml_get_rows(c, ggml_reshape_3d(c, probs, 1, n_expert, nt), sel), topk, nt);
        w = ggml_reshape_3d(c, ggml_div(c, w, ggml_sum_rows(c, w)), 1, topk, nt);
        ggml_build_forward_expand(gf, w);
        ggml_tensor * x3 = ggml_reshape_3d(c, cur, n_embd, 1, nt);
        ggml_tensor * up = ggml_mul_mat_id(c, weight(GGML_TYPE_Q4_0, n_embd, n_ff, n_expert), x3, sel);
        ggml_tensor * gate = ggml_mul_mat_id(c, weight(GGML_TYPE_Q4_0, n_embd, n_ff, n_expert), x3, sel);
        ggml_tensor * e = ggml_mul_mat_id(c, weight(GGML_TYPE_Q4_0, n_ff, n_embd, n_expert), ggml_swiglu_split(c, gate, up), sel);
        e = ggml_mul(c, e, w);
        ggml_build_forward_expand(gf, e);
        std::vector<ggml_tensor *> v(topk);
        for (int k = 0; k < topk; k++) {
            v[k] = ggml_view_2d(c, e, n_embd, nt, e->nb[2], k * e->nb[1]);
            ggml_build_forward_expand(gf, v[k]);
        }
        ggml_tensor * sum = v[0];
        for (int k = 1; k < topk; k++) {
            sum = ggml_add(c, sum, v[k]);
            ggml_build_forward_expand(gf, sum);
        }
        inpL = ggml_add(c, sum, ffn_inp);
    }
    ggml_tensor * out = ggml_rms_norm(c, inpL, 1e-6f);
    ggml_set_output(out);
    ggml_build_forward_expand(gf, out);
    // the matches on the graph the backend sees, and the dependencies
    std::vector<ggml_strata_ffn_match> ms;
    for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
        ggml_strata_ffn_match m;
        if (ggml_strata_match_moe_ffn(gf, i, m)) {
            ms.push_back(m);
        }
    }
    std::vector<dep> deps;
    if (with_deps) {
        ggml_strata_graph_optimize(gf, collect, &deps);
    }
    // the allocation graph as ggml_backend_sched makes it: after each
    // node a dependency holds back, a no-op node reading what it keeps
    ggml_cgraph * ga = ggml_new_graph_custom(c, 8192, false);
    for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
        ggml_tensor * n = ggml_graph_node(gf, i);
        ggml_graph_add_node(ga, n);
        ggml_tensor * d = nullptr;
        int ns = 0;
        for (const dep & x : deps) {
            if (x.until != n) {
                continue;
            }
            if (!d) {
                d = ggml_view_tensor(c, x.keep);
            }
            d->src[ns++] = x.keep;
        }
        if (d) {
            ggml_graph_add_node(ga, d);
        }
    }
    // the weights live elsewhere (the model's buffer): an address of their own
    static char model[1];
    for (ggml_tensor * w : weights_made) {
        w->data = model;
    }
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    int bad = -1;
    if (ggml_gallocr_alloc_graph(galloc, ga)) {
        bad = 0;
        for (const ggml_strata_ffn_match & m : ms) {
            bad += overlap(m.out, m.x) || overlap(m.out, m.ids) || overlap(m.out, m.weights);
        }
    }
    *n_ffn = (int) ms.size();
    check(!with_deps || deps.size() == 3 * ms.size(), "three dependencies per FFN", "allocation");
    ggml_gallocr_free(galloc);
    ggml_free(c);
    return bad;
}

} // namespace

int main() {
    setenv("GGML_STRATA_FFN", "1", 1); // on (the default); ggml_strata_graph_optimize acts unless it is 0
    std::vector<variant> vs;
    auto add = [&](variant v) { vs.push_back(v); };
    variant q;
    q.name = "qwen3moe 2048/768 e128 top-8, 1 token";
    q.n_embd = 2048;
    q.n_ff = 768;
    q.n_expert = 128;
    q.topk = 8;
    q.nt = 1;
    add(q);
    for (int nt : { 2, 7, 32 }) {
        variant v = q;
        v.nt = nt;
        v.name = nt == 2 ? "qwen3moe, 2 tokens" : nt == 7 ? "qwen3moe, 7 tokens" : "qwen3moe, 32 tokens";
        add(v);
    }
    variant v = q;
    v.name = "up built before gate";
    v.gate_first = false;
    add(v);
    v = q;
    v.name = "views and adds interleaved";
    v.views_first = false;
    add(v);
    v = q;
    v.name = "geglu";
    v.glu = 1;
    add(v);
    const char * other_glu[] = {"", "", "reglu", "geglu (erf)", "swiglu-oai"};
    for (int k = 2; k <= 4; k++) {
        v = q;
        v.name = other_glu[k];
        v.glu = k;
        v.expect = false;
        add(v);
    }
    v = q;
    v.name = "MUL by a full tensor, not the weights";
    v.full_weights = true;
    v.expect = false;
    add(v);
    v = q;
    v.name = "top-2 of 8 experts, 4 tokens";
    v.n_expert = 8;
    v.topk = 2;
    v.nt = 4;
    add(v);
    v = q;
    v.name = "top-16 of 512 experts (36 nodes)";
    v.n_expert = 512;
    v.topk = 16;
    add(v);
    v = q;
    v.name = "top-1 (no adds)";
    v.topk = 1;
    v.expect = false;
    add(v);
    v = q;
    v.name = "down with biases (gpt-oss)";
    v.down_bias = true;
    v.expect = false;
    add(v);
    v = q;
    v.name = "weights before the FFN";
    v.weight_before = true;
    v.expect = false;
    add(v);
    v = q;
    v.name = "up read by another node";
    v.extra_use = true;
    v.expect = false;
    add(v);
    v = q;
    v.name = "the GLU a graph output";
    v.glu_output = true;
    v.expect = false;
    add(v);
    v = q;
    v.name = "other ids made, not used (the control)";
    v.other_ids_built = true;
    add(v);
    v = q;
    v.name = "down routed by other ids";
    v.other_ids = true;
    v.expect = false;
    add(v);
    for (const variant & x : vs) {
        run(x);
    }
    for (int nt : { 1, 2, 8, 32 }) {
        int n_with = 0, n_without = 0;
        const int with = overlaps_after_alloc(nt, true, &n_with), without = overlaps_after_alloc(nt, false, &n_without);
        printf("allocation, %2d tokens: %d FFNs; outputs on their inputs: %d with the dependencies, %d without\n", nt,
               n_with, with, without);
        check(n_with == 4 && n_without == 4, "4 FFNs matched", "allocation");
        check(with == 0, "an FFN output shares memory with its inputs despite the dependencies", "allocation");
        // the reason for the dependencies: without them the allocator puts
        // the output on x (this tree's allocator; a later one may not)
        check(without > 0, "without the dependencies no output met its inputs (the control)", "allocation");
    }
    printf("llama_ffn_match: %d graphs, %d checks, %d failed\n", (int) vs.size(), g_checks, g_fail);
    return g_fail ? 1 : 0;
}
