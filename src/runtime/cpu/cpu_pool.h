/* A parallel for over [0, n) in chunks, on up to N threads. Internal. */
#ifndef ST_CPU_POOL_H
#define ST_CPU_POOL_H

#include <stdint.h>

typedef void (*st_range_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs FN over [0, N) in chunks of CHUNK items, on N_THREADS threads
 * (0 = online cores). Items are independent; the calling thread works too. */
void st_parallel_for(int64_t n, int64_t chunk, int n_threads, st_range_fn fn, void *ctx);

/* Online cores (at least 1). */
int st_cpu_count(void);

#endif
