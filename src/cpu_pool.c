#include "cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

typedef struct {
    int64_t n, chunk;
    atomic_llong next;
    st_range_fn fn;
    void *ctx;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    for (;;) {
        int64_t b = (int64_t)atomic_fetch_add(&j->next, j->chunk);
        if (b >= j->n) break;
        int64_t e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->ctx, b, e);
    }
    return NULL;
}

int st_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void st_parallel_for(int64_t n, int64_t chunk, int n_threads, st_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    if (n_threads <= 0) n_threads = st_cpu_count();
    int64_t chunks = (n + chunk - 1) / chunk;
    if (n_threads > chunks) n_threads = (int)chunks;
    if (n_threads > 64) n_threads = 64;
    job j = {n, chunk, 0, fn, ctx};
    pthread_t tid[64];
    int started = 0;
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&tid[started], NULL, worker, &j) != 0) break;
        started++;
    }
    worker(&j); /* the caller works too; fewer threads started is still correct */
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
}
