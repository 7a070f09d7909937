/* Tests: a small GGUF v3 writer (chosen key/value pairs and tensors), and
 * the tiny model of each MoE architecture the model reader knows, with
 * llama.cpp's real key and tensor names (llama.cpp/src/llama-arch.cpp,
 * llama.cpp/gguf-py/gguf/constants.py) and tiny dimensions.
 *
 * Tensor data is random but valid: blocks of a type the library supports are
 * st_random_blocks() blocks that dequantize to finite values of a sane size
 * (a block that does not is drawn again, and left all zero after a few
 * tries, which every ggml format decodes to zeros), f32/f16 tensors are small
 * random floats, any other type random bytes (the library never decodes
 * them). The writer has its own table of ggml block sizes, so it can write
 * types the library does not know. Misuse aborts with a message: this is a
 * test tool. */
#ifndef STRATA_GGUF_GEN_H
#define STRATA_GGUF_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids (the file's numbers), under the writer's own names. */
enum {
    GG_F32 = 0, GG_F16 = 1, GG_Q4_0 = 2, GG_Q4_1 = 3, GG_Q5_0 = 6, GG_Q5_1 = 7, GG_Q8_0 = 8,
    GG_Q2_K = 10, GG_Q3_K = 11, GG_Q4_K = 12, GG_Q5_K = 13, GG_Q6_K = 14, GG_IQ2_XXS = 16, GG_IQ2_XS = 17,
    GG_IQ3_XXS = 18, GG_IQ1_S = 19, GG_IQ4_NL = 20, GG_IQ3_S = 21, GG_IQ2_S = 22, GG_IQ4_XS = 23,
    GG_IQ1_M = 29, GG_BF16 = 30, GG_MXFP4 = 39,
};

typedef struct gg_file gg_file;

typedef struct {
    char name[128];
    int type;
    int n_dims;
    int64_t ne[3];
} gg_tensor_info;

gg_file *gg_new(void);
void gg_free(gg_file *f);

void gg_kv_str(gg_file *f, const char *key, const char *value);
void gg_kv_u32(gg_file *f, const char *key, uint32_t value);
void gg_kv_f32(gg_file *f, const char *key, float value);
/* "<arch>.<field>" = VALUE (u32), with the arch from general.architecture. */
void gg_kv_arch_u32(gg_file *f, const char *field, uint32_t value);

/* A tensor of ggml type TYPE, N_DIMS (1..3) dimensions ne {NE0, NE1, NE2}
 * (ggml order: NE0 is the row length). */
void gg_tensor(gg_file *f, const char *name, int type, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2);
/* The same with the name from a format: gg_tensorf(f, GG_Q4_K, 2, 256, 64, 1, "blk.%d.attn_q.weight", i). */
void gg_tensorf(gg_file *f, int type, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

size_t gg_tensor_count(const gg_file *f);
const gg_tensor_info *gg_tensor_at(const gg_file *f, size_t i);
/* The tensor named NAME, or NULL. */
const gg_tensor_info *gg_find(const gg_file *f, const char *name);

/* The whole file (header, pairs, infos, aligned data) in *BUF (malloc'd;
 * the caller frees), *LEN bytes. Data is drawn from SEED. */
void gg_bytes(const gg_file *f, uint64_t seed, uint8_t **buf, size_t *len);
/* Writes the file to PATH; 0 on success, else -1 with a message on stderr. */
int gg_write(const gg_file *f, uint64_t seed, const char *path);

/* Values and bytes per block of a ggml type the writer knows; false for the
 * others. */
bool gg_type_block(int type, int *values, int *bytes);
/* WANT when the library supports it (st_qtype_valid), else FALLBACK: the
 * models use the formats of real quants where this build has them. */
int gg_pick(int want, int fallback);

/* The architectures gg_arch_model builds, NULL-terminated: "qwen3moe",
 * "qwen2moe", "qwen3next" (512 experts, top-10), "deepseek2", "olmoe",
 * "llama" (mixtral-style: llama with expert_count; its second expert layer
 * is f16, which no expert kernel runs), "gpt-oss" (MXFP4 experts). */
extern const char *const GG_ARCHS[];
/* The tiny model of ARCH (two blocks, n_embd 256), or NULL for an unknown
 * name. */
gg_file *gg_arch_model(const char *arch);

/* Copies every tokenizer.* pair of the GGUF at PATH (a llama.cpp
 * vocabulary file such as models/ggml-vocab-qwen2.gguf) into F verbatim;
 * returns the number of tokens. */
int gg_copy_tokenizer(gg_file *f, const char *path);

/* A qwen3moe that llama.cpp loads and runs: random weights (IQ3_S experts,
 * the down IQ3_S when N_FF is a multiple of 256 else IQ4_NL, Q4_K
 * attention and embedding, Q6_K output, f32 norms and router), heads of 64
 * (a quarter as many kv heads from 8 heads on), the vocabulary VOCAB's. */
typedef struct {
    int n_layer, n_embd, n_ff, n_expert, top_k;
} gg_llama_dims;
gg_file *gg_llama_qwen3moe(const char *vocab, const gg_llama_dims *d);

#endif
