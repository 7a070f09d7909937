/* What the library knows about devices beyond what their runtime reports:
 * the last-level cache each architecture really has (AMD's Infinity Cache
 * is not in the L2 size HIP reports), and whether this build carries code
 * for a device's architecture. Pure functions, tested on the CPU
 * (tests/runtime/devinfo_test.c). Internal. */
#ifndef ST_DEVINFO_H
#define ST_DEVINFO_H

#include <stdbool.h>
#include <stddef.h>

/* The last-level cache of a device of ARCH named NAME with CUS compute
 * units, whose runtime reports REPORTED bytes of L2: the larger of REPORTED
 * and the per-arch table's figure. *SOURCE (never NULL) says where the
 * figure comes from ("AMD Radeon RX 7900 XTX: 96 MB Infinity Cache (AMD
 * product specifications)", "L2 as the runtime reports it"). */
size_t st_llc_lookup(const char *arch, const char *name, int cus, size_t reported, const char **source);

/* Whether GPU code built for ARCHS runs on a device of arch DEV.
 * HIP: ARCHS is the offload-arch list ("gfx1100;gfx1101"; ',' or ' ' also
 * separate; ":feature" suffixes are ignored), and only the same arch runs
 * (code objects are per arch). CUDA: DEV is "sm_XY" and ARCHS the
 * CMAKE_CUDA_ARCHITECTURES list: "XY-real" runs on sm_X of minor >= Y,
 * "XY-virtual" (PTX, compiled when loaded) on any device >= XY, "XY" is
 * both; "all", "all-major" and "native" run anywhere. */
bool st_arch_built_for(const char *dev, const char *archs);

/* The one line for a device the build has no code for: names the device's
 * arch and the build's list, and how to rebuild (BACKEND: "hip", "cuda"). */
void st_arch_refusal(char *buf, size_t n, int device, const char *dev, const char *name, const char *archs,
                     const char *backend);

#endif
