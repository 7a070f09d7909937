/* The tuner end to end on the CPU backend: the table it writes engages, the
 * JSON report lists every candidate (the default and every compiled-in
 * variant) and every byte compare, `tune_decode coverage` agrees, killing
 * the tuner (SIGKILL, SIGINT) never leaves a partial table, a table made for
 * another identity is never overwritten without --force, and a stop request
 * writes nothing. */
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
#include "strata/tools/output.h"
#include "strata/variants.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_cli.h" /* temporary folders, whole files, the CLI run with its output */

#define MODEL STRATA_TEST_DATA "/gguf/tiny-moe.gguf"

/* The compiled-in variants, expanded from the one list (variants.h). */
#define COUNT_ONE_(...) +1
enum {
    N_MMVQ_VARIANTS = 0 STRATA_MMVQ_ROWS_VARIANTS(COUNT_ONE_) STRATA_MMVQ_MMA_VARIANTS(COUNT_ONE_)
        STRATA_MMVQ_SPLIT_VARIANTS(COUNT_ONE_),
    N_WIDE_VARIANTS = 0 STRATA_MMVQ_WIDE_VARIANTS(COUNT_ONE_), /* rows of 128 streams only, after the others */
    N_EXPERT_VARIANTS = 0 STRATA_EXPERT_ROWS_VARIANTS(COUNT_ONE_)
};
#undef COUNT_ONE_
#define MMVQ_ROWS_(R) R,
#define MMVQ_MMA_(W) STRATA_MMVQ_ID_MMA(W),
#define MMVQ_SPLIT_(W) STRATA_MMVQ_ID_SPLIT(W),
#define MMVQ_WIDE_(T, R) STRATA_MMVQ_ID_WIDE(T, R),
static const int MMVQ_ROWS[] = {STRATA_MMVQ_ROWS_VARIANTS(MMVQ_ROWS_) STRATA_MMVQ_MMA_VARIANTS(MMVQ_MMA_)
                                    STRATA_MMVQ_SPLIT_VARIANTS(MMVQ_SPLIT_) STRATA_MMVQ_WIDE_VARIANTS(MMVQ_WIDE_)};
#undef MMVQ_WIDE_
#undef MMVQ_SPLIT_
#undef MMVQ_MMA_
#undef MMVQ_ROWS_
#define EXPERT_ROWS_(GU, DN) {GU, DN},
static const int EXPERT_ROWS[][2] = {STRATA_EXPERT_ROWS_VARIANTS(EXPERT_ROWS_)};
#undef EXPERT_ROWS_

/* ---- helpers -------------------------------------------------------------- */

typedef struct {
    int n;
    char lines[8][1100];
} logcap;

static void cap_line(void *user, const char *line)
{
    logcap *c = user;
    if (c->n < 8) snprintf(c->lines[c->n], sizeof c->lines[0], "%s", line);
    c->n++;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

static bool starts_with(const char *s, const char *head) { return !strncmp(s, head, strlen(head)); }

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool same_bytes(const char *a, size_t na, const char *b, size_t nb)
{
    return na == nb && memcmp(a, b, na) == 0;
}

/* Entries of DIR (not . and ..). */
static int dir_entries(const char *dir, char names[][256], int max)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n < max) snprintf(names[n], 256, "%s", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* ENT and MIX are the caller's arrays: they live while O is used. */
static void tune_opts(st_tune_options *o, const char *dir, const int *ent, int n_ent, const int *mix, int n_mix)
{
    st_tune_options_default(o);
    o->model_path = MODEL;
    o->out_dir = dir;
    o->quick = true;
    o->quiet = true;
    o->expert_ntok = ent;
    o->n_expert_ntok = n_ent;
    o->ntok_mix = mix;
    o->n_ntok_mix = n_mix;
    /* The end-to-end gate compares timings; on a shared CPU its verdict on a
     * variant the quick tune kept is noise, and a refusal writes no table.
     * The gate's own tests cover it; here the table must always be written. */
    o->no_verify = true;
}

static st_ctx *cpu_ctx(void)
{
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    assert_non_null(ctx);
    assert_int_equal(st_ctx_backend(ctx), ST_BACKEND_CPU);
    return ctx;
}

/* Shapes the model needs when expert shapes are tuned at N_EXPERT_NTOK token counts. */
static int model_shapes(int n_expert_ntok)
{
    st_model *m = NULL;
    assert_int_equal(st_model_open(MODEL, &m), ST_OK);
    const int n = (int)st_model_expert_shape_count(m) * n_expert_ntok + (int)st_model_mmvq_shape_count(m);
    st_model_close(m);
    return n;
}


/* Whether the table at PATH is complete and valid: the structural parse
 * accepts it and the guarded loader engages it for the CPU identity. */
static void assert_valid_engaging_table(const char *path, const st_ctx *ctx)
{
    size_t len = 0;
    char *buf = slurp(path, &len);
    st_table *t = NULL;
    char msg[1200] = "";
    st_status s = st_table_parse_any(buf, len, path, &t, msg, sizeof msg);
    if (s != ST_OK) fail_msg("%s does not parse: %s\n---\n%s---", path, msg, buf);
    assert_non_null(t);
    st_table_destroy(t);
    free(buf);
    logcap cap = {0};
    st_set_log(cap_line, &cap);
    t = NULL;
    s = st_table_load(path, st_ctx_identity(ctx), st_ctx_dispatch(ctx), &t);
    st_set_log(NULL, NULL);
    if (s != ST_OK) fail_msg("%s does not engage: %s", path, cap.n ? cap.lines[0] : "(no line)");
    assert_non_null(t);
    st_table_destroy(t);
    assert_int_equal(cap.n, 1);
    assert_true(starts_with(cap.lines[0], "decode tuning: "));
}

/* ---- 1: the table engages, the report lists every candidate ---------------- */

static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!f) fail_msg("report: no field '%s'", name);
    return f;
}

static const char *str_field(const cJSON *o, const char *name)
{
    const cJSON *f = field(o, name);
    assert_true(cJSON_IsString(f));
    return f->valuestring;
}

static int int_field(const cJSON *o, const char *name)
{
    const cJSON *f = field(o, name);
    assert_true(cJSON_IsNumber(f));
    return (int)f->valuedouble;
}

static bool bool_field(const cJSON *o, const char *name)
{
    const cJSON *f = field(o, name);
    assert_true(cJSON_IsBool(f));
    return cJSON_IsTrue(f);
}

/* One shape of the report: the default first, then each compiled-in variant
 * exactly once, every one byte-identical to the default. */
static void check_report_shape(const cJSON *shape)
{
    const char *kind = str_field(shape, "kind");
    const bool mmvq = !strcmp(kind, "mmvq");
    assert_true(mmvq || !strcmp(kind, "expert"));
    const cJSON *cands = field(shape, "candidates");
    assert_true(cJSON_IsArray(cands));
    /* rows of 128 streams (8192 values or more) also sweep the wide-row variants */
    const bool wide = mmvq && int_field(shape, "n_cols") / 32 >= ST_CANON_WIDE_UNITS;
    const int n_mmvq = N_MMVQ_VARIANTS + (wide ? N_WIDE_VARIANTS : 0);
    const int want = 1 + (mmvq ? n_mmvq : N_EXPERT_VARIANTS);
    assert_int_equal(cJSON_GetArraySize(cands), want);
    int seen[32] = {0};
    int i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cands)
    {
        const bool is_default = bool_field(c, "is_default");
        const char *bc = str_field(c, "byte_compare");
        if (i == 0) {
            assert_true(is_default);
            assert_string_equal(str_field(c, "name"), "default");
            assert_string_equal(bc, "reference");
        } else {
            assert_false(is_default);
            if (strcmp(bc, "identical") != 0)
                fail_msg("%s candidate '%s': byte_compare '%s'", kind, str_field(c, "name"), bc);
            int match = -1;
            if (mmvq) {
                const int rows = int_field(c, "rows");
                for (int k = 0; k < n_mmvq; k++)
                    if (MMVQ_ROWS[k] == rows) match = k;
            } else {
                const int gu = int_field(c, "gu_rows"), dn = int_field(c, "down_rows");
                for (int k = 0; k < N_EXPERT_VARIANTS; k++)
                    if (EXPERT_ROWS[k][0] == gu && EXPERT_ROWS[k][1] == dn) match = k;
            }
            if (match < 0) fail_msg("%s candidate '%s' is not a compiled-in variant", kind, str_field(c, "name"));
            seen[match]++;
        }
        i++;
    }
    for (int k = 0; k < want - 1; k++) assert_int_equal(seen[k], 1);
    assert_true(cJSON_IsObject(field(shape, "decision")));
}

/* Hand-given shapes on both sides of the wide-row length: the 8192-value
 * row sweeps every candidate and the wide-row variants too, all
 * byte-identical to the default; the 4096-value row sweeps no wide one. */
static void tune_sweeps_the_wide_row_variants_on_wide_rows_only(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    st_tune_options o;
    const int nts[] = {1, 3};
    tune_opts(&o, dir, nts, 2, nts, 2);
    const char *const shapes[] = {"mmvq iq4_nl 8 8192", "mmvq q4_K 8 4096"};
    o.shapes = shapes;
    o.n_shapes = 2;
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("st_tune_run: %s: %s", st_status_name(s), st_last_error());
    assert_int_equal(res.shapes, 2);
    assert_int_equal(res.mismatches, 0);
    char *text = slurp(res.report_path, NULL);
    cJSON *root = cJSON_Parse(text);
    if (!root) fail_msg("the report %s is not JSON", res.report_path);
    int wide_seen = 0;
    const cJSON *sh;
    cJSON_ArrayForEach(sh, field(root, "shapes"))
    {
        check_report_shape(sh);
        const cJSON *c;
        int n_wide = 0;
        cJSON_ArrayForEach(c, field(sh, "candidates")) n_wide += !strncmp(str_field(c, "name"), "wide", 4);
        assert_int_equal(n_wide, int_field(sh, "n_cols") >= 8192 ? N_WIDE_VARIANTS : 0);
        wide_seen += n_wide;
    }
    assert_int_equal(wide_seen, N_WIDE_VARIANTS);
    cJSON_Delete(root);
    free(text);
    st_ctx_destroy(ctx);
}

/* tune --in-place: the shapes measured on wrapped ggml blocks, among the
 * variants the in-place layout has kernels for (fewer than the repacked
 * layout's), and no expert shape tuned in place. */
static void tune_in_place_sweeps_the_in_place_variants_only(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    st_tune_options o;
    const int nts[] = {1, 3};
    tune_opts(&o, dir, nts, 2, nts, 2);
    const char *const shapes[] = {"mmvq iq4_nl 8 8192", "mmvq q4_K 8 4096"};
    o.shapes = shapes;
    o.n_shapes = 2;
    o.in_place = true;
    o.do_expert = false;
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("st_tune_run: %s: %s", st_status_name(s), st_last_error());
    assert_int_equal(res.shapes, 2);
    assert_int_equal(res.mismatches, 0);
    assert_true(res.table_written);
    int ids[256];
    const int n_ids = st_mmvq_variant_ids(ids, 256);
    char *text = slurp(res.report_path, NULL);
    cJSON *root = cJSON_Parse(text);
    if (!root) fail_msg("the report %s is not JSON", res.report_path);
    const cJSON *sh;
    int n_shapes = 0;
    cJSON_ArrayForEach(sh, field(root, "shapes"))
    {
        const int64_t cols = int_field(sh, "n_cols");
        int want = 1, fits = 0; /* the default and every in-place variant that fits the row */
        for (int i = 0; i < n_ids; i++) {
            fits += st_mmvq_variant_fits(ids[i], cols);
            want += st_mmvq_variant_fits(ids[i], cols) && st_mmvq_in_place_variant(ids[i]);
        }
        int n = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, field(sh, "candidates"))
        {
            const char *bc = str_field(c, "byte_compare");
            if (n++ == 0) {
                assert_string_equal(str_field(c, "name"), "default");
                continue;
            }
            if (strcmp(bc, "identical") != 0) fail_msg("candidate '%s': byte_compare '%s'", str_field(c, "name"), bc);
            assert_true(st_mmvq_in_place_variant(int_field(c, "rows")));
        }
        assert_int_equal(n, want);
        assert_true(want > 1 && want < 1 + fits); /* some variants run in place, not all */
        n_shapes++;
    }
    assert_int_equal(n_shapes, 2);
    cJSON_Delete(root);
    free(text);

    /* an expert shape is refused in place, with one line, and nothing is written */
    const char *dir2 = make_dir();
    const char *const ex[] = {"expert iq3_s iq4_nl 256 64 2"};
    tune_opts(&o, dir2, nts, 2, nts, 2);
    o.shapes = ex;
    o.n_shapes = 1;
    o.in_place = true;
    st_tune_result r2 __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&r2);
    assert_int_equal(st_tune_run(ctx, &o, &r2), ST_ERR_INVALID_ARG);
    assert_non_null(strstr(st_last_error(), "in-place layout tunes iq_mmvq shapes only"));
    assert_false(r2.table_written);
    st_ctx_destroy(ctx);
}

static void tune_writes_a_table_that_engages_and_a_report_listing_every_candidate(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    st_tune_options o;
    const int nts[] = {1, 2};
    tune_opts(&o, dir, nts, 2, nts, 2);
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("st_tune_run: %s: %s", st_status_name(s), st_last_error());
    assert_true(res.table_written);
    assert_true(res.engaged);
    const int want_shapes = model_shapes(2);
    assert_true(want_shapes > 0);
    assert_int_equal(res.shapes, want_shapes);
    assert_int_equal(res.mismatches, 0);
    assert_true(res.kept_variants >= 0 && res.kept_variants <= res.shapes);
    assert_true(starts_with(res.table_path, dir));
    assert_true(ends_with(res.table_path, ".table"));
    assert_true(file_exists(res.table_path));

    /* the report */
    char *text = slurp(res.report_path, NULL);
    cJSON *root = cJSON_Parse(text);
    if (!root) fail_msg("the report %s is not JSON", res.report_path);
    const cJSON *shapes = field(root, "shapes");
    assert_true(cJSON_IsArray(shapes));
    assert_int_equal(cJSON_GetArraySize(shapes), res.shapes);
    int n_expert = 0, n_mmvq = 0;
    const cJSON *sh;
    cJSON_ArrayForEach(sh, shapes)
    {
        check_report_shape(sh);
        if (!strcmp(str_field(sh, "kind"), "mmvq")) n_mmvq++;
        else n_expert++;
    }
    st_model *m = NULL;
    assert_int_equal(st_model_open(MODEL, &m), ST_OK);
    assert_int_equal(n_expert, (int)st_model_expert_shape_count(m) * 2);
    assert_int_equal(n_mmvq, (int)st_model_mmvq_shape_count(m));
    st_model_close(m);
    const cJSON *tj = field(root, "table");
    assert_string_equal(str_field(tj, "path"), res.table_path);
    assert_true(bool_field(tj, "written"));
    assert_true(bool_field(tj, "engaged"));
    assert_true(starts_with(str_field(tj, "engagement_line"), "decode tuning: "));
    const cJSON *sm = field(root, "summary");
    assert_int_equal(int_field(sm, "shapes"), res.shapes);
    assert_int_equal(int_field(sm, "mismatches"), 0);
    assert_int_equal(int_field(sm, "kept_variants"), res.kept_variants);
    cJSON_Delete(root);
    free(text);

    /* only the table, the report (JSON and its HTML page), the run's
     * manifest and the folder's index are left: no candidate or temporary
     * file */
    char names[16][256], html[1100], manifest[1100];
    snprintf(html, sizeof html, "%.*s.html", (int)(strlen(base_name(res.report_path)) - 5), base_name(res.report_path));
    snprintf(manifest, sizeof manifest, "%.*s.manifest", (int)(strlen(base_name(res.report_path)) - 5),
             base_name(res.report_path));
    const int n = dir_entries(dir, names, 16);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++)
        assert_true(!strcmp(names[i], base_name(res.table_path)) || !strcmp(names[i], base_name(res.report_path)) ||
                    !strcmp(names[i], html) || !strcmp(names[i], manifest) || !strcmp(names[i], "tables.json"));
    st_ctx_destroy(ctx);

    /* the table engages in a fresh context, with one line */
    st_ctx *fresh = cpu_ctx();
    logcap cap = {0};
    st_set_log(cap_line, &cap);
    s = st_ctx_load_table(fresh, res.table_path);
    st_set_log(NULL, NULL);
    assert_int_equal(s, ST_OK);
    assert_int_equal(cap.n, 1);
    assert_true(starts_with(cap.lines[0], "decode tuning: "));
    assert_non_null(strstr(cap.lines[0], " shapes from "));
    assert_non_null(strstr(cap.lines[0], res.table_path));
    assert_non_null(st_ctx_table(fresh));
    assert_int_equal((int)st_table_count(st_ctx_table(fresh)), res.kept_variants);
    st_ctx_destroy(fresh);
}

/* The tuner restores the log sink it found: a caller's sink still gets the
 * library's lines after st_tune_run. */
static void tune_keeps_the_callers_log_sink(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    st_tune_options o;
    const int nts[] = {1};
    tune_opts(&o, dir, nts, 1, nts, 1);
    logcap cap = {0};
    st_set_log(cap_line, &cap);
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    /* a load after the tune must still reach the caller's sink */
    st_ctx *fresh = cpu_ctx();
    const int before = cap.n;
    const st_status ls = s == ST_OK ? st_ctx_load_table(fresh, res.table_path) : s;
    const int after = cap.n;
    st_set_log(NULL, NULL);
    st_ctx_destroy(fresh);
    st_ctx_destroy(ctx);
    if (s != ST_OK) fail_msg("st_tune_run: %s: %s", st_status_name(s), st_last_error());
    assert_int_equal(ls, ST_OK);
    if (after != before + 1)
        fail_msg("the engagement line of st_ctx_load_table after st_tune_run did not reach the caller's log sink "
                 "(st_tune_run replaced it with the default sink)");
}

/* ---- 2: coverage ------------------------------------------------------------ */

static void coverage_reports_every_model_shape_covered(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    st_tune_options o;
    /* coverage asks for every expert token count 1..8 */
    const int all[] = {1, 2, 3, 4, 5, 6, 7, 8}, mix[] = {1, 2};
    tune_opts(&o, dir, all, 8, mix, 2);
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("st_tune_run: %s: %s", st_status_name(s), st_last_error());
    assert_int_equal(res.shapes, model_shapes(8));
    assert_true(res.engaged);

    char *out = NULL;
    char *argv[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, (char *)dir, NULL};
    int status = run_cli(argv, &out, NULL);
    if (status != 0) fail_msg("coverage of the tuned dir: exit %d\n%s", status, out);
    if (!strstr(out, "the table engages here") || strstr(out, "missing:"))
        fail_msg("coverage of the tuned dir: not every shape covered\n%s", out);
    free(out);

    /* an empty table for this identity engages but covers nothing */
    const char *empty_dir = make_dir();
    st_table *t = NULL;
    assert_int_equal(st_table_create(st_ctx_identity(ctx), &t), ST_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/empty.table", empty_dir);
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    st_table_destroy(t);
    char *argv2[] = {"tune_decode", "--backend", "cpu", "coverage", MODEL, (char *)empty_dir, NULL};
    status = run_cli(argv2, &out, NULL);
    if (status != 1 || !strstr(out, "missing:"))
        fail_msg("coverage of an empty table: exit %d, expected exit 1 and the missing shapes\n%s", status, out);
    free(out);
    st_ctx_destroy(ctx);
}

/* ---- 3: killing the tuner ---------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Starts `tune_decode --backend cpu -q tune MODEL --out DIR --gate-budget 5`
 * (stdout to /dev/null, stderr into ERR_PATH). */
static pid_t spawn_tune(const char *dir, const char *err_path)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (nul < 0 || err < 0) _exit(126);
        dup2(nul, 1);
        dup2(err, 2);
        close(nul);
        close(err);
        char *argv[] = {"tune_decode", "--backend", "cpu", "-q", "tune", MODEL, "--out", (char *)dir, "--gate-budget", "5", NULL};
        execv(CLI, argv);
        _exit(127);
    }
    return pid;
}

static int wait_for(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) assert_int_equal(errno, EINTR);
    return status;
}

/* Every *.table in DIR is the expected one; returns how many temporary
 * leftovers (".tmp." or ".candidate") there are. */
static int check_dir_tables(const char *dir, const char *table_name, bool verbose)
{
    char names[64][256];
    int n = dir_entries(dir, names, 64);
    assert_true(n <= 64);
    int temps = 0;
    for (int i = 0; i < n; i++) {
        if (ends_with(names[i], ".table") && strcmp(names[i], table_name) != 0)
            fail_msg("%s: unexpected table file '%s' (a temporary file must never end in .table)", dir, names[i]);
        if (strstr(names[i], ".tmp.") || ends_with(names[i], ".candidate") || ends_with(names[i], ".tmp")) {
            if (verbose) print_message("  leftover: %s\n", names[i]);
            temps++;
        }
    }
    return temps;
}

/* The CLI ran to the end and the end-to-end gate did not pass the table
 * (exit 3: it could not decide; 4: it measured it slower): a timing verdict,
 * possible on a busy CPU when the tune kept a variant. */
static bool gate_refused(int status, const char *err)
{
    return WIFEXITED(status) && (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4) &&
           strstr(err, "the table was NOT installed: the end-to-end gate") != NULL;
}

static void killing_the_tuner_never_leaves_a_partial_table(void **state)
{
    (void)state;
    const char *dir = make_dir();
    const char *err_dir = make_dir();
    char err_path[128];
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", err_dir);
    st_ctx *ctx = cpu_ctx();

    /* a valid table at the exact path the tuner writes */
    st_tune_options o;
    const int nts[] = {1};
    tune_opts(&o, dir, nts, 1, nts, 1);
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("st_tune_run: %s: %s", st_status_name(s), st_last_error());
    char table_path[ST_TUNE_PATH_MAX];
    snprintf(table_path, sizeof table_path, "%s", res.table_path);
    const char *table_name = base_name(table_path);
    assert_valid_engaging_table(table_path, ctx);

    /* how long an uninterrupted full (not quick) tune takes here */
    size_t first_len = 0;
    char *first = slurp(table_path, &first_len);
    const double t0 = now_s();
    int status = wait_for(spawn_tune(dir, err_path));
    const double full = now_s() - t0;
    {
        char *e = slurp(err_path, NULL);
        if (!WIFEXITED(status) || !(WEXITSTATUS(status) == 0 || gate_refused(status, e)))
            fail_msg("uninterrupted tune: status %d\n%s", status, e);
        if (gate_refused(status, e)) {
            size_t n = 0;
            char *now = slurp(table_path, &n);
            if (!same_bytes(first, first_len, now, n)) fail_msg("the gate refused the table, yet the table changed");
            free(now);
        }
        free(e);
    }
    free(first);
    assert_valid_engaging_table(table_path, ctx);
    assert_int_equal(check_dir_tables(dir, table_name, false), 0);
    print_message("uninterrupted full tune: %.2f s\n", full);

    /* kill delays: ~20 ms .. ~1 s, then around the end of the run, where the
     * table is written */
    double delays[10] = {0.02, 0.045, 0.1, 0.22, 0.48, 1.0};
    int n_delays = 6;
    delays[n_delays++] = 0.70 * full;
    delays[n_delays++] = 0.85 * full;
    delays[n_delays++] = 0.95 * full;
    delays[n_delays++] = 1.02 * full;

    for (int it = 0; it < n_delays; it++) {
        const int sig = it % 2 ? SIGINT : SIGKILL;
        size_t before_len = 0;
        char *before = slurp(table_path, &before_len);
        const int temps_before = check_dir_tables(dir, table_name, false);
        const pid_t pid = spawn_tune(dir, err_path);
        sleep_s(delays[it]);
        assert_int_equal(kill(pid, sig), 0);
        status = wait_for(pid);

        assert_true(file_exists(table_path));
        size_t after_len = 0;
        char *after = slurp(table_path, &after_len);
        const bool same = same_bytes(before, before_len, after, after_len);
        const int temps_after = check_dir_tables(dir, table_name, true);
        char *err = slurp(err_path, NULL);
        const char *how = WIFEXITED(status) ? "exit" : "signal";
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? WTERMSIG(status) : -1;
        print_message("%-7s after %4.0f ms: %s %d, table %s, %d temporary leftovers\n",
                      sig == SIGKILL ? "SIGKILL" : "SIGINT", 1000 * delays[it], how, code,
                      same ? "unchanged" : "replaced", temps_after);

        if (!same) assert_valid_engaging_table(table_path, ctx);
        if (gate_refused(status, err)) {
            /* finished before the signal, and the gate refused: nothing installed */
            if (!same) fail_msg("the gate refused the table, yet the table changed");
        } else if (sig == SIGKILL) {
            /* killed, or finished before the signal */
            assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                        (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        } else if (WIFEXITED(status)) {
            if (WEXITSTATUS(status) == 130) {
                if (!same) fail_msg("SIGINT: exit 130 but the table changed");
                assert_non_null(strstr(err, "no table was written"));
                /* a clean stop leaves no new temporary file */
                assert_true(temps_after <= temps_before);
            } else if (WEXITSTATUS(status) != 0) {
                fail_msg("SIGINT after %.0f ms: exit status %d\n%s", 1000 * delays[it], WEXITSTATUS(status), err);
            }
        } else {
            /* SIGINT outside st_tune_run (before the CLI installs its handler,
             * or after it restored the default): the default action ends the
             * process; the table is the old one or a complete new one. */
            assert_true(WIFSIGNALED(status));
            assert_int_equal(WTERMSIG(status), SIGINT);
        }
        free(err);
        free(before);
        free(after);
    }
    st_ctx_destroy(ctx);
}

/* ---- 4: another identity's table -------------------------------------------- */

static void tune_refuses_to_overwrite_a_table_for_another_identity(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    const st_identity *ours = st_ctx_identity(ctx);

    /* the path the tuner writes: DIR/strata-<model>-<arch>-<runtime>.table,
     * "strata-" not doubled on a model name that starts with it (tune_out.c) */
    st_model *m = NULL;
    assert_int_equal(st_model_open(MODEL, &m), ST_OK);
    char path[1024];
    const char *name = st_model_name(m);
    snprintf(path, sizeof path, "%s/%s%s-%s-%s.table", dir, strncmp(name, "strata-", 7) ? "strata-" : "", name,
             ours->arch, ours->runtime);
    st_model_close(m);

    st_identity other = *ours;
    snprintf(other.arch, sizeof other.arch, "gfx1030");
    st_table *t = NULL;
    assert_int_equal(st_table_create(&other, &t), ST_OK);
    const st_mmvq_key key = {ST_Q8_0, 512, 256};
    assert_int_equal(st_table_add_mmvq(t, &key, MMVQ_ROWS[0]), ST_OK);
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    st_table_destroy(t);
    size_t len0 = 0;
    char *orig = slurp(path, &len0);

    st_tune_options o;
    const int nts[] = {1};
    tune_opts(&o, dir, nts, 1, nts, 1);
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    st_status s = st_tune_run(ctx, &o, &res);
    assert_int_equal(s, ST_ERR_EXISTS);
    assert_non_null(strstr(st_last_error(), "gfx1030"));
    assert_false(res.table_written);
    size_t len1 = 0;
    char *now = slurp(path, &len1);
    assert_true(same_bytes(orig, len0, now, len1));
    free(now);
    /* nothing else was written */
    char names[16][256];
    assert_int_equal(dir_entries(dir, names, 16), 1);

    /* a file that is no table at all is not overwritten either */
    char junk_dir_path[1100];
    const char *junk_dir = make_dir();
    snprintf(junk_dir_path, sizeof junk_dir_path, "%s/%s", junk_dir, base_name(path));
    FILE *f = fopen(junk_dir_path, "w");
    assert_non_null(f);
    fputs("not a table\n", f);
    fclose(f);
    o.out_dir = junk_dir;
    s = st_tune_run(ctx, &o, &res);
    assert_int_equal(s, ST_ERR_EXISTS);
    char *junk = slurp(junk_dir_path, NULL);
    assert_string_equal(junk, "not a table\n");
    free(junk);

    /* --force replaces it */
    o.out_dir = dir;
    o.force = true;
    s = st_tune_run(ctx, &o, &res);
    if (s != ST_OK) fail_msg("st_tune_run --force: %s: %s", st_status_name(s), st_last_error());
    assert_string_equal(res.table_path, path);
    assert_true(res.table_written);
    assert_true(res.engaged);
    size_t len2 = 0;
    char *forced = slurp(path, &len2);
    assert_false(same_bytes(orig, len0, forced, len2));
    free(forced);
    assert_valid_engaging_table(path, ctx);
    free(orig);
    st_ctx_destroy(ctx);
}

/* ---- 5: a stop request ------------------------------------------------------- */

static void tune_stops_cleanly_when_asked(void **state)
{
    (void)state;
    const char *dir = make_dir();
    st_ctx *ctx = cpu_ctx();
    st_tune_options o;
    const int nts[] = {1, 2};
    tune_opts(&o, dir, nts, 2, nts, 2);
    volatile int stop = 1;
    o.stop = &stop;
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    assert_int_equal(st_tune_run(ctx, &o, &res), ST_ERR_INTERRUPTED);
    assert_false(res.table_written);
    assert_false(res.engaged);
    assert_false(file_exists(res.table_path));
    char names[16][256];
    const int n = dir_entries(dir, names, 16);
    if (n) fail_msg("a stopped tune left '%s' in %s", names[0], dir);
    st_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tune_writes_a_table_that_engages_and_a_report_listing_every_candidate),
        cmocka_unit_test(tune_sweeps_the_wide_row_variants_on_wide_rows_only),
        cmocka_unit_test(tune_in_place_sweeps_the_in_place_variants_only),
        cmocka_unit_test(coverage_reports_every_model_shape_covered),
        cmocka_unit_test(killing_the_tuner_never_leaves_a_partial_table),
        cmocka_unit_test(tune_refuses_to_overwrite_a_table_for_another_identity),
        cmocka_unit_test(tune_stops_cleanly_when_asked),
        cmocka_unit_test(tune_keeps_the_callers_log_sink),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_dirs);
}
