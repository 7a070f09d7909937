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
 * slower default). */
#define STRATA_SELECTION_SPACE 8

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

/* iq_mmvq matrix-instruction variants: 16 rows per block on W warps, warp w
 * taking the canonical streams w, w + W, ... (W divides 32), every weight
 * decoded once for all tokens of the call (kernels/mmvq_mma.h). A rows
 * argument names one as -W (st_iq_mmvq_variant); a table row as "mmaW".
 * X(W). */
#define STRATA_MMVQ_MMA_VARIANTS(X) X(8) X(16) X(32)

/* iq_mmvq split variants: W warps on one row (a block per row). Lane s of
 * warp k % W decodes unit 32 k + s (the k-th unit of stream s) and forms
 * its exact integer dot and factor for every token; after a barrier one
 * thread per (stream, token) adds them in increasing k with the contract's
 * fma (kernels/mmvq_split.h). A rows argument names one as
 * STRATA_MMVQ_SPLIT_BASE + W (st_iq_mmvq_variant); a table row as "splitW".
 * X(W). */
#define STRATA_MMVQ_SPLIT_BASE 100
#define STRATA_MMVQ_SPLIT_VARIANTS(X) X(2) X(4) X(8)

/* iq_mmvq wide-row variants: the default chain's kernel on a row of 128
 * canonical streams (ST_CANON_WIDE_UNITS units or more) with T lanes per
 * row (2 or 4 warps) and R rows per lane group (each activation load shared
 * by R rows), for every n_tokens: the choices the default makes per token
 * bucket and format family (kernels/mmvq_impl.h st_wide_geom), for the tuner
 * to make per machine. They carry no register cap of their own: on NVIDIA
 * the default at 8 tokens is T 64, R 4 capped at 128 registers, which
 * wide64x4 is not. A rows argument names one as STRATA_MMVQ_WIDE_ROWS(T,
 * R); a table row as "wideTxR" (wide64x2). Only for rows of 128 streams: a
 * shorter row refuses them. X(T, R). */
#define STRATA_MMVQ_WIDE_BASE 200
#define STRATA_MMVQ_WIDE_ROWS(T, R) (STRATA_MMVQ_WIDE_BASE + (T) / 32 * 10 + (R))
#define STRATA_MMVQ_WIDE_VARIANTS(X) X(64, 1) X(64, 2) X(64, 4) X(128, 1) X(128, 2) X(128, 4)

/* expert_grouped table variants: plain one-warp-per-row gate-up kernel with
 * GU rows per block, and down kernel with DN rows per block. X(GU, DN). */
#define STRATA_EXPERT_ROWS_VARIANTS(X) \
    X(1, 1) X(2, 2) X(4, 2) X(4, 4) X(8, 4) X(8, 8)

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
      "first-generation grouping: a separate launch builds the expert lists")

#endif
