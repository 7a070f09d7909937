/* The GPU interface of a build configured with STRATA_GPU_BACKEND=NONE:
 * every entry answers that this build has no GPU backend. */
#include "gpu.h"
#include "internal.h"

static st_status none(void)
{
    return st_fail(ST_ERR_NO_DEVICE, "this build has no GPU backend (configured with STRATA_GPU_BACKEND=NONE)");
}

st_status st_gpu_open(int device, st_gpu **out, st_identity *id) { *out = NULL; return none(); }
void st_gpu_close(st_gpu *g) {}
st_status st_gpu_alloc(st_gpu *g, size_t bytes, void **ptr) { return none(); }
void st_gpu_free(st_gpu *g, void *ptr) {}
st_status st_gpu_upload(st_gpu *g, void *dst, const void *src, size_t bytes) { return none(); }
st_status st_gpu_download(st_gpu *g, void *dst, const void *src, size_t bytes) { return none(); }
st_status st_gpu_sync(st_gpu *g) { return none(); }
st_status st_gpu_matrix_upload(st_gpu *g, st_qtype t, int64_t rows, int64_t cols,
                               const void *ggml_bytes, st_gpu_matrix *out) { return none(); }
void st_gpu_matrix_free(st_gpu *g, st_gpu_matrix *m) {}
st_status st_gpu_mmvq(st_gpu *g, const st_gpu_matrix *w, const float *x, int nt, float *y,
                      int rows, const st_dispatch_config *cfg) { return none(); }
st_status st_gpu_expert_grouped(st_gpu *g, const st_gpu_experts *ex, const float *x,
                                const int32_t *ids, const float *wts, int nt, int topk,
                                float *out, int gu_rows, int down_rows,
                                const st_dispatch_config *cfg) { return none(); }
st_status st_gpu_timer_start(st_gpu *g) { return none(); }
st_status st_gpu_timer_stop(st_gpu *g, double *ms) { return none(); }
size_t st_gpu_llc_bytes(st_gpu *g) { return 0; }
st_status st_gpu_mem_info(st_gpu *g, size_t *free_b, size_t *total_b)
{
    *free_b = *total_b = 0;
    return none();
}
void st_gpu_default_expert_equiv(int n_embd, int n_ff, const st_dispatch_config *cfg, int *gu, int *dn)
{
    *gu = *dn = 0;
}
st_status st_gpu_probe_read(st_gpu *g, const void *src, size_t bytes, float *sink) { return none(); }
st_status st_gpu_probe_copy(st_gpu *g, void *dst, const void *src, size_t bytes) { return none(); }
st_status st_gpu_probe_empty(st_gpu *g) { return none(); }
st_status st_gpu_probe_loads(st_gpu *g, const st_gpu_matrix *w, float *sink) { return none(); }
