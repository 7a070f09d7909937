/* strata-tune: the one list of compiled-in kernel variants, the dispatch
 * knobs, and the constants of the exactness contract.
 *
 * This header is the ONLY place the rows variants are named. The table
 * parser (which values are valid), the GPU launchers (the switch that
 * instantiates the kernels), the CPU backend and the tuner (what to sweep)
 * all expand these lists. Variants are appended, never renumbered or
 * removed; any change that alters what a table row means bumps
 * STRATA_SELECTION_SPACE.
 */
#ifndef STRATA_VARIANTS_H
#define STRATA_VARIANTS_H

#include "strata/version.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel-selection-space token, written in every table header and compared
 * on load. History: 1 = the 2026-11 prototype (docs/DESIGN.md section 8), never
 * shipped; 2 = S=32 canonical streams, row-planar device layout, the lists
 * below; 3 = IQ3_S sign plane transposed, pipelined default iq_mmvq (the
 * same bits, but a table tuned against space 2 compared variants with
 * other kernels: its choices no longer describe this build); 4 = 13 more
 * weight formats (ST_QTYPES: Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, Q6_K,
 * IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, MXFP4: rows of those types mean kernels
 * that did not exist before; the seven earlier formats keep their kernels
 * and bits) and experts per layer up to 512 and top-k up to 16 (ST_MAX_EXPERTS, ST_MAX_TOPK): the
 * expert kernels' shared expert lists and pair arrays are sized by them, so
 * a table measured the kernels with the smaller arrays; 5 = n_tokens up to
 * 32 (the default iq_mmvq takes the matrix units beyond 8 tokens) and the
 * matrix-instruction variants STRATA_MMVQ_MMA_VARIANTS ("mmaW"); 6 = the
 * split variants STRATA_MMVQ_SPLIT_VARIANTS ("splitW", several warps on one
 * row) and a default iq_mmvq with pipelined loads at 4 tokens and, on
 * NVIDIA sm_90+, launched as a dependent of its q8_1 kernel (a table of
 * space 5 compared its variants with another default); 7 = iq_mmvq rows of
 * 256 units or more (K >= 8192) take 128 canonical streams in 4 groups
 * (ST_CANON_WIDE_UNITS): other bits on those rows, and a default that puts
 * several warps on one such row, and the wide-row variants
 * STRATA_MMVQ_WIDE_VARIANTS ("wideTxR"); the IQ4_XS device layout keeps a
 * block's d, scales_h and scales_l in one 8-byte plane; 8 = the same bits
 * and variants, but another default: at 8 tokens on wide rows NVIDIA takes
 * T 64, RW 4 at most 128 registers, and the q8_1 kernel is a dependent of
 * the kernel before it (a table of space 7 compared its variants with the
 * slower default); 9 = the same bits, another default: expert_grouped on
 * the matrix units from STRATA_EXPERT_DEFAULT_MMA_TOKENS tokens (and the
 * knob STRATA_EXPERT_MMA), and on NVIDIA the default iq_mmvq takes 8 warps
 * (mma8) at 17..24 tokens, and beyond 24 for IQ4_NL (a table of space 8
 * compared its variants with the slower default); 10 = the same bits and
 * variants, another default: on NVIDIA the matrix-unit kernels of IQ3_S,
 * IQ4_XS and IQ4_NL decode each round with the whole block, mma8 is
 * compiled for two blocks per SM there, the default iq_mmvq of those
 * formats takes the matrix units from STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS
 * tokens, mma8 beyond 8 tokens (and below on 128-stream rows; mma16 on
 * the 128-stream rows of planar IQ4_NL and in-place IQ4_XS beyond 24),
 * and expert_grouped of those formats the matrix units from
 * STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS tokens (a table of space 9
 * compared its variants with slower defaults); 11 = the same bits and
 * variants, another default: on NVIDIA the default iq_mmvq of planar
 * IQ4_NL and IQ4_XS at 2 tokens takes one row per lane group at any row
 * count (a table of space 10 compared its variants with the slower
 * default there); 12 = the same bits and variants, another default: on
 * NVIDIA the default iq_mmvq of in-place Q4_0 and IQ4_NL at one token
 * copies each warp's blocks to shared memory first where the base and
 * the row stride are 16-aligned (kernels/dot.h st_coop_blocks; a table of
 * space 11 compared its variants with the slower default there); 13 = the
 * same bits and variants, another default and mma8: on NVIDIA the
 * matrix-unit kernel with 8 warps takes a warp's streams in two passes at
 * 25-32 tokens (kernels/mmvq_mma.h st_mma_passes; a table of space 12
 * compared its variants with the slower kernels there); 14 = the same
 * bits and variants, another default: on NVIDIA the default iq_mmvq of
 * planar IQ4_NL takes mma8 (two passes) at 25-32 tokens on 128-stream rows
 * too, where it took mma16 (kernels/mmvq_mma.h st_mma_default_warps; a
 * table of space 13 compared its variants with the slower default
 * there); 15 = the same bits and variants, another default and mma16: on
 * NVIDIA the default iq_mmvq of in-place IQ4_XS takes mma8 (two passes)
 * at 25-32 tokens on 128-stream rows too, where it took mma16, and mma16
 * of IQ3_S, IQ4_XS and IQ4_NL at 9-32 tokens takes 32 rows a block (two
 * row groups sharing each activation fragment; kernels/mmvq_mma.h
 * st_mma_rowgroups; a table of space 14 compared the slower kernels). */
#define STRATA_SELECTION_SPACE 15

/* Exactness contract (docs/DESIGN.md section 2). A row's K values are split into
 * units of ST_CANON_UNIT values (one q8_1 activation block). Unit u belongs
 * to canonical stream u % S; each stream accumulates its units in increasing
 * u with explicit fma. S = ST_CANON_STREAMS (one group of 32), except for an
 * iq_mmvq row of ST_CANON_WIDE_UNITS units or more: there S =
 * ST_CANON_STREAMS * ST_CANON_WIDE_GROUPS (128), and stream s is in group
 * s / 32. Each group's 32 streams are combined by a fixed butterfly (pairs
 * i, i^16 first, then i^8, ..., i^1); a wide row's 4 group values by the
 * same butterfly over 4 (g, g^2 first, then g^1). Any geometry with T <= S
 * lanes per row gives the same bits (a long row can take 4 warps). All four
 * constants are part of the selection space. */
#define ST_CANON_UNIT 32
#define ST_CANON_STREAMS 32
#define ST_CANON_WIDE_UNITS 256
#define ST_CANON_WIDE_GROUPS 4

/* iq_mmvq table variants: a plain one-warp-per-row kernel with R rows (warps)
 * per block. X(R). */
#define STRATA_MMVQ_ROWS_VARIANTS(X) X(1) X(2) X(4) X(8) X(16)

/* iq_mmvq matrix-instruction variants: 16 rows per block on W warps (on
 * NVIDIA, 32 with 16 warps at 9-32 tokens for IQ3_S, IQ4_XS and IQ4_NL),
 * warp w taking the canonical streams w, w + W, ... (W divides 32), every
 * weight decoded once for all tokens of the call (kernels/mmvq_mma.h).
 * Table name "mmaW". X(W). */
#define STRATA_MMVQ_MMA_VARIANTS(X) X(8) X(16) X(32)

/* iq_mmvq split variants: W warps on one row (a block per row). Lane s of
 * warp k % W decodes unit 32 k + s (the k-th unit of stream s) and forms
 * its exact integer dot and factor for every token; after a barrier one
 * thread per (stream, token) adds them in increasing k with the contract's
 * fma (kernels/mmvq_split.h). Table name "splitW". X(W). */
#define STRATA_MMVQ_SPLIT_VARIANTS(X) X(2) X(4) X(8)

/* iq_mmvq wide-row variants: the default chain's kernel on a row of 128
 * canonical streams (ST_CANON_WIDE_UNITS units or more) with T lanes per
 * row (2 or 4 warps) and R rows per lane group (each activation load shared
 * by R rows), for every n_tokens: the choices the default makes per token
 * bucket and format family (kernels/mmvq_impl.h st_wide_geom), for the tuner
 * to make per machine. They carry no register cap of their own: on NVIDIA
 * the default at 8 tokens is T 64, R 4 capped at 128 registers, which
 * wide64x4 is not. Table name "wideTxR" (wide64x2). Only for rows of 128
 * streams: a shorter row refuses them. X(T, R). */
#define STRATA_MMVQ_WIDE_VARIANTS(X) X(64, 1) X(64, 2) X(64, 4) X(128, 1) X(128, 2) X(128, 4)

/* expert_grouped table variants: plain one-warp-per-row gate-up kernel with
 * GU rows per block, and down kernel with DN rows per block. X(GU, DN). */
#define STRATA_EXPERT_ROWS_VARIANTS(X) \
    X(1, 1) X(2, 2) X(4, 2) X(4, 4) X(8, 4) X(8, 8)

/* The default expert_grouped chain runs on the integer matrix units (the
 * STRATA_EXPERT_MMA path: each expert's rows decoded once for all its
 * tokens) from this many tokens on; below it, the (token, slot) pairs in
 * expert order on the dp4a kernels. From STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS
 * on where the gate and the down format both take the block decode (NVIDIA:
 * IQ3_S, IQ4_XS, IQ4_NL, either layout): st_ctx_default_expert_mma_tokens
 * (strata/probe.h) says which for a set of experts. */
#define STRATA_EXPERT_DEFAULT_MMA_TOKENS 24
#define STRATA_EXPERT_BLOCK_DECODE_MMA_TOKENS 16

/* The default iq_mmvq of the formats whose matrix-unit kernels decode a
 * round with the whole block (NVIDIA: IQ3_S, IQ4_XS, IQ4_NL, either layout)
 * runs on the matrix units from STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS tokens
 * on; the other formats, and gfx11, from STRATA_MMVQ_DEFAULT_MMA_TOKENS
 * (the knob STRATA_OLD_IQ_MMVQ: never). st_ctx_stats.mma_launches counts
 * the launches that went there. */
#define STRATA_MMVQ_BLOCK_DECODE_MMA_TOKENS 6
#define STRATA_MMVQ_DEFAULT_MMA_TOKENS 9

/* ---- the variant id: one encoding, owned here -------------------------
 *
 * A table row stores, st_iq_mmvq_variant takes and st_table_lookup_mmvq
 * gives an iq_mmvq variant as one int, its id:
 *
 *   0                              the default chain (never a table row)
 *   R          (1 .. 99)           ST_MMVQ_ROWS: R rows (warps) per block
 *   -W         (-1 .. -99)         ST_MMVQ_MMA: W warps
 *   STRATA_MMVQ_SPLIT_BASE + W     ST_MMVQ_SPLIT: W warps on one row (W < 100)
 *   STRATA_MMVQ_WIDE_BASE + T / 32 * 10 + R
 *                                  ST_MMVQ_WIDE: T lanes per row, R rows per
 *                                  lane group (R 1 .. 9, T 32 .. 1024 in steps of 32)
 *
 * Ids never change meaning (a stored table names them; a new family takes
 * a new range, as MIOpen's solver ids are append-only). Code elsewhere goes
 * through st_mmvq_variant_of / st_mmvq_variant_id and the text functions
 * below (src/contract/variant.c), never through the numbers: renaming or
 * adding a family is this header and that file. An expert variant is the
 * (gate-up rows, down rows) pair itself; "0/0" is the default. */
#define STRATA_MMVQ_SPLIT_BASE 100
#define STRATA_MMVQ_WIDE_BASE 200

typedef enum {
    ST_MMVQ_DEFAULT = 0, /* id 0 */
    ST_MMVQ_ROWS,        /* rows: R rows per block */
    ST_MMVQ_MMA,         /* warps: W */
    ST_MMVQ_SPLIT,       /* warps: W on one row */
    ST_MMVQ_WIDE,        /* lanes: T per row; rows: R per lane group */
    ST_MMVQ_INVALID      /* an id no family encodes */
} st_mmvq_family;

typedef struct {
    st_mmvq_family family;
    int rows;  /* ROWS: rows per block; WIDE: rows per lane group */
    int warps; /* MMA, SPLIT */
    int lanes; /* WIDE */
} st_mmvq_variant;

/* The id of V (no check that it is compiled in: st_mmvq_rows_valid). */
static inline int st_mmvq_variant_id(st_mmvq_variant v)
{
    switch (v.family) {
    case ST_MMVQ_ROWS: return v.rows;
    case ST_MMVQ_MMA: return -v.warps;
    case ST_MMVQ_SPLIT: return STRATA_MMVQ_SPLIT_BASE + v.warps;
    case ST_MMVQ_WIDE: return STRATA_MMVQ_WIDE_BASE + v.lanes / 32 * 10 + v.rows;
    default: return 0;
    }
}

/* The family and parameters id ID encodes (ST_MMVQ_INVALID for none; no
 * check that it is compiled in). Pure: the GPU launchers decode with it. */
static inline st_mmvq_variant st_mmvq_variant_of(int id)
{
    st_mmvq_variant v = {ST_MMVQ_INVALID, 0, 0, 0};
    if (id == 0) v.family = ST_MMVQ_DEFAULT;
    else if (id < 0 && id > -STRATA_MMVQ_SPLIT_BASE) v.family = ST_MMVQ_MMA, v.warps = -id;
    else if (id < 0) return v; /* no family below -99 (and -INT_MIN is no int) */
    else if (id < STRATA_MMVQ_SPLIT_BASE) v.family = ST_MMVQ_ROWS, v.rows = id;
    else if (id < STRATA_MMVQ_WIDE_BASE) v.family = ST_MMVQ_SPLIT, v.warps = id - STRATA_MMVQ_SPLIT_BASE;
    /* T / 32 in 1..32 (a block holds at most 1024 lanes), R in 1..9 */
    else if ((id - STRATA_MMVQ_WIDE_BASE) % 10 && (id - STRATA_MMVQ_WIDE_BASE) / 10 &&
             (id - STRATA_MMVQ_WIDE_BASE) / 10 <= 32)
        v.family = ST_MMVQ_WIDE, v.lanes = (id - STRATA_MMVQ_WIDE_BASE) / 10 * 32, v.rows = (id - STRATA_MMVQ_WIDE_BASE) % 10;
    return v;
}

/* Whether the in-place layout (st_matrix_wrap: ggml's blocks read where
 * the engine holds them) has kernels for id ID: the default chain and the
 * matrix-unit family; the other families are the row-planar layout's. */
static inline bool st_mmvq_in_place_variant(int id)
{
    const st_mmvq_family f = st_mmvq_variant_of(id).family;
    return f == ST_MMVQ_DEFAULT || f == ST_MMVQ_MMA;
}

/* How many variants the lists hold (the default not counted). */
#define STRATA_VARIANT_COUNT1_(a) +1
#define STRATA_VARIANT_COUNT2_(a, b) +1
#define STRATA_MMVQ_VARIANT_COUNT                                                                              \
    (0 STRATA_MMVQ_ROWS_VARIANTS(STRATA_VARIANT_COUNT1_) STRATA_MMVQ_MMA_VARIANTS(STRATA_VARIANT_COUNT1_)     \
         STRATA_MMVQ_SPLIT_VARIANTS(STRATA_VARIANT_COUNT1_) STRATA_MMVQ_WIDE_VARIANTS(STRATA_VARIANT_COUNT2_))
#define STRATA_EXPERT_VARIANT_COUNT (0 STRATA_EXPERT_ROWS_VARIANTS(STRATA_VARIANT_COUNT2_))

/* The id of one entry of each list, for the X-macro expansions. */
#define STRATA_MMVQ_ID_ROWS(R) (R)
#define STRATA_MMVQ_ID_MMA(W) (-(W))
#define STRATA_MMVQ_ID_SPLIT(W) (STRATA_MMVQ_SPLIT_BASE + (W))
#define STRATA_MMVQ_ID_WIDE(T, R) (STRATA_MMVQ_WIDE_BASE + (T) / 32 * 10 + (R))

/* Dispatch knobs: environment variables that reroute the default decode
 * dispatch to an alternative path (which keeps the exactness contract). A
 * table measured the default dispatch, so the loader refuses while any knob
 * is active. X(ID, ENV, WHEN, WHAT):
 *   WHEN NULL   -> active when set to anything but "" or "0";
 *   WHEN "v"    -> active when set to exactly "v".                       */
#define STRATA_DISPATCH_KNOBS(X)                                                   \
    X(OLD_IQ_MMVQ, "STRATA_OLD_IQ_MMVQ", NULL,                                     \
      "legacy iq_mmvq: ggml block_q8_1 activations read with 4-byte loads, one "   \
      "row per single-warp block")                                                 \
    X(NO_SUB16_GU, "STRATA_NO_SUB16_GU", NULL,                                     \
      "expert gate-up never uses fewer than 16 lanes per row")                     \
    X(IQ_STAGE_GRID_OFF, "STRATA_IQ_STAGE_GRID", "0",                              \
      "expert kernels read the IQ grids from global memory instead of LDS")        \
    X(IQ_STAGE_GRID_MMVQ, "STRATA_IQ_STAGE_GRID_MMVQ", "1",                        \
      "iq_mmvq stages the IQ grids in LDS")                                        \
    X(EXPERT_V2, "STRATA_EXPERT_V2", NULL,                                         \
      "per-token expert kernels: no grouping, weights read once per token")        \
    X(EXPERT_V2K, "STRATA_EXPERT_V2K", NULL,                                       \
      "k-split expert kernels: stream partials to memory, separate combine")       \
    X(TSUM, "STRATA_TSUM", NULL,                                                   \
      "down projection writes per-slot outputs; a separate launch sums top-k")     \
    X(GROUPED_V1, "STRATA_GROUPED_V1", NULL,                                       \
      "first-generation grouping: a separate launch builds the expert lists")     \
    X(EXPERT_MMA, "STRATA_EXPERT_MMA", NULL,                                       \
      "expert kernels on the integer matrix units: each expert's rows decoded "   \
      "once for all its tokens; a separate launch sums top-k")                     \
    X(MMVQ_ONE_ROW, "STRATA_MMVQ_ONE_ROW", NULL,                                   \
      "the default iq_mmvq on dp4a takes one row per lane group at any row "      \
      "count (not two from 8192 rows)")                                           \
    X(MMA_ONE_PASS, "STRATA_MMA_ONE_PASS", NULL,                                   \
      "the matrix-unit iq_mmvq with 8 warps takes a warp's 4 streams in one "     \
      "pass over the row at 25-32 tokens (not two passes of 2)")


/* ---- the variants as ids, names and lists (src/contract/variant.c) ---- */

/* Whether ID is a compiled-in iq_mmvq variant (0, the default, is not). */
ST_API bool st_mmvq_rows_valid(int id);
/* The fewest values a row must have for variant ID (0 for most; a
 * wide-row variant needs ST_CANON_WIDE_UNITS units: 128 streams), or -1
 * when ID is not compiled in. */
ST_API int st_mmvq_variant_min_cols(int id);
/* Whether variant ID is compiled in and runs on rows of COLS values. */
ST_API bool st_mmvq_variant_fits(int id, int64_t cols);
/* Every compiled-in iq_mmvq variant id in list order (ROWS, MMA, SPLIT,
 * WIDE) into IDS (at most MAX); returns how many there are. */
ST_API int st_mmvq_variant_ids(int *ids, int max);
/* How a table row names variant ID: "4", "mma16", "split2", "wide64x2";
 * "default" for 0. Writes into BUF (always terminated), returns BUF. */
ST_API const char *st_mmvq_variant_name(int id, char *buf, size_t n);
/* How reports, bench and the tables index name a choice: "rows 4",
 * "mma16", "split2", "wide64x2", "default". */
ST_API const char *st_mmvq_choice_name(int id, char *buf, size_t n);
/* Parses a table row's name S[0..N) (st_mmvq_variant_name's form) into
 * *ID; false for anything that is not a compiled-in variant (a split or
 * wide variant is named, never numbered). */
ST_API bool st_mmvq_variant_parse(const char *s, size_t n, int *id);
/* The compiled-in names, space-separated ("1 2 4 8 16 mma8 ..."), for
 * messages. */
ST_API const char *st_mmvq_variant_list(char *buf, size_t n);

/* Whether (GU, DN) is a compiled-in expert rows pair (0/0, the default,
 * is not). */
ST_API bool st_expert_rows_valid(int gu, int dn);
/* Every compiled-in pair in list order into PAIRS (at most MAX); returns
 * how many there are. */
ST_API int st_expert_variant_ids(int (*pairs)[2], int max);
/* "8/4" ("default" for 0/0), and as a choice "rows 8/4". */
ST_API const char *st_expert_variant_name(int gu, int dn, char *buf, size_t n);
ST_API const char *st_expert_choice_name(int gu, int dn, char *buf, size_t n);
/* Parses "G/D" (S[0..N)) into a compiled-in pair; false otherwise. */
ST_API bool st_expert_variant_parse(const char *s, size_t n, int *gu, int *dn);
/* "1/1 2/2 4/2 ...", for messages. */
ST_API const char *st_expert_variant_list(char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
