/* The host's memory, for size checks before large allocations (internal). */
#ifndef ST_HOST_MEM_H
#define ST_HOST_MEM_H

#include "strata/status.h"

#include <stddef.h>

/* Available and total physical memory: MemAvailable and MemTotal of
 * /proc/meminfo (what can be had without swapping, page cache included),
 * else the free and total pages sysconf reports. */
st_status st_host_mem_info(size_t *available, size_t *total);

#endif
