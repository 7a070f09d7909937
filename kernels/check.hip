/* The checking mode's kernel (STRATA_CHECK=1, src/runtime/ctx.c): the
 * expert ids range-checked on the device, where they live, so only the
 * answer crosses to the host. */
#include "common.h"

/* Each thread one (token, slot) id; an id outside 0..n_expert-1 folds
 * st_bad_id_key(token, slot, value) into *FIRST with an atomic minimum, so
 * the first bad pair in (token, slot) order wins. *FIRST starts at
 * ST_BAD_ID_NONE (all ones) and the host puts it back after reading it. */
__global__ void st_check_ids_kernel(const int32_t *ids, int64_t stride, int nt, int topk, int n_expert,
                                    unsigned long long *first)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= nt * topk) return;
    const int t = i / topk, k = i % topk;
    const int32_t v = ids[(int64_t)t * stride + k];
    if ((unsigned)v >= (unsigned)n_expert) atomicMin(first, st_bad_id_key(t, k, v));
}

st_rt_error st_launch_check_ids(const st_launch &L, const int32_t *ids, int64_t stride, int nt, int topk, int n_expert,
                                unsigned long long *first)
{
    const int n = nt * topk;
    st_check_ids_kernel<<<(unsigned)((n + 255) / 256), 256, 0, L.stream>>>(ids, stride, nt, topk, n_expert, first);
    return st_rt_get_last_error();
}
