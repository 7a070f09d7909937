/* The end-to-end gate: its timing rule with scripted measurements (refuse
 * only a slowdown beyond the limit and the interquartile noise, seen twice),
 * and on the CPU backend a table that changes nothing passes while a table
 * made for another identity is an error, not a verdict. A real slowdown and
 * the byte check's refusal are shown on the GPU (tools/device-demo.sh: a
 * rows-1/1 table +47%, a deliberately wrong variant); on the CPU backend
 * a variant's cost depends on the build (rows 1/1: +70-80% plain, +3-8%
 * under ASan), too thin to assert. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/decode.h"
#include "strata/identity.h"
#include "strata/verify.h"
#include "verify_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHAPE "expert iq3_s iq4_nl 256 64 1"

typedef struct {
    char last[1024];
} log_capture;

static void capture(void *user, const char *line)
{
    log_capture *c = user;
    snprintf(c->last, sizeof c->last, "%s", line);
}

/* Writes HEADER (this context's, or ARCH_OVERRIDE's) + BODY to a temporary
 * file; returns its path (static buffer). */
static const char *write_table(st_ctx *ctx, const char *arch_override, const char *body)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/strata-verify-%d.table", (int)getpid());
    st_identity id = *st_ctx_identity(ctx);
    if (arch_override) snprintf(id.arch, sizeof id.arch, "%s", arch_override);
    char hdr[256];
    assert_true(st_identity_header(&id, hdr, sizeof hdr) > 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n%s", hdr, body);
    assert_int_equal(fclose(f), 0);
    return path;
}

static st_ctx *cpu_ctx(void)
{
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    return ctx;
}

static st_status run(st_ctx *ctx, const char *table, double max_slowdown, st_verify_result *res, log_capture *cap)
{
    static const char *shapes[] = {SHAPE};
    st_verify_options o;
    st_verify_options_default(&o);
    o.table_path = table;
    o.shapes = shapes;
    o.n_shapes = 1;
    o.rounds = 9;
    o.max_slowdown = max_slowdown;
    memset(cap, 0, sizeof *cap);
    st_set_log(capture, cap);
    st_status s = st_verify_run(ctx, &o, res);
    st_set_log(NULL, NULL);
    return s;
}

/* ---- the timing rule, scripted ------------------------------------------- */

static st_timing timing(double median, double spread)
{
    st_timing t;
    memset(&t, 0, sizeof t);
    t.median_us = median;
    t.p25_us = median * (1 - spread / 2);
    t.p75_us = median * (1 + spread / 2);
    t.spread = spread;
    return t;
}

/* Each call returns the next scripted (base, with) pair. */
typedef struct {
    st_timing base[2], with[2];
    int calls;
} script;

static st_status scripted(void *user, st_timing *base, st_timing *with)
{
    script *s = user;
    assert_true(s->calls < 2);
    *base = s->base[s->calls];
    *with = s->with[s->calls];
    s->calls++;
    return ST_OK;
}

/* Runs the rule on S; *MEASURED = the measurements it asked for. */
static void judge(script *s, bool *slower, int *measured, st_timing *with)
{
    st_timing b;
    assert_int_equal(st_gate_judge(scripted, s, 0.02, 1, true, &b, with, slower), ST_OK);
    *measured = s->calls;
}

static void gate_rule_refuses_only_a_slowdown_seen_twice(void **state)
{
    (void)state;
    bool slower;
    int n;
    st_timing w;
    script twice = {{timing(100, 0.01), timing(100, 0.01)}, {timing(110, 0.01), timing(109, 0.01)}, 0};
    judge(&twice, &slower, &n, &w);
    assert_true(slower);
    assert_int_equal(n, 2);
    assert_true(w.median_us == 109); /* the verdict rests on the second measurement */

    script once = {{timing(100, 0.01), timing(100, 0.01)}, {timing(110, 0.01), timing(100.5, 0.01)}, 0};
    judge(&once, &slower, &n, &w);
    assert_false(slower); /* not confirmed: noise */
    assert_int_equal(n, 2);
}

static void gate_rule_ignores_differences_inside_the_limit_or_the_noise(void **state)
{
    (void)state;
    bool slower;
    int n;
    st_timing w;
    script within = {{timing(100, 0.001), timing(1, 0)}, {timing(101.9, 0.001), timing(1, 0)}, 0};
    judge(&within, &slower, &n, &w);
    assert_false(slower); /* +1.9% < 2% */
    assert_int_equal(n, 1);

    script noisy = {{timing(100, 0.20), timing(1, 0)}, {timing(110, 0.20), timing(1, 0)}, 0};
    judge(&noisy, &slower, &n, &w);
    assert_false(slower); /* +10%, but the interquartile ranges overlap */
    assert_int_equal(n, 1);

    script faster = {{timing(100, 0.01), timing(1, 0)}, {timing(80, 0.01), timing(1, 0)}, 0};
    judge(&faster, &slower, &n, &w);
    assert_false(slower);
    assert_int_equal(n, 1);
}

/* ---- end to end on the CPU backend ----------------------------------------- */

static void gate_passes_a_table_that_changes_nothing(void **state)
{
    (void)state;
    st_ctx *ctx = cpu_ctx();
    const char *path = write_table(ctx, NULL, "# no rows: every launch is the default's\n");
    st_verify_result res;
    log_capture cap;
    /* same code both ways: only noise differs, well inside 50% */
    assert_int_equal(run(ctx, path, 0.50, &res, &cap), ST_OK);
    assert_true(res.bytes_equal);
    assert_true(res.not_slower);
    assert_true(res.passed);
    assert_int_equal(res.table_launches, 0);
    assert_non_null(strstr(res.message, "PASS: "));
    assert_non_null(strstr(res.message, "byte-identical with the table (0 launches from it"));
    unlink(path);
    st_ctx_destroy(ctx);
}

static void gate_reports_a_table_for_another_device_as_an_error(void **state)
{
    (void)state;
    st_ctx *ctx = cpu_ctx();
    const char *path = write_table(ctx, "gfx1100", "expert iq3_s iq4_nl 256 64 1 1 1\n");
    st_verify_result res;
    log_capture cap;
    const st_status s = run(ctx, path, 0.02, &res, &cap);
    assert_int_not_equal(s, ST_OK);
    assert_false(res.passed);
    unlink(path);
    st_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gate_rule_refuses_only_a_slowdown_seen_twice),
        cmocka_unit_test(gate_rule_ignores_differences_inside_the_limit_or_the_noise),
        cmocka_unit_test(gate_passes_a_table_that_changes_nothing),
        cmocka_unit_test(gate_reports_a_table_for_another_device_as_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
