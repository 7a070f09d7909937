/* How much of a GPU test runs. STRATA_GPU_TEST_SIZE=sanitizer: the variant
 * of each GPU test that tools/device-sanitize.sh runs under
 * compute-sanitizer (which slows kernels 10-100x): fewer shapes, token
 * counts and rows, chosen so that every kernel the full run launches is
 * still launched (every type, lane count, token bucket, rows variant, knob
 * path and grouping).
 *
 * STRATA_GPU_TEST_SHARD=k/n (tools/device-sanitize.sh --shards TEST=N): a
 * long test runs only its k-th of n slices, so that a sanitizer's runs of
 * it fit a device call side by side. A test numbers its independent units
 * of work in a fixed order (a format, a shape) and asks test_shard_next()
 * before each; the n shards together run every unit exactly once. Unset, a
 * test runs whole. A malformed value fails the test rather than run a part
 * of it unnoticed. */
#ifndef ST_GPU_TEST_SIZE_H
#define ST_GPU_TEST_SIZE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata/knobs.h"

__attribute__((unused)) static bool sanitizer_size(void)
{
    const char *v = getenv("STRATA_GPU_TEST_SIZE");
    return v && !strcmp(v, "sanitizer");
}

/* The racecheck size: STRATA_GPU_TEST_SIZE=sanitizer under
 * compute-sanitizer's racecheck (tools/device-sanitize.sh sets
 * STRATA_SANITIZER_TOOL). racecheck looks for shared-memory hazards inside
 * a block, which depend on the kernel and its branches, not on how often
 * it runs, and it is the slowest tool by far (9-57x memcheck per run on an
 * H100, 2026-12-06): where a test repeats a kernel (a token computed alone
 * again, a second token count of one bucket), this size runs it once. */
__attribute__((unused)) static bool racecheck_size(void)
{
    const char *t = getenv("STRATA_SANITIZER_TOOL");
    return sanitizer_size() && t && !strcmp(t, "racecheck");
}

/* At the racecheck size, whether the iq_mmvq path of variant id ROWS (0
 * the default chain) under KNOB (-1 none) at NT tokens on a matrix of
 * N_ROWS rows launches only a kernel that the token counts of
 * TEST_NT_PER_KERNEL up to 8 already launched on that path: every path but
 * the default chain and its staged-grid knob runs more than 8 tokens as
 * chunks of up to 8 (the dp4a kernels of 1..8 tokens again), an mma
 * variant runs 1..8 tokens as one tile (its kernel of 1 token again, on
 * the sweep's shapes of the same stream groups), and the one-row knob is
 * the default itself below 8192 rows, at 1 token and on the matrix units. racecheck looks
 * inside a block, so a kernel's second launch finds nothing its first did
 * not, at 30-120 ms a launch there (2026-12-06, an H100: a 3-row matrix of
 * 8224 values took as long as one of 18 rows). */
__attribute__((unused)) static bool racecheck_repeat(int rows, int knob, int nt, int n_rows)
{
    if (!racecheck_size()) return false;
    const st_mmvq_family f = st_mmvq_variant_of(rows).family;
    /* the one-row knob differs from the default only on the dp4a kernels of
     * several tokens from 8192 rows */
    if (knob == ST_KNOB_MMVQ_ONE_ROW) return n_rows < 8192 || nt == 1 || nt > 8;
    /* the one-pass knob, only on the matrix units at 4 tiles */
    if (knob == ST_KNOB_MMA_ONE_PASS) return nt <= 24;
    if (f == ST_MMVQ_DEFAULT && (knob < 0 || knob == ST_KNOB_IQ_STAGE_GRID_MMVQ)) return false;
    if (f == ST_MMVQ_MMA) return nt > 1 && nt <= 8;
    return nt > 8;
}

/* One token count per kernel, where a test at a sanitizer size runs each
 * kernel once: the dp4a buckets 1, 2, 4 and 8 (1, 2, 3, 5; 3 also gives
 * the matrix-unit variants' 1 tile; 5 is the last count the default of
 * the block-decode formats, iq3_s/iq4_xs/iq4_nl on NVIDIA, runs on dp4a),
 * the default's first count on the matrix units for those formats (6: one
 * tile), and the matrix units' 2, 3 and 4 tiles (9, 17, ST_MAX_TOKENS). A
 * braced list for an array; the test's ST_MAX_TOKENS. */
#define TEST_NT_PER_KERNEL {1, 2, 3, 5, 6, 9, 17, ST_MAX_TOKENS}

/* At a sanitizer size, one line "unit WHAT: S s" with the seconds since
 * the previous call (or the first): where a sanitizer's run spends its
 * time, for the next trim (tools/device-sanitize.sh keeps the logs). */
__attribute__((unused)) static void test_unit_time(const char *what)
{
    static struct timespec last;
    struct timespec now;
    timespec_get(&now, TIME_UTC);
    if (sanitizer_size() && what && (last.tv_sec || last.tv_nsec))
    {
        printf("unit %s: %.1f s\n", what, (double)(now.tv_sec - last.tv_sec) + 1e-9 * (double)(now.tv_nsec - last.tv_nsec));
        fflush(stdout); /* a run its limit cuts still says where it was */
    }
    last = now;
}

static int test_shard_k_ = -1, test_shard_n_ = 1;
static long test_shard_unit_ = 0;

__attribute__((unused)) static void test_shard_init_(void)
{
    if (test_shard_k_ >= 0) return;
    test_shard_k_ = 0;
    const char *v = getenv("STRATA_GPU_TEST_SHARD");
    if (!v || !*v) return;
    int k = -1, n = 0;
    char tail = 0;
    if (sscanf(v, "%d/%d%c", &k, &n, &tail) != 2 || n < 1 || k < 0 || k >= n) {
        fprintf(stderr, "STRATA_GPU_TEST_SHARD='%s': expected k/n with 0 <= k < n\n", v);
        exit(2);
    }
    test_shard_k_ = k;
    test_shard_n_ = n;
}

/* whether the next unit of work is this shard's */
__attribute__((unused)) static bool test_shard_next(void)
{
    test_shard_init_();
    return test_shard_unit_++ % test_shard_n_ == test_shard_k_;
}

/* A test of several cmocka cases sharded by case: OUT (an array as long as
 * TESTS) gets this shard's cases of TESTS in order (case i in shard i % n),
 * N their count; a shard left with none fails the run (more shards than
 * cases) rather than pass on nothing. Unsharded, every case. Run them with
 * _cmocka_run_group_tests(name, OUT, N, setup, teardown). The units of
 * test_shard_next are not used: a case that asked it too would be sharded
 * a second time. */
#define TEST_SHARD_CASES(TESTS, OUT, N)                                                                  \
    do {                                                                                                 \
        test_shard_init_();                                                                              \
        (N) = 0;                                                                                         \
        for (size_t i_ = 0; i_ < sizeof(TESTS) / sizeof((TESTS)[0]); i_++)                               \
            if ((long)i_ % test_shard_n_ == test_shard_k_) (OUT)[(N)++] = (TESTS)[i_];                   \
        if (!(N)) {                                                                                      \
            fprintf(stderr, "STRATA_GPU_TEST_SHARD=%s: more shards than the test's %zu cases\n",         \
                    getenv("STRATA_GPU_TEST_SHARD"), sizeof(TESTS) / sizeof((TESTS)[0]));                \
            exit(2);                                                                                     \
        }                                                                                                \
    } while (0)

/* " (shard k/n)" for a test's summary line, "" when whole */
__attribute__((unused)) static const char *test_shard_label(void)
{
    static char s[48];
    test_shard_init_();
    if (test_shard_n_ == 1) return "";
    snprintf(s, sizeof s, " (shard %d/%d)", test_shard_k_, test_shard_n_);
    return s;
}

#endif
