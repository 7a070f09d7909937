/* A parallel for over [0, n) in chunks, on a pool of worker threads.
 * Internal. A pool belongs to one owner (a CPU context, or the process's
 * default pool for the st_ref_* functions); one job runs on it at a time.
 * Pools do not share state, so two contexts' calls in two threads run side
 * by side. */
#ifndef ST_CPU_POOL_H
#define ST_CPU_POOL_H

#include "strata/status.h"

#include <stdint.h>

typedef void (*st_range_fn)(void *ctx, int64_t begin, int64_t end);
typedef struct st_cpu_pool st_cpu_pool;

/* A pool of N_THREADS - 1 workers (the caller of each job is the last
 * thread); 0 = one per online core. The workers start here, so a job never
 * creates threads or allocates. */
st_status st_cpu_pool_create(int n_threads, st_cpu_pool **out);
void st_cpu_pool_destroy(st_cpu_pool *p);
/* Threads a job can use (workers + the caller). */
int st_cpu_pool_threads(const st_cpu_pool *p);

/* Runs FN over [0, N) in chunks of CHUNK items on at most N_THREADS threads
 * of POOL (0 = all; POOL NULL: the process's default pool, started on first
 * use). Items are independent; the calling thread works too. A job
 * submitted from inside a job, or in a child process after fork(), runs
 * inline on the calling thread. */
void st_parallel_for(st_cpu_pool *pool, int64_t n, int64_t chunk, int n_threads, st_range_fn fn, void *ctx);

/* Online cores (at least 1). */
int st_cpu_count(void);

#endif
