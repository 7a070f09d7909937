// The MoE FFN matcher of the llama.cpp integration (ggml_strata_match_moe_ffn,
// integrations/llama.cpp/ggml-strata.cu) on graphs built with ggml itself,
// the way llama.cpp's build_moe_ffn builds them (qwen3moe: gate and up
// MUL_MAT_IDs, swiglu, down, the routing weights, the views and adds of the
// top-k sum), and on the variants it must not take: biases (gpt-oss), the
// weights applied before the FFN, an intermediate used elsewhere, a graph
// output inside, a different ids tensor for down, top-1. No GPU: the
// matcher reads the graph only. Built and run by llama_ffn_match_test.sh
// against the shipped tree's headers and its libggml-base.
#include "ggml-strata.cuh"

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
    bool         geglu = false;
    bool         gate_first = true;    // gate's MUL_MAT_ID built before up's
    bool         views_first = true;   // all views, then the adds (else interleaved)
    bool         down_bias = false;    // gpt-oss: ADD_ID after down
    bool         weight_before = false;  // the weights multiply the input instead
    bool         extra_use = false;    // up is read by another node too
    bool         glu_output = false;   // the GLU is a graph output
    bool         other_ids = false;    // down routed by another ids tensor
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
    ggml_tensor * glu = v.geglu ? ggml_geglu_split(c, gate, up) : ggml_swiglu_split(c, gate, up);
    if (v.glu_output) {
        ggml_set_output(glu);
    }
    ggml_tensor * ids_down = b.ids;
    if (v.other_ids) {
        ids_down = ggml_argsort_top_k(c, ggml_soft_max(c, ggml_scale(c, logits, 2.0f)), v.topk);
        ggml_build_forward_expand(b.gf, ids_down);
    }
    ggml_tensor * experts = ggml_mul_mat_id(c, b.down_w, glu, ids_down);
    if (v.down_bias) {
        experts = ggml_add_id(c, experts, ggml_new_tensor_2d(c, GGML_TYPE_F32, v.n_embd, v.n_expert), b.ids);
    }
    if (!v.weight_before) {
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
        check(found.geglu == (v.geglu ? 1 : 0), "the activation", v.name);
        check(ggml_graph_node(b.gf, at + found.n_nodes - 1) == b.out, "the last node is not the sum", v.name);
    }
    printf("%-44s %s\n", v.name, hits ? "matched" : "not matched");
    ggml_free(b.ctx);
}

} // namespace

int main() {
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
    v.geglu = true;
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
    v.name = "down routed by other ids";
    v.other_ids = true;
    v.expect = false;
    add(v);
    for (const variant & x : vs) {
        run(x);
    }
    printf("llama_ffn_match: %d graphs, %d checks, %d failed\n", (int) vs.size(), g_checks, g_fail);
    return g_fail ? 1 : 0;
}
