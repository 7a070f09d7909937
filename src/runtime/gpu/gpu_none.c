/* The GPU side of a build configured with STRATA_GPU_BACKEND=NONE: opening
 * a GPU answers that this build has none, so ST_BACKEND_AUTO uses the CPU. */
#include "backend.h"
#include "internal.h"

st_status st_gpu_backend_open(const st_ctx_params *p, const st_ctx_limits *lim, const st_dispatch_config *cfg,
                              const st_backend_ops **ops, void **b, st_identity *id)
{
    *b = NULL;
    return st_fail(ST_ERR_NO_DEVICE, "this build has no GPU backend (configured with STRATA_GPU_BACKEND=NONE)");
}

size_t st_gpu_workspace_bytes(const st_ctx_limits *lim, const st_dispatch_config *cfg) { return 0; }

size_t st_gpu_layout_bytes(st_qtype t, int64_t rows, int64_t cols) { return 0; }

int st_gpu_device_count(void) { return 0; }

void st_gpu_fail_launch_at(long n) { (void)n; }
