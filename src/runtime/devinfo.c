/* The per-arch last-level cache table and the build's arch check
 * (devinfo.h). The L2 size a runtime reports is the last level on NVIDIA
 * cards, but not on RDNA2/RDNA3 and CDNA3: their Infinity Cache (AMD's
 * memory-attached last level, "MALL") sits behind the L2 and HIP does not
 * report it, so timings rotated past the L2 alone can still come from it. */
#include "devinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MB (1024u * 1024u)

/* One SKU: matched by a part of its device name (NAME, case-sensitive as
 * the runtimes report it; "" matches any) or its compute units (CUS, 0 =
 * any); the first match of the arch wins, so the specific names come
 * first ("7900 XTX" before "7900 XT", which it contains) and an arch's
 * catch-all last. */
typedef struct {
    const char *arch, *name;
    int cus;
    unsigned mb;
    const char *source;
} llc_entry;

static const llc_entry LLC[] = {
    /* RDNA3 Navi 31 (gfx1100) */
    {"gfx1100", "7900 XTX", 0, 96, "Radeon RX 7900 XTX: 96 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "W7900", 0, 96, "Radeon PRO W7900: 96 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "7900 GRE", 0, 64, "Radeon RX 7900 GRE: 64 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "7900 XT", 0, 80, "Radeon RX 7900 XT: 80 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "W7800", 0, 64, "Radeon PRO W7800: 64 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "", 96, 96, "gfx1100 with 96 CUs (7900 XTX / W7900): 96 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "", 84, 80, "gfx1100 with 84 CUs (7900 XT): 80 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "", 80, 64, "gfx1100 with 80 CUs (7900 GRE): 64 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "", 70, 64, "gfx1100 with 70 CUs (W7800): 64 MB Infinity Cache (AMD product specifications)"},
    {"gfx1100", "", 0, 96, "gfx1100 of an unknown SKU: 96 MB, the largest Navi 31 Infinity Cache (rotating past more "
                           "than there is only costs set-up time)"},
    /* RDNA3 Navi 32 (gfx1101) and Navi 33 (gfx1102) */
    {"gfx1101", "7700 XT", 0, 48, "Radeon RX 7700 XT: 48 MB Infinity Cache (AMD product specifications)"},
    {"gfx1101", "", 54, 48, "gfx1101 with 54 CUs (7700 XT): 48 MB Infinity Cache (AMD product specifications)"},
    {"gfx1101", "", 0, 64, "gfx1101 (7800 XT, W7700): 64 MB Infinity Cache, the largest Navi 32 (AMD product specifications)"},
    {"gfx1102", "", 0, 32, "gfx1102 (7600, 7600 XT): 32 MB Infinity Cache (AMD product specifications)"},
    /* RDNA2 Navi 21 (gfx1030) */
    {"gfx1030", "", 0, 128, "gfx1030 (6800 .. 6950 XT, W6800): 128 MB Infinity Cache (AMD product specifications)"},
    /* CDNA3 (gfx942: MI300X, MI300A, MI325X) */
    {"gfx942", "", 0, 256, "gfx942 (MI300X / MI300A / MI325X): 256 MB Infinity Cache (AMD CDNA3 white paper)"},
};

static bool same_arch(const char *dev, const char *want)
{
    size_t n = strlen(want);
    return strncmp(dev, want, n) == 0 && (dev[n] == '\0' || dev[n] == ':');
}

size_t st_llc_lookup(const char *arch, const char *name, int cus, size_t reported, const char **source)
{
    static const char runtime[] = "L2 as the runtime reports it (no larger last level known for this arch)";
    static const char none[] = "unknown: the runtime reports no L2 and no figure is known for this arch";
    const llc_entry *hit = NULL;
    for (size_t i = 0; !hit && arch && i < sizeof LLC / sizeof LLC[0]; i++) {
        const llc_entry *e = &LLC[i];
        if (!same_arch(arch, e->arch)) continue;
        if (e->name[0] && !(name && strstr(name, e->name))) continue;
        if (e->cus && e->cus != cus) continue;
        hit = e;
    }
    const size_t table = hit ? (size_t)hit->mb * MB : 0;
    if (table > reported) {
        *source = hit->source;
        return table;
    }
    *source = reported ? runtime : none;
    return reported;
}

/* Calls FN on each token of LIST (separated by ';', ',' or blanks) until it
 * returns true. */
static bool any_token(const char *list, const char *dev, bool (*fn)(const char *tok, size_t n, const char *dev))
{
    const char *p = list ? list : "";
    while (*p) {
        while (*p == ';' || *p == ',' || *p == ' ') p++;
        const char *s = p;
        while (*p && *p != ';' && *p != ',' && *p != ' ') p++;
        if (p > s && fn(s, (size_t)(p - s), dev)) return true;
    }
    return false;
}

static bool gfx_token(const char *tok, size_t n, const char *dev)
{
    const char *colon = memchr(tok, ':', n);
    const size_t m = colon ? (size_t)(colon - tok) : n;
    const char *dc = strchr(dev, ':');
    const size_t dm = dc ? (size_t)(dc - dev) : strlen(dev);
    return m == dm && strncmp(tok, dev, m) == 0;
}

/* "sm_90" / "sm_90a" -> 90 (major * 10 + minor), or -1. */
static int sm_number(const char *s, size_t n)
{
    char buf[16];
    if (n >= sizeof buf) return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    const char *p = strncmp(buf, "sm_", 3) == 0 ? buf + 3 : buf;
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 10 || v > 999) return -1;
    return (int)v;
}

static bool sm_token(const char *tok, size_t n, const char *dev)
{
    static const char *const any[] = {"all", "all-major", "native"};
    for (size_t i = 0; i < 3; i++)
        if (n == strlen(any[i]) && strncmp(tok, any[i], n) == 0) return true;
    const char *dash = memchr(tok, '-', n);
    const size_t m = dash ? (size_t)(dash - tok) : n;
    const bool real = !dash || (n - m == 5 && strncmp(dash, "-real", 5) == 0);
    const bool virt = !dash || (n - m == 8 && strncmp(dash, "-virtual", 8) == 0);
    const int a = sm_number(tok, m), d = sm_number(dev, strlen(dev));
    if (a < 0 || d < 0) return false;
    if (real && a / 10 == d / 10 && a % 10 <= d % 10) return true; /* SASS: same major, minor at most */
    return virt && a <= d;                                           /* PTX, compiled for the device on load */
}

bool st_arch_built_for(const char *dev, const char *archs)
{
    if (!dev || !dev[0]) return false;
    return any_token(archs, dev, strncmp(dev, "sm_", 3) == 0 ? sm_token : gfx_token);
}

void st_arch_refusal(char *buf, size_t n, int device, const char *dev, const char *name, const char *archs,
                     const char *backend)
{
    const bool cuda = backend && strcmp(backend, "cuda") == 0;
    snprintf(buf, n, "GPU %d (%s) is %s, and this build carries GPU code for %s only: rebuild with %s listing %s",
             device, name && name[0] ? name : "unnamed", dev, archs && archs[0] ? archs : "no arch",
             cuda ? "-DCMAKE_CUDA_ARCHITECTURES" : "-DSTRATA_HIP_ARCHS", dev);
}
