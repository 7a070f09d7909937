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
#define st_rt_memset(d, v, n, st) hipMemsetAsync(d, v, n, st)
#define st_rt_stream_create(s) hipStreamCreateWithFlags(s, hipStreamNonBlocking)
#define st_rt_stream_destroy hipStreamDestroy
#define st_rt_stream_sync hipStreamSynchronize
#define st_rt_event_create hipEventCreate
#define st_rt_event_destroy hipEventDestroy
#define st_rt_event_record hipEventRecord
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
#define st_rt_memset(d, v, n, st) cudaMemsetAsync(d, v, n, st)
#define st_rt_stream_create(s) cudaStreamCreateWithFlags(s, cudaStreamNonBlocking)
#define st_rt_stream_destroy cudaStreamDestroy
#define st_rt_stream_sync cudaStreamSynchronize
#define st_rt_event_create cudaEventCreate
#define st_rt_event_destroy cudaEventDestroy
#define st_rt_event_record cudaEventRecord
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

/* Launch bounds with a minimum of resident blocks per multiprocessor (a
 * register cap) on NVIDIA; HIP's second argument means waves per EU, so
 * there only the block size is given (the gfx1100 budget is checked by
 * tools/gfx1100-check.sh). */
#if ST_HIP
#define ST_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads)
#else
#define ST_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
#endif

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

/* Lanes of the warp whose predicate is true, as a 32-bit mask. */
ST_DEV uint32_t st_ballot(bool p)
{
#if ST_HIP
    return (uint32_t)__ballot(p);
#else
    return __ballot_sync(0xffffffffu, p);
#endif
}

#endif /* ST_HOST_EMULATION */
#endif
