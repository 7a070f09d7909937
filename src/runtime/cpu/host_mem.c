/* The host's memory (st_host_mem_info, strata/probe.h): MemAvailable and
 * MemTotal of /proc/meminfo (what can be had without swapping, page cache
 * included), else the free and total pages sysconf reports. */
#define _DEFAULT_SOURCE
#include "strata/probe.h"
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* "Key:  12345 kB" of /proc/meminfo, in bytes; 0 when absent. */
static uint64_t meminfo(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    unsigned long long kb = 0;
    if (p && sscanf(p + strlen(key), " %llu", &kb) == 1 && kb <= UINT64_MAX / 1024) return (uint64_t)kb * 1024;
    return 0;
}

static size_t clamp(uint64_t v) { return v > SIZE_MAX ? SIZE_MAX : (size_t)v; }

st_status st_host_mem_info(size_t *available, size_t *total)
{
    char text[4096];
    size_t n = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
    }
    text[n] = '\0';
    uint64_t av = meminfo(text, "\nMemAvailable:"), to = meminfo(text, "MemTotal:");
    if (!av || !to) {
        const long pages = sysconf(_SC_AVPHYS_PAGES), all = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || all <= 0 || page <= 0) return st_fail(ST_ERR_UNSUPPORTED, "host memory: not reported by this system");
        av = (uint64_t)pages * (uint64_t)page;
        to = (uint64_t)all * (uint64_t)page;
    }
    *available = clamp(av);
    *total = clamp(to);
    return ST_OK;
}
