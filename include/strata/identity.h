/* strata-tune: the identity a tuning table is made for.
 *
 * A table header holds four tokens: <arch> <runtime> <compiler> <space>.
 * A table engages only in a process whose identity has the same four and,
 * on a GPU, the same device model: the line "device <model>" that follows
 * the header (several SKUs share an arch: a 7900 XTX, a 7900 XT and a
 * W7900 are all gfx1100). */
#ifndef STRATA_IDENTITY_H
#define STRATA_IDENTITY_H

#include "strata/version.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_TOKEN_MAX 64

typedef struct {
    char arch[ST_TOKEN_MAX];     /* "gfx1100", "sm_90" or "cpu" */
    char runtime[ST_TOKEN_MAX];  /* loaded runtime's version; CPU: library version */
    char compiler[ST_TOKEN_MAX]; /* hash of compiler identity + kernel flags */
    int space;                   /* STRATA_SELECTION_SPACE of the build */
    /* The device model, checked by the loader and part of the tuner's file
     * name: the device name in lower case, '-' for every run of other
     * characters, then "-<N>cu" with its compute units (AMD CUs, NVIDIA
     * SMs): "amd-radeon-rx-7900-xtx-96cu". Empty on the CPU backend (the
     * reference has no SKUs: its tables name no device). */
    char model[ST_TOKEN_MAX];
    /* Informational only (reports, provenance comments). */
    char device_name[128];
    char driver[ST_TOKEN_MAX];
    int compute_units;           /* 0 when unknown (the CPU backend) */
} st_identity;

/* The CPU backend's identity: "cpu", the library version, the host compiler
 * hash, the selection space. */
ST_API void st_identity_cpu(st_identity *id);

/* Whether the four header tokens of A and B are equal. */
ST_API bool st_identity_matches(const st_identity *a, const st_identity *b);

/* Whether A and B are the same device: the four header tokens and the
 * device model. A table engages only where this holds. */
ST_API bool st_identity_same_device(const st_identity *a, const st_identity *b);

/* Fills ID->model from ID->device_name and ID->compute_units (see the
 * field). A name with no letter or digit gives "gpu-<N>cu". */
ST_API void st_identity_set_model(st_identity *id);

/* Writes "<arch> <runtime> <compiler> <space>" (no newline) into BUF.
 * Returns the length it needed (as snprintf). */
ST_API int st_identity_header(const st_identity *id, char *buf, size_t n);

/* The library version string, "MAJOR.MINOR.PATCH" of the build (STRATA_VERSION_*). */
ST_API const char *st_version(void);

/* Which GPU backend this build has: "none", "hip" or "cuda". */
ST_API const char *st_gpu_backend_name(void);

#ifdef __cplusplus
}
#endif
#endif
