/* Internal entry points of the CPU reference. */
#ifndef ST_REFERENCE_INTERNAL_H
#define ST_REFERENCE_INTERNAL_H

#include "strata/reference.h"

/* As st_ref_expert_grouped, with separate work splits for the gate-up and
 * the down phase (the CPU backend's rows variants). */
st_status st_ref_expert_grouped_split(const st_expert_weights *ew, const float *x,
                                      const int32_t *ids, const float *wts, int nt, int topk,
                                      float *out, const st_cpu_split *gu_split,
                                      const st_cpu_split *down_split);

#endif
