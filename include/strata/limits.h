/* strata-tune: the limits of the decode entry points.
 *
 * Every entry point (st_iq_mmvq, st_expert_grouped and their _variant
 * forms), the CPU reference, the model reader, the tuner, the gate and the
 * table parser check these and refuse a value beyond them with one message
 * that names the limit; nothing is sized by anything else. A context may
 * serve less (st_ctx_params): its own limits are checked the same way. The
 * kernels' shared-memory arrays are tied to these constants by static
 * assertions. */
#ifndef STRATA_LIMITS_H
#define STRATA_LIMITS_H

/* Activation vectors (tokens) of one call: decode (1), speculative and
 * multi-token-prediction verify batches (16, 24, 32 are common). */
#define ST_MAX_TOKENS 32
/* The token counts of plain decode: what the tuner's mix and the gate take
 * by default (1..ST_DECODE_TOKENS), besides the verify batch sizes. */
#define ST_DECODE_TOKENS 8
/* Experts each token is routed to (top-k): Qwen3-Next routes 10. */
#define ST_MAX_TOPK 16
/* Experts of one MoE layer: Qwen3-Next has 512. */
#define ST_MAX_EXPERTS 512
/* (token, slot) pairs of one expert_grouped call. */
#define ST_MAX_PAIRS (ST_MAX_TOKENS * ST_MAX_TOPK)

#endif
