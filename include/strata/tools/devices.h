/* strata-tune tools library: several devices tuned into one folder
 * (tune_decode tune --device LIST|all).
 *
 * Devices whose identities are equal (st_identity_same_device: one table
 * serves them all) form a group; groups of different device models get
 * tables of their own (the file name carries the model) and are tuned one
 * after the other, so no two tunes time the host at once. Inside a group the
 * devices take turns tuning the same shapes into the same folder. The first
 * pass makes the group's table (or merges into the one there). Each later
 * pass measures every shape again on its own device and, by the tuner's
 * re-tune rule, changes a choice only when another candidate is faster than
 * the table's beyond the threshold with the whole interval of its paired
 * change: disagreement within the noise changes nothing. Every pass gates
 * the table it installs on its own device and writes its own report
 * (strata-<model>.devN.autotune.json).
 *
 * The devices agree when, after the last pass that changed a choice, every
 * other device of the group has had a pass that changed nothing: the table
 * then holds one set of choices, gated on every device of the group. After
 * two passes per device without that, they disagree beyond the noise: the
 * table holds the last pass's choices, gated on that pass's device only. */
#ifndef STRATA_TOOLS_DEVICES_H
#define STRATA_TOOLS_DEVICES_H

#include "strata/tools/base.h"

#include "strata/decode.h"
#include "strata/identity.h"
#include "strata/tools/tuner.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most devices one --device value names. */
#define ST_DEVICES_MAX 64

typedef struct {
    int n;       /* devices in the group */
    int passes;  /* passes done */
    int quiet;   /* passes since the last one that changed a choice */
    int changes; /* choices changed by the passes after the first */
    int next;    /* the device (index in the group) of the next pass, -1 when done */
    bool agreed; /* set when done: every device confirmed the table's choices */
} st_devices_plan;

/* A plan for N >= 1 devices: the first pass is device 0's. */
ST_API void st_devices_plan_init(st_devices_plan *p, int n);

/* Records the pass just done, which changed CHANGED choices of the table it
 * found (-1 or 0: none; the first pass's changes are against an earlier
 * campaign, not another device, and do not count), and returns the device
 * of the next pass (index in the group), or -1 when the plan is done
 * (p->agreed says how it ended). */
ST_API int st_devices_plan_step(st_devices_plan *p, int changed);

/* One pass of a group: a tune of one device into the group's folder (the
 * library allocates them: st_devices_run). */
typedef struct {
    int device;        /* st_ctx_device of its context */
    st_status status;  /* st_tune_run's */
    st_tune_result res;
    bool report;       /* its report is there (a refused run reports too; a stopped one does not) */
    char message[512]; /* why it did not end ST_OK, without the library's "tune: " */
} st_devices_pass;

/* Runs the plan over the N contexts CTX of one group (equal identities):
 * st_tune_run on each in turn with O (report_per_device set), until the
 * plan is done or a pass does not end ST_OK. *PASSES (allocated here, at
 * most 2 N; freed with st_devices_passes_free) gets the passes that ran;
 * returns how many (-1 when out of memory, *PASSES NULL). HOOK (may be
 * NULL) is called before (BEFORE true) and after each pass with the index
 * in CTX and the pass number from 1. */
ST_API int st_devices_run(st_ctx *const *ctx, int n, st_tune_options *o, st_devices_plan *plan, st_devices_pass **passes,
                          void (*hook)(void *user, int member, int pass_no, bool before), void *user);
/* Pass I of what st_devices_run gave (index with this, not with the
 * caller's own sizeof: the pass holds an st_tune_result, which grows). */
ST_API const st_devices_pass *st_devices_pass_at(const st_devices_pass *passes, int i);
/* Frees the N passes of st_devices_run (NULL is ok). */
ST_API void st_devices_passes_free(st_devices_pass *passes, int n);

/* GROUP[i] = the group of IDS[i], numbered in first-seen order (devices
 * with equal identities share one); returns the number of groups. */
ST_API int st_devices_group(const st_identity *ids, int n, int *group);

/* The worse of two exit statuses of tune_decode (tune, verify, coverage)
 * run on several devices, so that the one a user must act on is never
 * hidden: a signal (128+N) first, then an error, a failed gate or different
 * bytes (1), usage (2), the table measured slower (4), devices that
 * disagree (5), cannot decide (3), 0. */
ST_API int st_devices_worse_exit(int a, int b);

/* A --device value: "N", a list "N,M,..." of distinct indices 0..1023, or
 * "all" (*ALL set, nothing in OUT). Returns the count in OUT (at most MAX),
 * or -1 with the reason in MSG. */
ST_API int st_devices_parse(const char *v, int *out, int max, bool *all, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
