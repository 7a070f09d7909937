/* A persistent pool of worker threads for the CPU backend: started lazily,
 * grown to the largest thread count asked for, kept for the process (a call
 * no longer pays for creating threads). One job runs at a time; a job
 * submitted from inside a job runs inline. After fork() the child starts
 * with no workers. */
#define _POSIX_C_SOURCE 200809L
#include "cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAX_WORKERS 63

typedef struct {
    int64_t n, chunk;
    atomic_llong next;
    st_range_fn fn;
    void *ctx;
    int helpers; /* workers taking part */
} job;

static pthread_mutex_t g_submit = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER, g_done = PTHREAD_COND_INITIALIZER;
static int g_workers;          /* started */
static unsigned long g_gen;    /* bumped for each job */
static job *g_job;
static int g_running;          /* helpers still working on the current job */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Thread_local int t_in_job;

static void run_chunks(job *j)
{
    for (;;) {
        int64_t b = (int64_t)atomic_fetch_add(&j->next, j->chunk);
        if (b >= j->n) break;
        int64_t e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->ctx, b, e);
    }
}

static void *worker(void *arg)
{
    const int index = (int)(intptr_t)arg;
    /* A worker is created while its first job is being posted (the poster
     * holds g_mu until g_gen is bumped), so it must not start from the
     * current generation: 0 makes it take that job. */
    unsigned long seen = 0;
    t_in_job = 1;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (g_gen == seen) pthread_cond_wait(&g_work, &g_mu);
        seen = g_gen;
        job *j = g_job;
        if (!j || index >= j->helpers) continue;
        pthread_mutex_unlock(&g_mu);
        run_chunks(j);
        pthread_mutex_lock(&g_mu);
        if (--g_running == 0) pthread_cond_signal(&g_done);
    }
    return NULL;
}

static void after_fork_child(void)
{
    /* only the forking thread exists in the child */
    pthread_mutex_init(&g_submit, NULL);
    pthread_mutex_init(&g_mu, NULL);
    pthread_cond_init(&g_work, NULL);
    pthread_cond_init(&g_done, NULL);
    g_workers = 0;
    g_job = NULL;
    g_running = 0;
}

static void register_fork(void) { pthread_atfork(NULL, NULL, after_fork_child); }

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
    const int64_t chunks = (n + chunk - 1) / chunk;
    if (n_threads > chunks) n_threads = (int)chunks;
    if (n_threads > MAX_WORKERS + 1) n_threads = MAX_WORKERS + 1;
    job j = {n, chunk, 0, fn, ctx, 0};
    if (n_threads <= 1 || t_in_job) {
        run_chunks(&j);
        return;
    }
    pthread_once(&g_once, register_fork);
    pthread_mutex_lock(&g_submit);
    pthread_mutex_lock(&g_mu);
    while (g_workers < n_threads - 1) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)(intptr_t)g_workers) != 0) break;
        pthread_detach(t);
        g_workers++;
    }
    /* fewer workers than asked (thread creation failed) is still correct */
    j.helpers = g_workers < n_threads - 1 ? g_workers : n_threads - 1;
    g_job = &j;
    g_running = j.helpers;
    g_gen++;
    pthread_cond_broadcast(&g_work);
    pthread_mutex_unlock(&g_mu);
    t_in_job = 1;
    run_chunks(&j); /* the caller works too */
    t_in_job = 0;
    pthread_mutex_lock(&g_mu);
    while (g_running > 0) pthread_cond_wait(&g_done, &g_mu);
    g_job = NULL;
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_submit);
}
