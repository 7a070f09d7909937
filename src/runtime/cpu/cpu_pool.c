/* The CPU backend's worker pools. Each pool's threads are started when the
 * pool is created and wait on its condition variable between jobs; a job
 * hands out chunks through an atomic counter. */
#define _POSIX_C_SOURCE 200809L
#include "cpu_pool.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_WORKERS 63

typedef struct {
    int64_t n, chunk;
    atomic_llong next;
    st_range_fn fn;
    void *ctx;
    int helpers; /* workers taking part */
} job;

struct st_cpu_pool {
    pthread_mutex_t submit; /* one job at a time */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t threads[MAX_WORKERS];
    int workers;
    unsigned long gen; /* bumped for each job */
    job *current;
    int running; /* helpers still working on the current job */
    int quit;
    pid_t pid;   /* the process the workers live in */
};

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

typedef struct {
    st_cpu_pool *p;
    int index;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg a = *(worker_arg *)arg;
    free(arg);
    st_cpu_pool *p = a.p;
    unsigned long seen = 0;
    t_in_job = 1;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->work, &p->mu);
        if (p->quit) break;
        seen = p->gen;
        job *j = p->current;
        if (!j || a.index >= j->helpers) continue;
        pthread_mutex_unlock(&p->mu);
        run_chunks(j);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int st_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

st_status st_cpu_pool_create(int n_threads, st_cpu_pool **out)
{
    *out = NULL;
    if (n_threads <= 0) n_threads = st_cpu_count();
    if (n_threads > MAX_WORKERS + 1) n_threads = MAX_WORKERS + 1;
    st_cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return st_fail(ST_ERR_NOMEM, "CPU pool: out of memory");
    pthread_mutex_init(&p->submit, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->pid = getpid();
    for (int i = 0; i < n_threads - 1; i++) {
        worker_arg *a = malloc(sizeof *a);
        if (!a) break;
        *a = (worker_arg){p, i};
        if (pthread_create(&p->threads[i], NULL, worker, a) != 0) {
            free(a);
            break; /* fewer workers than asked is still correct */
        }
        p->workers++;
    }
    *out = p;
    return ST_OK;
}

void st_cpu_pool_destroy(st_cpu_pool *p)
{
    if (!p) return;
    if (p->pid == getpid()) {
        pthread_mutex_lock(&p->mu);
        p->quit = 1;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->workers; i++) pthread_join(p->threads[i], NULL);
    }
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->submit);
    free(p);
}

int st_cpu_pool_threads(const st_cpu_pool *p) { return p->workers + 1; }

static st_cpu_pool *g_default;
static pthread_once_t g_default_once = PTHREAD_ONCE_INIT;

static void default_pool(void)
{
    if (st_cpu_pool_create(0, &g_default) != ST_OK) g_default = NULL;
}

void st_parallel_for(st_cpu_pool *p, int64_t n, int64_t chunk, int n_threads, st_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    if (!p) {
        pthread_once(&g_default_once, default_pool);
        p = g_default;
    }
    const int64_t chunks = (n + chunk - 1) / chunk;
    int threads = p ? p->workers + 1 : 1;
    if (n_threads > 0 && n_threads < threads) threads = n_threads;
    if (threads > chunks) threads = (int)chunks;
    job j = {n, chunk, 0, fn, ctx, 0};
    /* inline: one thread, a job inside a job, or a forked child (whose
     * pool has no workers: only the forking thread exists there) */
    if (threads <= 1 || t_in_job || !p || p->pid != getpid()) {
        run_chunks(&j);
        return;
    }
    pthread_mutex_lock(&p->submit);
    pthread_mutex_lock(&p->mu);
    j.helpers = threads - 1;
    p->current = &j;
    p->running = j.helpers;
    p->gen++;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    t_in_job = 1;
    run_chunks(&j); /* the caller works too */
    t_in_job = 0;
    pthread_mutex_lock(&p->mu);
    while (p->running > 0) pthread_cond_wait(&p->done, &p->mu);
    p->current = NULL;
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->submit);
}
