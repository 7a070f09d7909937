/* Two GPUs of one host, as an engine uses them: a context per device, each
 * engaging its device's table from one tables folder (devices of one model
 * share one table; of two models, one each), and the decode step on both
 * devices, from one thread (interleaved) and from two threads at the same
 * time, gives the bytes of one device alone. Needs two GPUs: on a machine
 * with fewer it says so and is skipped (exit 77). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/tools.h"
#include "vmodel.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK_OK(expr)                                                                        \
    do {                                                                                      \
        st_status s_ = (expr);                                                                \
        if (s_ != ST_OK) fail_msg("%s: %s (%s)", #expr, st_status_str(s_), st_last_error()); \
    } while (0)

/* the token counts each step runs */
static const int NTS[] = {1, 2, 3, 4, 8, 16, 32};
#define N_NTS ((int)(sizeof NTS / sizeof NTS[0]))

typedef struct {
    st_ctx *ctx;
    st_vmodel *vm;
    float *out[N_NTS];
    st_status status; /* of the steps a thread ran (no assertion off the test's thread) */
    char error[256];
} dev_run;

static void open_run(dev_run *r, int device, const st_verify_options *o)
{
    memset(r, 0, sizeof *r);
    CHECK_OK(st_ctx_create(ST_BACKEND_GPU, device, &r->ctx));
    assert_int_equal(st_ctx_device(r->ctx), device);
    CHECK_OK(st_vmodel_open(r->ctx, o, &r->vm));
    for (int i = 0; i < N_NTS; i++) {
        r->out[i] = calloc(st_vmodel_output_floats(r->vm, NTS[i]), sizeof(float));
        assert_non_null(r->out[i]);
    }
}

static void step(dev_run *r, int i)
{
    CHECK_OK(st_vmodel_step(r->ctx, r->vm, NTS[i]));
    CHECK_OK(st_vmodel_outputs(r->ctx, r->vm, NTS[i], r->out[i]));
}

static void *thread_main(void *arg)
{
    dev_run *r = arg;
    r->status = ST_OK;
    for (int i = 0; i < N_NTS && r->status == ST_OK; i++) {
        r->status = st_vmodel_step(r->ctx, r->vm, NTS[i]);
        if (r->status == ST_OK) r->status = st_vmodel_outputs(r->ctx, r->vm, NTS[i], r->out[i]);
        if (r->status != ST_OK) snprintf(r->error, sizeof r->error, "n_tokens %d: %s", NTS[i], st_last_error());
    }
    return NULL;
}

static size_t diff(const dev_run *a, const dev_run *b)
{
    size_t d = 0;
    for (int i = 0; i < N_NTS; i++) {
        const size_t n = st_vmodel_output_floats(a->vm, NTS[i]);
        if (memcmp(a->out[i], b->out[i], n * sizeof(float))) {
            for (size_t k = 0; k < n; k++) d += memcmp(&a->out[i][k], &b->out[i][k], sizeof(float)) != 0;
            printf("  n_tokens %d: outputs differ\n", NTS[i]);
        }
    }
    return d;
}

static void close_run(dev_run *r)
{
    for (int i = 0; i < N_NTS; i++) free(r->out[i]);
    st_vmodel_close(r->ctx, r->vm);
    st_ctx_destroy(r->ctx);
}

static void two_devices_one_folder_same_bytes(void **state)
{
    (void)state;
    st_verify_options o;
    st_verify_options_default(&o);
    const char *shapes[] = {"mmvq iq3_s 4096 2560", "expert iq4_xs iq4_nl 2560 640 1"};
    o.shapes = shapes;
    o.n_shapes = 2;
    o.n_layers = 4;
    dev_run alone, d[2];
    open_run(&alone, 0, &o);
    for (int i = 0; i < N_NTS; i++) step(&alone, i);
    open_run(&d[0], 0, &o);
    open_run(&d[1], 1, &o);

    /* one tables folder: a table per distinct device identity, each with a
     * row naming a variant for the step's dense shape (so the step runs a
     * variant on both devices; by the exactness contract its bytes are the
     * default's, on any device: the CPU reference's) */
    char dir[] = "/tmp/strata-multi-device.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char paths[2][128];
    int n_tables = 0;
    for (int k = 0; k < 2; k++) {
        const st_identity *id = st_ctx_identity(d[k].ctx);
        if (k == 1 && st_identity_same_device(id, st_ctx_identity(d[0].ctx))) continue;
        st_table *t = NULL;
        CHECK_OK(st_table_create(id, &t));
        const st_mmvq_key mk = {ST_IQ3_S, 4096, 2560};
        CHECK_OK(st_table_add_mmvq(t, &mk, 8));
        snprintf(paths[n_tables], sizeof paths[0], "%s/device%d.table", dir, k);
        CHECK_OK(st_table_write_atomic(t, paths[n_tables]));
        st_table_destroy(t);
        n_tables++;
    }
    printf("  device 0: %s, device 1: %s: %d table%s in one folder\n", st_ctx_identity(d[0].ctx)->model,
           st_ctx_identity(d[1].ctx)->model, n_tables, n_tables == 1 ? "" : "s");
    for (int k = 0; k < 2; k++) {
        CHECK_OK(st_ctx_load_table(d[k].ctx, dir));
        assert_non_null(st_ctx_table(d[k].ctx));
    }

    /* one thread, the devices interleaved */
    for (int i = 0; i < N_NTS; i++)
        for (int k = 0; k < 2; k++) step(&d[k], i);
    size_t bad = diff(&d[0], &alone) + diff(&d[1], &alone);
    printf("  one thread: %zu differing floats\n", bad);
    assert_int_equal(bad, 0);

    /* two threads, one per device, at the same time */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < N_NTS; i++) memset(d[k].out[i], 0xff, st_vmodel_output_floats(d[k].vm, NTS[i]) * sizeof(float));
    pthread_t t[2];
    for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&t[k], NULL, thread_main, &d[k]), 0);
    for (int k = 0; k < 2; k++) assert_int_equal(pthread_join(t[k], NULL), 0);
    for (int k = 0; k < 2; k++)
        if (d[k].status != ST_OK) fail_msg("device %d's thread: %s", k, d[k].error);
    bad = diff(&d[0], &alone) + diff(&d[1], &alone);
    printf("  two threads: %zu differing floats\n", bad);
    assert_int_equal(bad, 0);

    for (int k = 0; k < n_tables; k++) unlink(paths[k]);
    char idx[160];
    snprintf(idx, sizeof idx, "%s/tables.json", dir);
    unlink(idx);
    rmdir(dir);
    close_run(&d[0]);
    close_run(&d[1]);
    close_run(&alone);
}

int main(void)
{
    int n = 0;
    if (st_device_count(ST_BACKEND_GPU, &n) != ST_OK || n < 2) {
        printf("multi_device_test needs two GPUs; this machine has %d: skipped\n", n);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_devices_one_folder_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
