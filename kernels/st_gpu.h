/* The one portability header: every vendor name (hip* / cuda*, shuffles,
 * int8 dot, byte permutes, events, streams) appears here and nowhere else.
 * Kernel sources are .hip files that compile as HIP (clang, gfx1100) or as
 * CUDA (nvcc, sm_90). Warps are 32 lanes on both targets (RDNA3 runs HIP in
 * wave32). */
#ifndef ST_GPU_PORT_H
#define ST_GPU_PORT_H

#include <new>
#include <type_traits>

#include <stdint.h>
#include <stdio.h>

#if defined(ST_HOST_EMULATION)
#include "st_gpu_emu.h" /* host C++ stand-ins, for the unit decoders' CPU test */
#else

#if defined(__HIP__) || defined(__HIPCC__)
#define ST_HIP 1
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#else
#define ST_CUDA 1
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#endif

#define ST_WARP 32

#if ST_HIP
typedef hipError_t st_rt_error;
typedef hipStream_t st_rt_stream;
typedef hipEvent_t st_rt_event;
#define ST_RT_SUCCESS hipSuccess
#define ST_RT_INVALID_VALUE hipErrorInvalidValue
#define st_rt_error_string hipGetErrorString
#define st_rt_get_last_error hipGetLastError
#define st_rt_malloc hipMalloc
#define st_rt_free hipFree
#define st_rt_memcpy_htod(d, s, n, st) hipMemcpyAsync(d, s, n, hipMemcpyHostToDevice, st)
#define st_rt_memcpy_dtoh(d, s, n, st) hipMemcpyAsync(d, s, n, hipMemcpyDeviceToHost, st)
#define st_rt_memcpy_dtod(d, s, n, st) hipMemcpyAsync(d, s, n, hipMemcpyDeviceToDevice, st)
#define st_rt_memcpy2d_dtod(d, dp, s, sp, w, h, st) hipMemcpy2DAsync(d, dp, s, sp, w, h, hipMemcpyDeviceToDevice, st)
#define st_rt_memset(d, v, n, st) hipMemsetAsync(d, v, n, st)
#define st_rt_stream_create(s) hipStreamCreateWithFlags(s, hipStreamNonBlocking)
#define st_rt_stream_destroy hipStreamDestroy
#define st_rt_stream_sync hipStreamSynchronize
#define st_rt_event_create hipEventCreate
#define st_rt_event_destroy hipEventDestroy
#define st_rt_event_record hipEventRecord
#define st_rt_stream_wait_event(s, e) hipStreamWaitEvent(s, e, 0)
#define st_rt_event_sync hipEventSynchronize
#define st_rt_event_elapsed hipEventElapsedTime
#define st_rt_set_device hipSetDevice
#define st_rt_get_device_count hipGetDeviceCount
#define st_rt_runtime_version hipRuntimeGetVersion
#define st_rt_driver_version hipDriverGetVersion
#define st_rt_func_set_smem(f, n) hipFuncSetAttribute((const void *)(f), hipFuncAttributeMaxDynamicSharedMemorySize, n)
#define st_rt_get_device hipGetDevice
#define st_rt_mem_info hipMemGetInfo
typedef hipGraph_t st_rt_graph;
typedef hipGraphExec_t st_rt_graph_exec;
#define st_rt_begin_capture(s) hipStreamBeginCapture(s, hipStreamCaptureModeGlobal)
#define st_rt_end_capture hipStreamEndCapture
#define st_rt_graph_instantiate(e, g) hipGraphInstantiate(e, g, nullptr, nullptr, 0)
#define st_rt_graph_launch hipGraphLaunch
#define st_rt_graph_exec_destroy hipGraphExecDestroy
#define st_rt_graph_destroy hipGraphDestroy
/* What P is to the runtime (the checking mode, STRATA_CHECK=1): 1 device
 * memory (*DEVICE: its device), 2 managed, 0 host memory or a pointer the
 * runtime does not know (its error is cleared). */
static inline int st_rt_pointer_kind(const void *p, int *device)
{
    hipPointerAttribute_t a;
    if (hipPointerGetAttributes(&a, p) != hipSuccess) {
        (void)hipGetLastError();
        return 0;
    }
    *device = a.device;
#if HIP_VERSION_MAJOR >= 6
    const hipMemoryType t = a.type;
#else
    const hipMemoryType t = a.memoryType; /* ROCm 5's name of the field */
#endif
    return a.isManaged ? 2 : t == hipMemoryTypeDevice ? 1 : 0;
}
static inline bool st_rt_stream_capturing(st_rt_stream s)
{
    hipStreamCaptureStatus c = hipStreamCaptureStatusNone;
    return hipStreamIsCapturing(s, &c) == hipSuccess && c == hipStreamCaptureStatusActive;
}
#else
typedef cudaError_t st_rt_error;
typedef cudaStream_t st_rt_stream;
typedef cudaEvent_t st_rt_event;
#define ST_RT_SUCCESS cudaSuccess
#define ST_RT_INVALID_VALUE cudaErrorInvalidValue
#define st_rt_error_string cudaGetErrorString
#define st_rt_get_last_error cudaGetLastError
#define st_rt_malloc cudaMalloc
#define st_rt_free cudaFree
#define st_rt_memcpy_htod(d, s, n, st) cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, st)
#define st_rt_memcpy_dtoh(d, s, n, st) cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, st)
#define st_rt_memcpy_dtod(d, s, n, st) cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, st)
#define st_rt_memcpy2d_dtod(d, dp, s, sp, w, h, st) cudaMemcpy2DAsync(d, dp, s, sp, w, h, cudaMemcpyDeviceToDevice, st)
#define st_rt_memset(d, v, n, st) cudaMemsetAsync(d, v, n, st)
#define st_rt_stream_create(s) cudaStreamCreateWithFlags(s, cudaStreamNonBlocking)
#define st_rt_stream_destroy cudaStreamDestroy
#define st_rt_stream_sync cudaStreamSynchronize
#define st_rt_event_create cudaEventCreate
#define st_rt_event_destroy cudaEventDestroy
#define st_rt_event_record cudaEventRecord
#define st_rt_stream_wait_event(s, e) cudaStreamWaitEvent(s, e, 0)
#define st_rt_event_sync cudaEventSynchronize
#define st_rt_event_elapsed cudaEventElapsedTime
#define st_rt_set_device cudaSetDevice
#define st_rt_get_device_count cudaGetDeviceCount
#define st_rt_runtime_version cudaRuntimeGetVersion
#define st_rt_driver_version cudaDriverGetVersion
#define st_rt_func_set_smem(f, n) cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, n)
#define st_rt_get_device cudaGetDevice
#define st_rt_mem_info cudaMemGetInfo
typedef cudaGraph_t st_rt_graph;
typedef cudaGraphExec_t st_rt_graph_exec;
#define st_rt_begin_capture(s) cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal)
#define st_rt_end_capture cudaStreamEndCapture
#define st_rt_graph_instantiate(e, g) cudaGraphInstantiate(e, g, 0)
#define st_rt_graph_launch cudaGraphLaunch
#define st_rt_graph_exec_destroy cudaGraphExecDestroy
#define st_rt_graph_destroy cudaGraphDestroy
static inline int st_rt_pointer_kind(const void *p, int *device)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    *device = a.device;
    return a.type == cudaMemoryTypeDevice ? 1 : a.type == cudaMemoryTypeManaged ? 2 : 0;
}
static inline bool st_rt_stream_capturing(st_rt_stream s)
{
    cudaStreamCaptureStatus c = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(s, &c) == cudaSuccess && c == cudaStreamCaptureStatusActive;
}
#endif

/* Architecture token ("gfx1100", "sm_90") and marketing name of DEVICE. */
static inline st_rt_error st_rt_device_info(int device, char *arch, size_t na, char *name, size_t nn)
{
#if ST_HIP
    hipDeviceProp_t prop;
    st_rt_error e = hipGetDeviceProperties(&prop, device);
    if (e != hipSuccess) return e;
    snprintf(arch, na, "%s", prop.gcnArchName);
    for (char *c = arch; *c; c++)
        if (*c == ':') *c = '\0'; /* drop feature flags (":sramecc+:xnack-") */
#else
    cudaDeviceProp prop;
    st_rt_error e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) return e;
    snprintf(arch, na, "sm_%d%d", prop.major, prop.minor);
#endif
    snprintf(name, nn, "%s", prop.name);
    return e;
}

/* Whether kernels on DEVICE may be launched as programmatic dependents of
 * the kernel before them in the stream (NVIDIA sm_90 and later: the
 * dependent is launched while its predecessor runs and waits for it with
 * st_grid_dep_wait). Never on HIP. */
static inline bool st_rt_dependent_launch(int device)
{
#if ST_HIP
    (void)device;
    return false;
#else
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) v = 0;
    return v >= 9;
#endif
}

#if ST_CUDA
/* NVIDIA only (HIP has no programmatic dependent launch, so callers guard
 * these with ST_CUDA and launch as usual there). */

/* Launches KERNEL on STREAM as a programmatic dependent of the kernel before
 * it in the stream (kernels/common.h's st_launch_dependent decides when),
 * ARGS converted to the kernel's parameter types as a <<<>>> launch does. */
template <typename... P, typename... A>
static inline st_rt_error st_rt_launch_as_dependent(void (*kernel)(P...), unsigned grid, unsigned block,
                                                    st_rt_stream stream, const A &...args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...);
}

/* The PTX version KERNEL was compiled for (90 for sm_90), 0 when the runtime
 * cannot say; that error is cleared so the next launch's check does not
 * report it. */
template <typename... P> static inline int st_rt_func_ptx_version(void (*kernel)(P...))
{
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, kernel) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.ptxVersion;
}
#endif

/* Compute units (AMD) or streaming multiprocessors (NVIDIA) of DEVICE, 0
 * when the runtime does not say; part of the device model token. */
static inline int st_rt_compute_units(int device)
{
    int v = 0;
#if ST_HIP
    if (hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, device) != hipSuccess) v = 0;
#else
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) v = 0;
#endif
    return v > 0 ? v : 0;
}

/* Last-level cache bytes the runtime reports (L2; AMD's Infinity Cache is
 * not in it: src/runtime/devinfo.c knows those). */
static inline size_t st_rt_l2_bytes(int device)
{
    int v = 0;
#if ST_HIP
    if (hipDeviceGetAttribute(&v, hipDeviceAttributeL2CacheSize, device) != hipSuccess) v = 0;
#else
    if (cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device) != cudaSuccess) v = 0;
#endif
    return v > 0 ? (size_t)v : 0;
}

/* ---- device helpers ----------------------------------------------------- */
#define ST_DEV static __device__ __forceinline__
#define ST_DEVM __device__ __forceinline__ /* for static member functions */

/* Launch bounds with a minimum of resident blocks per multiprocessor (a
 * register cap) on NVIDIA; HIP's second argument means waves per EU, so
 * there only the block size is given (the gfx1100 budget is checked by
 * tools/gfx1100-check.sh). */
#if ST_HIP
#define ST_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#else
#define ST_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#endif

/* Programmatic dependent launch (NVIDIA sm_90+; no-ops elsewhere and for a
 * kernel launched without the attribute). st_grid_dep_wait: this grid's
 * code after it runs once the kernel before it in the stream has finished
 * and its writes are visible, so nothing before it may read what that
 * kernel writes. st_grid_dep_release: the kernel after this one (when
 * launched as a dependent) may start now. */
ST_DEV void st_grid_dep_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

ST_DEV void st_grid_dep_release()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Butterfly exchange within groups of WIDTH lanes. */
ST_DEV float st_shfl_xor(float v, int mask, int width)
{
#if ST_HIP
    return __shfl_xor(v, mask, width);
#else
    return __shfl_xor_sync(0xffffffffu, v, mask, width);
#endif
}

ST_DEV int st_shfl_xor_i(int v, int mask, int width)
{
#if ST_HIP
    return __shfl_xor(v, mask, width);
#else
    return __shfl_xor_sync(0xffffffffu, v, mask, width);
#endif
}

/* c + dot of four signed bytes of a with four signed bytes of b. */
ST_DEV int st_dot4_i8(int a, int b, int c)
{
#if ST_HIP
    return __builtin_amdgcn_sudot4(true, a, true, b, c, false);
#else
    return __dp4a(a, b, c);
#endif
}

/* Byte permutes (one per vendor, see st_lut16.h) and the 16-entry nibble
 * table lookup built on them. */
#if ST_HIP
#define st_perm_byte(s0, s1, sel) __builtin_amdgcn_perm(s0, s1, sel)
#define ST_HAVE_PERM_BYTE 1
#else
#define st_perm_nib(x, y, s) __byte_perm(x, y, s)
#define ST_HAVE_PERM_NIB 1
#endif
#include "st_lut16.h"

ST_DEV void st_lut16(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
#if ST_HIP
    st_lut16_byte(q, tab, lo, hi);
#else
    st_lut16_nib(q, tab, lo, hi);
#endif
}

ST_DEV uint32_t st_zip_bytes(uint32_t x, uint32_t y, int half)
{
#if ST_HIP
    return st_zip_bytes_byte(x, y, half);
#else
    return st_zip_bytes_nib(x, y, half);
#endif
}

/* A load that sees other blocks' stores made before their __threadfence
 * and a ticket atomic (bypasses the non-coherent L1). */
ST_DEV float st_ld_coherent(const float *p)
{
#if ST_HIP
    return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
    return __ldcg(p);
#endif
}

/* Read-only global load through the non-coherent cache where it exists. */
template <typename T> ST_DEV T st_ldg(const T *p)
{
#if ST_HIP
    return *p;
#else
    return __ldg(p);
#endif
}

/* The 32 bits of HI:LO from bit SH (0..31) on: a funnel shift. */
ST_DEV uint32_t st_funnel_r(uint32_t lo, uint32_t hi, uint32_t sh)
{
#if ST_HIP
    return __builtin_amdgcn_alignbit(hi, lo, sh);
#else
    return __funnelshift_r(lo, hi, sh);
#endif
}

/* How units.h reads 2-aligned (and MXFP4's 1-aligned) spans of the
 * in-place layout: 1, as 4-aligned u32 loads and a funnel shift (NVIDIA:
 * nvcc keeps u16 and u8 loads apart, a misaligned wider one faults); 0, as
 * u16 pairs or bytes (gfx11, where the compiler merges them into wide
 * loads, the hardware's unaligned access mode being on; the funnel shifts
 * measured 31 more vector instructions per Q3_K and Q6_K unit there,
 * tools/isa_count.py). */
#ifndef ST_FUNNEL_LOADS /* -DST_FUNNEL_LOADS=0/1 to measure the other way */
#if ST_HIP
#define ST_FUNNEL_LOADS 0
#else
#define ST_FUNNEL_LOADS 1
#endif
#endif

/* A load of a T at byte address P, which must be aligned to sizeof(T) (a
 * GPU faults on a misaligned load; the host emulation checks it). The
 * in-place layout's loads (units.h) go through it. */
template <typename T> ST_DEV T st_ld_at(const uint8_t *p) { return *(const T *)p; }

/* Exact f16 -> f32 of raw bits (hardware conversion; exact on both). */
ST_DEV float st_h2f(uint16_t h)
{
#if ST_HIP
    return __half2float(__ushort_as_half(h));
#else
    return __half2float(__ushort_as_half(h));
#endif
}

ST_DEV int st_popc(uint32_t v) { return __popc(v); }

/* 16 bytes from global SRC to shared DST, both 16-aligned, without a
 * register in between (NVIDIA sm_80+: cp.async.cg, cached in L2 only);
 * st_cp_async_commit closes this thread's group of copies, and
 * st_cp_async_wait<N> waits until at most N of its groups are pending
 * (a barrier after it shows the copies to the other lanes). Only NVIDIA
 * builds call them (dot.h st_coop_blocks); elsewhere a plain copy. */
ST_DEV void st_cp_async16(void *dst, const void *src)
{
#if defined(ST_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#else
    *(uint4 *)dst = *(const uint4 *)src;
#endif
}

ST_DEV void st_cp_async_commit()
{
#if defined(ST_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N> ST_DEV void st_cp_async_wait()
{
#if defined(ST_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* Lanes of the warp whose predicate is true, as a 32-bit mask. */
ST_DEV uint32_t st_ballot(bool p)
{
#if ST_HIP
    return (uint32_t)__ballot(p);
#else
    return __ballot_sync(0xffffffffu, p);
#endif
}

/* The lanes of the warp meet: shared-memory writes before it are seen by
 * every lane of the warp after it (on gfx11 a wave runs in lockstep, and
 * the fences keep the compiler from moving LDS accesses across). */
ST_DEV void st_syncwarp()
{
#if ST_HIP
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
    __syncwarp();
#endif
}

/* Value of V in lane SRC (0..31) of the warp. */
ST_DEV float st_shfl_idx(float v, int src)
{
#if ST_HIP
    return __shfl(v, src, 32);
#else
    return __shfl_sync(0xffffffffu, v, src, 32);
#endif
}

ST_DEV int st_shfl_idx_i(int v, int src)
{
#if ST_HIP
    return __shfl(v, src, 32);
#else
    return __shfl_sync(0xffffffffu, v, src, 32);
#endif
}

/* ---- integer matrix instructions --------------------------------------
 * One warp multiplies a tile of 16 weight rows x 32 values (one unit) with
 * the same 32 values of TOK activation vectors: C[r][n] = sum_k A[r][k] *
 * B[k][n], int8 x int8 -> int32, exact. Where each lane's operands sit:
 * word w of a unit row is values 4w..4w+3 (k), A element i of a lane is
 * (row a_row(lane, i), word a_word(lane, i)), B element i is (token
 * b_tok(lane), word b_word(lane, i)), C element i is (row c_row, token
 * c_tok). mma32 sums all 32 values; mma16x2 gives the two 16-value halves
 * apart (formats with integer factors per 16 values).
 *   NVIDIA sm_80+: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (TOK 8;
 *     the halves with two m16n8k16), the fragment layout of the PTX ISA.
 *   AMD gfx11 (wave32): two v_wmma_i32_16x16x16_iu8 per unit (TOK 16); lane
 *     l holds row l%16 of A and token l%16 of B (lanes 16-31 repeat 0-15),
 *     C element i is row 2i + l/16, token l%16 (LLVM AMDGPU, RDNA3 ISA). */
struct st_mma {
#if ST_HIP
    static constexpr int TOK = 16, NA = 8, NB = 8, NC = 8;
    static ST_DEVM int a_row(int lane, int) { return lane & 15; }
    static ST_DEVM int a_word(int, int i) { return i; }
    static ST_DEVM int b_tok(int lane) { return lane & 15; }
    static ST_DEVM int b_word(int, int i) { return i; }
    static ST_DEVM int c_row(int lane, int i) { return 2 * i + (lane >> 4); }
    static ST_DEVM int c_tok(int lane, int) { return lane & 15; }
    /* the tiled activations (common.h st_xtile): a lane reads its token's
     * 32 bytes in order */
    static ST_DEVM int x_pos(int w) { return w; }
    typedef int v4i __attribute__((ext_vector_type(4)));
    typedef int v8i __attribute__((ext_vector_type(8)));
    static ST_DEVM v8i wmma(const uint32_t *a, const uint32_t *b, v8i c)
    {
        const v4i va = {(int)a[0], (int)a[1], (int)a[2], (int)a[3]};
        const v4i vb = {(int)b[0], (int)b[1], (int)b[2], (int)b[3]};
        return __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, va, true, vb, c, false);
    }
    static ST_DEVM void mma32(int (&c)[NC], const uint32_t (&a)[NA], const uint32_t (&b)[NB])
    {
        v8i r = {0, 0, 0, 0, 0, 0, 0, 0};
        r = wmma(a, b, r);
        r = wmma(a + 4, b + 4, r);
        for (int i = 0; i < NC; i++) c[i] = r[i];
    }
    static ST_DEVM void mma16x2(int (&c0)[NC], int (&c1)[NC], const uint32_t (&a)[NA], const uint32_t (&b)[NB])
    {
        const v8i z = {0, 0, 0, 0, 0, 0, 0, 0};
        const v8i r0 = wmma(a, b, z), r1 = wmma(a + 4, b + 4, z);
        for (int i = 0; i < NC; i++) {
            c0[i] = r0[i];
            c1[i] = r1[i];
        }
    }
#else
    static constexpr int TOK = 8, NA = 4, NB = 2, NC = 4;
    static ST_DEVM int a_row(int lane, int i) { return (lane >> 2) + 8 * (i & 1); }
    static ST_DEVM int a_word(int lane, int i) { return (lane & 3) + 4 * (i >> 1); }
    static ST_DEVM int b_tok(int lane) { return lane >> 2; }
    static ST_DEVM int b_word(int lane, int i) { return (lane & 3) + 4 * i; }
    static ST_DEVM int c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
    static ST_DEVM int c_tok(int lane, int i) { return 2 * (lane & 3) + (i & 1); }
    /* the tiled activations (common.h st_xtile): word w of a token at word
     * position x_pos(w), so that lane l's B words (t, t + 4 of token l / 4)
     * are the 8 bytes at 8 l of the tile's unit */
    static ST_DEVM int x_pos(int w) { return 2 * (w & 3) + (w >> 2); }
    static ST_DEVM void mma32(int (&c)[NC], const uint32_t (&a)[NA], const uint32_t (&b)[NB])
    {
        c[0] = c[1] = c[2] = c[3] = 0;
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};"
                     : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
    static ST_DEVM void mma16x2(int (&c0)[NC], int (&c1)[NC], const uint32_t (&a)[NA], const uint32_t (&b)[NB])
    {
        c0[0] = c0[1] = c0[2] = c0[3] = 0;
        c1[0] = c1[1] = c1[2] = c1[3] = 0;
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                     : "+r"(c0[0]), "+r"(c0[1]), "+r"(c0[2]), "+r"(c0[3])
                     : "r"(a[0]), "r"(a[1]), "r"(b[0]));
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                     : "+r"(c1[0]), "+r"(c1[1]), "+r"(c1[2]), "+r"(c1[3])
                     : "r"(a[2]), "r"(a[3]), "r"(b[1]));
    }
#endif
};

#endif /* ST_HOST_EMULATION */
#endif
