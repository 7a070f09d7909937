/* `tune_decode coverage` after a tune with --ntok-mix 1,2,4,8: it asks the
 * model's expert shapes for the token counts the table records, so the
 * tuned table covers everything; a missing path and a directory with no
 * table for this process are errors of one line; and the engine-side
 * counters tell a tuned default from a shape the table knows nothing of. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/decode.h"
#include "strata/tools/model.h"
#include "strata/table.h"
#include "strata/tools/tuner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_cli.h" /* the CLI run with its output */

#define MODEL STRATA_TEST_DATA "/gguf/tiny-moe.gguf"

static char g_dir[64];


static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/strata-coverage.XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_tune_options o;
    st_tune_options_default(&o);
    o.model_path = MODEL;
    o.out_dir = g_dir;
    o.quick = o.quiet = true;
    o.no_verify = true; /* the table must be written; the gate has its own tests */
    const int mix[] = {1, 2, 4, 8};
    o.ntok_mix = mix;
    o.n_ntok_mix = 4;
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("tune: %s", st_last_error());
    assert_true(res.table_written);
    st_ctx_destroy(ctx);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void coverage_asks_for_the_tuners_token_mix(void **state)
{
    (void)state;
    char *out = NULL;
    char *argv[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, g_dir, NULL};
    int status = run_cli(argv, &out, NULL);
    if (status != 0) fail_msg("coverage: exit %d\n%s", status, out);
    assert_null(strstr(out, "missing:"));
    assert_non_null(strstr(out, "expert shapes at n_tokens 1,2,4,8, the tuner's mix"));
    free(out);
}

/* A table without a '# ntok-mix' line is asked for the tuner's default
 * mix, 1..8, as --help and the guide say (it used to be 1..32). */
static void coverage_without_a_recorded_mix_asks_for_1_to_8(void **state)
{
    (void)state;
    char other[128], cmd[512];
    snprintf(other, sizeof other, "%s/nomix", g_dir);
    assert_int_equal(mkdir(other, 0777), 0);
    snprintf(cmd, sizeof cmd, "grep -hv '^# ntok-mix' %s/*.table > %s/t.table", g_dir, other);
    assert_int_equal(system(cmd), 0);
    char *out = NULL;
    char *argv[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, other, NULL};
    run_cli(argv, &out, NULL);
    if (!strstr(out, "expert shapes at n_tokens 1,2,3,4,5,6,7,8, the default mix: the table records none"))
        fail_msg("coverage of a table without a mix:\n%s", out);
    assert_null(strstr(out, "n_tokens 9")); /* nothing past 8 asked for */
    assert_null(strstr(out, " 9  ("));
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", other);
    assert_int_equal(system(cmd), 0);
}

/* A damaged '# ntok-mix' line (hand-edited, cut) is refused in one line,
 * not read as "records none" (which would ask for another mix silently). */
static void coverage_of_a_damaged_mix_is_one_line(void **state)
{
    (void)state;
    static const char *const bad[] = {"x", "1 x", "0", "33", "2 2", "1,2"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char other[128], cmd[600];
        snprintf(other, sizeof other, "%s/badmix", g_dir);
        assert_int_equal(mkdir(other, 0777), 0);
        snprintf(cmd, sizeof cmd, "sed 's/^# ntok-mix .*/# ntok-mix %s/' %s/*.table > %s/t.table && grep -q '^# ntok-mix %s$' %s/t.table",
                 bad[k], g_dir, other, bad[k], other);
        assert_int_equal(system(cmd), 0);
        char *out = NULL;
        char *argv[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, other, NULL};
        const int status = run_cli(argv, &out, NULL);
        if (status != 1 || lines(out) != 1 || !strstr(out, "is not a list of distinct token counts 1..32"))
            fail_msg("coverage of '# ntok-mix %s': exit %d\n%s", bad[k], status, out);
        assert_null(strstr(out, "missing:"));
        free(out);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", other);
        assert_int_equal(system(cmd), 0);
    }
}

static void coverage_of_a_missing_path_is_one_line(void **state)
{
    (void)state;
    char *out = NULL, missing[128];
    snprintf(missing, sizeof missing, "%s/no-such-table", g_dir);
    char *argv[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, missing, NULL};
    int status = run_cli(argv, &out, NULL);
    assert_int_equal(status, 1);
    assert_int_equal(lines(out), 1);
    assert_non_null(strstr(out, "coverage: "));
    assert_non_null(strstr(out, "No such file or directory"));
    assert_null(strstr(out, "missing:"));
    free(out);
}

static void coverage_of_an_unmatched_directory_is_one_line(void **state)
{
    (void)state;
    char other[128], path[200];
    snprintf(other, sizeof other, "%s/other", g_dir);
    assert_int_equal(mkdir(other, 0777), 0);
    snprintf(path, sizeof path, "%s/gfx.table", other);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "gfx1100 1 abc 3\ndevice amd-radeon-rx-7900-xtx-96cu\nmmvq q8_0 512 256 2\n");
    assert_int_equal(fclose(f), 0);
    char *out = NULL;
    char *argv[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, other, NULL};
    int status = run_cli(argv, &out, NULL);
    assert_int_equal(status, 1);
    assert_int_equal(lines(out), 1);
    assert_non_null(strstr(out, "no table matches this process"));
    assert_null(strstr(out, "missing:"));
    free(out);
    unlink(path);
    rmdir(other);
}

static void engine_counters_tell_tuned_defaults_from_gaps(void **state)
{
    (void)state;
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_set_log(NULL, NULL);
    assert_int_equal(st_ctx_load_table(ctx, g_dir), ST_OK);
    const st_table *t = st_ctx_table(ctx);
    assert_non_null(t);
    /* the model's dense shapes: each a row or a tuned default of the table */
    st_model *m = NULL;
    assert_int_equal(st_model_open(MODEL, &m), ST_OK);
    uint64_t want_hits = 0, want_defaults = 0;
    float *x = NULL, *y = NULL;
    for (size_t i = 0; i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *ms = st_model_mmvq_shape_at(m, i);
        const st_model_matrix *mx = st_model_matrix_at(m, ms->first);
        st_mmvq_key k = {ms->type, ms->n_rows, ms->n_cols};
        const bool row = st_table_lookup_mmvq(t, &k, NULL), dflt = st_table_tuned_default_mmvq(t, &k);
        assert_true(row != dflt);
        want_hits += row;
        want_defaults += dflt;
        st_matrix *w = NULL;
        assert_int_equal(st_matrix_create(ctx, mx->type, mx->n_rows, mx->n_cols, mx->data, &w), ST_OK);
        x = calloc((size_t)mx->n_cols, sizeof *x);
        y = calloc((size_t)mx->n_rows, sizeof *y);
        st_ctx_reset_stats(ctx);
        assert_int_equal(st_iq_mmvq(ctx, w, x, 1, y), ST_OK);
        st_ctx_stats st;
        st_ctx_stats_init(&st);
        st_ctx_get_stats(ctx, &st);
        assert_int_equal(st.table_hits, row);
        assert_int_equal(st.table_defaults, dflt);
        assert_int_equal(st.table_misses, 0);
        free(x);
        free(y);
        st_matrix_destroy(w);
    }
    assert_int_equal(want_hits + want_defaults, st_model_mmvq_shape_count(m));
    /* a shape the tuner never saw is a miss */
    static uint8_t blocks[34 * 8 * 64];
    memset(blocks, 0, sizeof blocks);
    st_matrix *w = NULL;
    assert_int_equal(st_matrix_create(ctx, ST_Q8_0, 64, 256, blocks, &w), ST_OK);
    float xv[256] = {0}, yv[64];
    st_ctx_reset_stats(ctx);
    assert_int_equal(st_iq_mmvq(ctx, w, xv, 1, yv), ST_OK);
    st_ctx_stats st;
    st_ctx_stats_init(&st);
    st_ctx_get_stats(ctx, &st);
    assert_int_equal(st.table_misses, 1);
    assert_int_equal(st.table_defaults, 0);
    st_matrix_destroy(w);
    st_model_close(m);
    st_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(coverage_asks_for_the_tuners_token_mix),
        cmocka_unit_test(coverage_without_a_recorded_mix_asks_for_1_to_8),
        cmocka_unit_test(coverage_of_a_damaged_mix_is_one_line),
        cmocka_unit_test(coverage_of_a_missing_path_is_one_line),
        cmocka_unit_test(coverage_of_an_unmatched_directory_is_one_line),
        cmocka_unit_test(engine_counters_tell_tuned_defaults_from_gaps),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
