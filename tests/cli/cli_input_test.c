/* tune_decode against careless and hostile input: every case ends on its
 * own (a deadline catches a hang), with a clear line and a non-zero exit,
 * and nothing it prints can drive a terminal or break JSON. Option values,
 * missing files, FIFOs and devices, a byte order mark, escape sequences in
 * tables and models, NaN in reference vectors, models beyond the named
 * limits and shapes beyond this machine's memory. */
#include "cli_util.h"

#include "measure.h"
#include "strata/tools/vectors.h"
#include "strata/decode.h"
#include "strata/variants.h"
#include "strata/tools/text.h"

#include <cjson/cJSON.h>
#include <math.h>

#define MODEL STRATA_TEST_DATA "/gguf/tiny-moe.gguf"
#define VEC STRATA_TEST_DATA "/vectors/q8_0_M8_K64_T1.stqv"
#define QUICK 30.0 /* seconds: a refusal comes at once; this is a hang */

static char *num(long v)
{
    static char b[16][24];
    static int k;
    char *s = b[k++ % 16];
    snprintf(s, 24, "%ld", v);
    return s;
}

/* A table for this process (CPU backend) with no rows, in DIR. */
static char *cpu_table(const char *dir, const char *name)
{
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    st_table *t = NULL;
    assert_int_equal(st_table_create(st_ctx_identity(c), &t), ST_OK);
    char *p = cli_join(dir, name);
    assert_int_equal(st_table_write_atomic(t, p), ST_OK);
    st_table_destroy(t);
    st_ctx_destroy(c);
    return p;
}

/* ---- option values ------------------------------------------------------------ */

static void numeric_options_refuse_nan_infinity_and_out_of_range(void **state)
{
    (void)state;
    static const char *const bad_pct[] = {"nan", "NaN%", "inf", "-inf", "1e400", "-1", "100", "", "1%%", "5x"};
    for (size_t i = 0; i < sizeof bad_pct / sizeof bad_pct[0]; i++) {
        cli_run r = cli(QUICK, "tune", "--threshold", bad_pct[i], NULL);
        cli_expect_usage(&r, "--threshold", bad_pct[i]);
        cli_free(&r);
    }
    static const char *const bad_slow[] = {"nan", "inf", "1001", "-0.5"};
    for (size_t i = 0; i < sizeof bad_slow / sizeof bad_slow[0]; i++) {
        cli_run r = cli(QUICK, "verify", "--max-slowdown", bad_slow[i], MODEL, "t.table", NULL);
        cli_expect_usage(&r, "--max-slowdown", bad_slow[i]);
        cli_free(&r);
    }
    const struct {
        const char *cmd, *opt, *val;
    } bad_int[] = {
        {"tune", "--rounds", "0"},
        {"tune", "--rounds", num(ST_MEASURE_MAX_ROUNDS + 1)},
        {"tune", "--rounds", "1e3"},
        {"tune", "--rounds", " 5"},
        {"tune", "--experts", num(ST_MAX_EXPERTS + 1)},
        {"tune", "--topk", num(ST_MAX_TOPK + 1)},
        {"tune", "--topk", "99999999999999999999"},
        {"verify", "--rounds", "2"},
        {"verify", "--experts", num(ST_MAX_EXPERTS + 1)},
        {"verify", "--topk", num(ST_MAX_TOPK + 1)},
        {"verify", "--layers", "0"},
        {"bench", "--layers", "abc"},
        {"bench", "--layers", "513"},
    };
    for (size_t i = 0; i < sizeof bad_int / sizeof bad_int[0]; i++) {
        cli_run r = cli(QUICK, bad_int[i].cmd, bad_int[i].opt, bad_int[i].val, NULL);
        char what[96];
        snprintf(what, sizeof what, "%s %s '%s'", bad_int[i].cmd, bad_int[i].opt, bad_int[i].val);
        cli_expect_usage(&r, bad_int[i].opt, what);
        cli_free(&r);
    }
    /* beyond the limit: one more token than ST_MAX_TOKENS */
    char beyond[32];
    snprintf(beyond, sizeof beyond, "1,%d", ST_MAX_TOKENS + 1);
    const char *const bad_mix[] = {"1,,2", beyond, "0", "1,1", "1,2,", ",1", "1;2"};
    for (size_t i = 0; i < sizeof bad_mix / sizeof bad_mix[0]; i++) {
        cli_run r = cli(QUICK, "tune", "--ntok-mix", bad_mix[i], NULL);
        cli_expect_usage(&r, "--ntok-mix", bad_mix[i]);
        cli_free(&r);
        /* bench's token counts: the same list (td_ntok_list) */
        r = cli(QUICK, "bench", "--shape", "mmvq q8_0 64 64", "--ntok", bad_mix[i], NULL);
        cli_expect_usage(&r, "--ntok", bad_mix[i]);
        cli_free(&r);
    }
    /* 104 is split4's rows value inside the library, never a name for it */
    static const char *const bad_variant[] = {"3", "4x", "4/4junk", "/4", "4/", "-4", "104", "split", "split3",
                                              "split4x", "mma", "mma4", "mma-8", "wide", "wide64", "wide64x",
                                              "wide64x3", "wide96x2", "widex2", "wide64x2y", "222"};
    for (size_t i = 0; i < sizeof bad_variant / sizeof bad_variant[0]; i++) {
        /* with a shape, so the refusal is the variant's own */
        cli_run r = cli(QUICK, "bench", "--shape", "mmvq q8_0 64 64", "--variant", bad_variant[i], NULL);
        char want[64];
        snprintf(want, sizeof want, "--variant '%s' is not a compiled-in variant", bad_variant[i]);
        cli_expect_usage(&r, want, bad_variant[i]);
        cli_free(&r);
    }
    /* a wide-row variant on a row of one stream group */
    {
        cli_run r = cli(QUICK, "bench", "--shape", "mmvq q8_0 64 4096", "--variant", "wide64x2", NULL);
        cli_expect_usage(&r, "--variant wide64x2 needs rows of at least 8192 values (128 streams); 'mmvq q8_0 64 4096' has 4096",
                         "wide64x2 on 4096 columns");
        cli_free(&r);
    }
    static const char *const bad_kinds[] = {"expertmmvq", "mmvq,foo", "expert,"};
    for (size_t i = 0; i < sizeof bad_kinds / sizeof bad_kinds[0]; i++) {
        cli_run r = cli(QUICK, "tune", "--shapes", bad_kinds[i], NULL);
        cli_expect_usage(&r, "--shapes", bad_kinds[i]);
        cli_free(&r);
    }
    cli_run r = cli(QUICK, "--device", "1x", "identity", NULL);
    cli_expect_usage(&r, "--device", "--device 1x");
    cli_free(&r);
}

static void cd_into(void *dir) { (void)!chdir((const char *)dir); }

/* "--out --quick" must not make a folder named --quick: a value is never
 * taken from the next option. */
static void an_option_is_never_taken_as_a_value(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const struct {
        const char *cmd, *opt, *next;
    } cases[] = {
        {"tune", "--out", "--quick"},       {"tune", "--shape", "--quick"},  {"tune", "--threshold", "--force"},
        {"tune", "--ntok-mix", "--quick"},  {"verify", "--synthetic", "--rounds"},
        {"bench", "--shape", "--quick"},    {"bench", "--model", "--no-suite"},
        {"--backend", NULL, "--json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[6];
        int n = 0;
        argv[n++] = (char *)cases[i].cmd;
        if (cases[i].opt) argv[n++] = (char *)cases[i].opt;
        argv[n++] = (char *)cases[i].next;
        if (!cases[i].opt) argv[n++] = "identity";
        argv[n] = NULL;
        cli_run r = cli_exec(argv, QUICK, cd_into, (void *)dir);
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", cases[i].cmd, cases[i].opt ? cases[i].opt : "", cases[i].next);
        cli_expect_usage(&r, "needs a value", what);
        assert_non_null(strstr(r.err, cases[i].next));
        cli_free(&r);
    }
    assert_int_equal(cli_count(dir, NULL), 0); /* no folder named --quick */
}

static void an_unknown_option_is_called_unknown_even_when_last(void **state)
{
    (void)state;
    char *const cases[][6] = {
        {"tune", "--bogus", NULL},
        {"tune", MODEL, "--quick", "--bogus", NULL},
        {"verify", MODEL, "t.table", "--bogus", NULL},
        {"bench", "--quick", "--bogus", NULL},
        {"coverage", MODEL, "t.table", "--bogus", NULL},
        {"shapes", MODEL, "--bogus", NULL},
        {"table", "show", "x.table", "--bogus", NULL},
        {"vectors", VEC, "--bogus", NULL},
        {"--bogus", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = cli_exec(cases[i], QUICK, NULL, NULL);
        cli_expect_usage(&r, "unknown option '--bogus'", cases[i][0]);
        assert_null(strstr(r.err, "needs a value"));
        cli_free(&r);
    }
}

/* bench --ntok: an mmvq shape's rows at exactly the token counts given, in
 * increasing order (so each has its cost against 1 token), and no other. */
static void bench_measures_the_token_counts_given(void **state)
{
    (void)state;
    cli_run r = cli(120.0, "--backend", "cpu", "bench", "--quick", "--no-suite", "--shape", "mmvq q8_0 64 64", "--ntok",
                    "7,1,3", NULL);
    cli_expect_exit(&r, 0, "bench --ntok 7,1,3");
    int seen[8], n = 0;
    for (const char *l = r.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        char kind[16], type[16], shape[32], path[16];
        int nt;
        if (sscanf(l, "%15s %15s %31s %d %15s", kind, type, shape, &nt, path) == 5 && !strcmp(kind, "mmvq") &&
            !strcmp(path, "default")) {
            if (n == 8) fail_msg("more default rows than the 3 token counts:\n%s", r.out);
            seen[n++] = nt;
        }
    }
    if (n != 3 || seen[0] != 1 || seen[1] != 3 || seen[2] != 7)
        fail_msg("bench --ntok 7,1,3: the default rows' token counts are not 1, 3, 7:\n%s", r.out);
    cli_free(&r);
}

/* Options the command would not use are refused, not dropped in silence. */
static void options_that_would_be_ignored_are_refused(void **state)
{
    (void)state;
    char *const cases[][10] = {
        {"tune", MODEL, "--shape", "mmvq q8_0 64 64", NULL},
        {"tune", "--shapes", "mmvq", "--shape", "expert q8_0 q8_0 64 64 1", NULL},
        {"tune", MODEL, "--experts", "16", NULL},
        {"tune", MODEL, "--topk", "2", NULL},
        {"verify", MODEL, "t.table", "--layers", "4", NULL},
        {"verify", MODEL, "t.table", "--experts", "4", NULL},
        {"bench", "--variant", "4", NULL},
        {"bench", "--shape", "mmvq q8_0 64 64", "--variant", "4/4", NULL},
        {"bench", "--shape", "expert q8_0 q8_0 64 64 1", "--variant", "split4", NULL},
        {"bench", "--shape", "expert q8_0 q8_0 64 64 1", "--variant", "wide64x2", NULL},
        {"bench", "--no-suite", "--layers", "4", NULL},
        {"bench", "--shape", "mmvq q8_0 64 64", "--layers", "4", NULL},
        {"bench", "--ntok", "5,6", NULL},
        {"bench", "--no-suite", "--ntok", "5,6", NULL},
        {"bench", "--shape", "expert q8_0 q8_0 64 64 1", "--ntok", "5,6", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = cli_exec(cases[i], QUICK, NULL, NULL);
        char what[128];
        snprintf(what, sizeof what, "%s %s %s", cases[i][0], cases[i][1], cases[i][2]);
        cli_expect_exit(&r, 2, what);
        cli_free(&r);
    }
}

/* ---- files that are not there, not regular, not what they claim ------------- */

static void a_missing_file_is_an_error_wherever_it_is_named(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *missing = cli_join(dir, "missing.gguf"), *mtab = cli_join(dir, "missing.table");
    char *table = cpu_table(dir, "ok.table"), *out = cli_join(dir, "out");
    char *const cases[][10] = {
        {"--backend", "cpu", "bench", "--no-suite", "--quick", "--model", missing, NULL},
        {"--backend", "cpu", "tune", missing, "--out", out, "--quick", NULL},
        {"--backend", "cpu", "verify", missing, table, NULL},
        {"--backend", "cpu", "verify", MODEL, mtab, NULL},
        {"--backend", "cpu", "coverage", missing, table, NULL},
        {"shapes", missing, NULL},
        {"vectors", missing, NULL},
        {"--backend", "cpu", "table", "check", mtab, NULL},
        {"table", "show", mtab, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = cli_exec(cases[i], QUICK, NULL, NULL);
        const char *cmd = !strcmp(cases[i][0], "--backend") ? cases[i][2] : cases[i][0];
        cli_expect_exit(&r, 1, cmd);
        const char *where = strstr(r.out, strerror(ENOENT)) ? r.out : r.err;
        if (!strstr(where, strerror(ENOENT))) fail_msg("%s: no '%s' in\n%s%s", cmd, strerror(ENOENT), r.out, r.err);
        cli_free(&r);
    }
    assert_false(cli_exists(out));
    free(missing);
    free(mtab);
    free(table);
    free(out);
}

/* FIFOs (no writer: an open would block forever) and devices (/dev/zero
 * never ends) anywhere a file is named. */
static void fifos_and_devices_are_refused_at_once_everywhere(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *fm = cli_fifo(dir, "model.gguf"), *ft = cli_fifo(dir, "t.table"), *fv = cli_fifo(dir, "v.stqv");
    char *table = cpu_table(dir, "ok.table"), *out = cli_join(dir, "out");
    char *const cases[][10] = {
        {"--backend", "cpu", "table", "check", ft, NULL},
        {"table", "show", ft, NULL},
        {"vectors", fv, NULL},
        {"--backend", "cpu", "coverage", fm, table, NULL},
        {"--backend", "cpu", "coverage", MODEL, ft, NULL},
        {"--backend", "cpu", "verify", fm, table, NULL},
        {"--backend", "cpu", "verify", MODEL, ft, NULL},
        {"shapes", fm, NULL},
        {"--backend", "cpu", "tune", fm, "--out", out, "--quick", NULL},
        {"--backend", "cpu", "bench", "--no-suite", "--quick", "--model", fm, NULL},
        {"--backend", "cpu", "table", "check", "/dev/zero", NULL},
        {"table", "show", "/dev/zero", NULL},
        {"vectors", "/dev/zero", NULL},
        {"shapes", "/dev/zero", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = cli_exec(cases[i], QUICK, NULL, NULL);
        char what[200];
        snprintf(what, sizeof what, "%s %s", !strcmp(cases[i][0], "--backend") ? cases[i][2] : cases[i][0],
                 cases[i][!strcmp(cases[i][0], "--backend") ? 3 : 1]);
        cli_expect_exit(&r, 1, what);
        if (!strstr(r.out, "not a regular file") && !strstr(r.err, "not a regular file"))
            fail_msg("%s: the refusal does not say 'not a regular file':\n%s%s", what, r.out, r.err);
        assert_true(r.seconds < 10);
        cli_free(&r);
    }
    free(fm);
    free(ft);
    free(fv);
    free(table);
    free(out);
}

static void a_table_with_a_byte_order_mark_is_refused_by_name(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    char hdr[4 * ST_TOKEN_MAX + 16], text[256];
    st_identity_header(st_ctx_identity(c), hdr, sizeof hdr);
    st_ctx_destroy(c);
    const int n = snprintf(text, sizeof text, "\xef\xbb\xbf%s\nmmvq q8_0 64 64 2\n", hdr);
    char *p = cli_write(dir, "bom.table", text, (size_t)n);
    cli_run r = cli(QUICK, "--backend", "cpu", "table", "check", p, NULL);
    cli_expect_exit(&r, 1, "table check (BOM)");
    assert_non_null(strstr(r.out, "byte order mark"));
    assert_null(strstr(r.out, "this device is"));
    cli_free(&r);
    r = cli(QUICK, "table", "show", p, NULL);
    cli_expect_one_line(&r, 1, "byte order mark", "table show (BOM)");
    cli_free(&r);
    free(p);
}

/* ---- what is printed ------------------------------------------------------------ */

static const char HOSTILE[] = "\x1b]0;owned\x07\x1b[2J\xc2\x9b" "31m\x9b" "m\xff\xe2\x80\xae";

static void hostile_table_text_is_shown_escaped(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char text[512];
    const int n = snprintf(text, sizeof text, "# made by %s\ngfx%s 1 2 %d\nmmvq q8_0 64 64 2\n", HOSTILE, "\x1b[5m",
                           STRATA_SELECTION_SPACE);
    char *p = cli_write(dir, "evil.table", text, (size_t)n);
    cli_run r = cli(QUICK, "table", "show", p, NULL);
    cli_expect_exit(&r, 0, "table show");
    if (has_control(r.out)) fail_msg("table show printed a control or stray byte:\n%s", r.out);
    assert_non_null(strstr(r.out, "\\x1b]0;owned\\x07"));
    cli_free(&r);
    r = cli(QUICK, "--json", "table", "show", p, NULL);
    cli_expect_exit(&r, 0, "table show --json");
    if (!is_utf8(r.out)) fail_msg("table show --json is not UTF-8");
    cJSON *j = cJSON_Parse(r.out);
    if (!j) fail_msg("table show --json is not JSON:\n%s", r.out);
    const cJSON *com = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "comments"), 0);
    assert_true(cJSON_IsString(com));
    assert_non_null(strstr(com->valuestring, "\\xff")); /* the stray byte, marked */
    cJSON_Delete(j);
    cli_free(&r);
    r = cli(QUICK, "--backend", "cpu", "table", "check", p, NULL);
    cli_expect_exit(&r, 1, "table check");
    if (has_control(r.out) || has_control(r.err)) fail_msg("table check printed a control byte:\n%s%s", r.out, r.err);
    cli_free(&r);
    free(p);
}

static void hostile_model_names_are_shown_escaped(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char arch[64], tname[128];
    snprintf(arch, sizeof arch, "evil\x1b[1m");
    snprintf(tname, sizeof tname, "blk.0.attn_q\x1b[2J\x9b.weight");
    const g_tensor ts[] = {{"blk.0.attn_q.weight", {64, 32, 1}, ST_Q8_0}, {tname, {64, 32, 1}, ST_Q8_0}};
    char name[128];
    snprintf(name, sizeof name, "name %s", HOSTILE);
    const g_model m = {arch, name, -1, -1, ts, 2};
    char *p = cli_gguf(dir, "evil.gguf", &m);
    cli_run r = cli(QUICK, "shapes", p, NULL);
    cli_expect_exit(&r, 0, "shapes");
    if (has_control(r.out)) fail_msg("shapes printed a control or stray byte:\n%s", r.out);
    assert_non_null(strstr(r.out, "\\x1b]0;owned"));
    cli_free(&r);
    r = cli(QUICK, "--json", "shapes", p, NULL);
    cli_expect_exit(&r, 0, "shapes --json");
    if (!is_utf8(r.out)) fail_msg("shapes --json is not UTF-8:\n%s", r.out);
    cJSON *j = cJSON_Parse(r.out);
    if (!j) fail_msg("shapes --json is not JSON:\n%s", r.out);
    cJSON_Delete(j);
    cli_free(&r);
    /* the tuner's outputs: a file name of plain characters, a valid report */
    char *out = cli_join(dir, "out");
    r = cli(300, "--backend", "cpu", "-q", "--json", "tune", p, "--quick", "--no-verify", "--out", out, NULL);
    cli_expect_exit(&r, 0, "tune");
    if (!is_utf8(r.out) || has_control(r.err)) fail_msg("tune printed a stray byte:\n%s%s", r.out, r.err);
    cJSON *res = cJSON_Parse(r.out);
    assert_non_null(res);
    const char *report = cJSON_GetStringValue(cJSON_GetObjectItem(res, "report"));
    assert_non_null(report);
    for (const char *c = strrchr(report, '/') + 1; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", *c))
            fail_msg("report file name holds '%c': %s", *c, report);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(st_read_file(report, &text, &len), ST_OK);
    if (!is_utf8(text)) fail_msg("the report is not UTF-8");
    cJSON *rj = cJSON_Parse(text);
    if (!rj) fail_msg("the report is not JSON");
    cJSON_Delete(rj);
    free(text);
    cJSON_Delete(res);
    cli_free(&r);
    free(out);
    free(p);
}

/* ---- reference vectors ---------------------------------------------------------- */

static void non_finite_reference_values_fail_vectors(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(st_read_file(VEC, &buf, &len), ST_OK);
    st_stqv *s = NULL;
    assert_int_equal(st_stqv_parse(buf, len, &s), ST_OK);
    const struct {
        int sec;
        bool f64;
        double v;
        const char *name, *want;
    } cases[] = {
        {ST_STQV_X_F32, false, NAN, "nan_x.stqv", "finite (X_F32): value 3 is NaN"},
        /* a NaN among the expected outputs used to be outweighed by a later
         * finite error, and the dot check passed */
        {ST_STQV_Y_Q8_1_F64, true, NAN, "nan_y.stqv", "finite (Y_Q8_1_F64): value 3 is NaN"},
        {ST_STQV_Y_Q8_1_F64, true, INFINITY, "inf_y.stqv", "finite (Y_Q8_1_F64): value 3 is infinite"},
        {ST_STQV_W_DEQ, false, -INFINITY, "inf_w.stqv", "finite (W_DEQ): value 3 is infinite"},
    };
    cli_run r = cli(QUICK, "vectors", VEC, NULL);
    cli_expect_exit(&r, 0, "vectors (the clean file)");
    cli_free(&r);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *copy = malloc(len);
        memcpy(copy, buf, len);
        const size_t at = (size_t)s->sec_off[cases[i].sec] + 3 * (cases[i].f64 ? 8 : 4);
        if (cases[i].f64) {
            const double d = cases[i].v;
            memcpy(copy + at, &d, 8);
        } else {
            const float f = (float)cases[i].v;
            memcpy(copy + at, &f, 4);
        }
        char *p = cli_write(dir, cases[i].name, copy, len);
        r = cli(QUICK, "vectors", p, NULL);
        cli_expect_exit(&r, 1, cases[i].name);
        if (!strstr(r.out, cases[i].want)) fail_msg("%s: no '%s' in\n%s", cases[i].name, cases[i].want, r.out);
        assert_null(strstr(r.out, "PASS"));
        cli_free(&r);
        free(copy);
        free(p);
    }
    st_stqv_close(s);
    free(buf);
}

/* ---- the limits -------------------------------------------------------------------- */

/* Models one step past ST_MAX_EXPERTS or ST_MAX_TOPK: every command that
 * takes a model refuses with one line naming the limit (the reads and
 * writes past fixed arrays they used to make show up under ASan). */
static void models_beyond_the_named_limits_are_refused_everywhere(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *table = cpu_table(dir, "ok.table");
    const uint64_t E = ST_MAX_EXPERTS + 1;
    const g_tensor big[] = {{"blk.0.ffn_gate_exps.weight", {32, 32, E}, ST_Q8_0},
                            {"blk.0.ffn_up_exps.weight", {32, 32, E}, ST_Q8_0},
                            {"blk.0.ffn_down_exps.weight", {32, 32, E}, ST_Q8_0}};
    const g_tensor two[] = {{"blk.0.ffn_gate_exps.weight", {32, 32, 2}, ST_Q8_0},
                            {"blk.0.ffn_up_exps.weight", {32, 32, 2}, ST_Q8_0},
                            {"blk.0.ffn_down_exps.weight", {32, 32, 2}, ST_Q8_0}};
    const g_model models[] = {
        {"qwen3moe", "experts-in-tensors", -1, 2, big, 3},
        {"qwen3moe", "experts-in-metadata", (int64_t)E, 2, two, 3},
        {"qwen3moe", "topk", 2, ST_MAX_TOPK + 1, two, 3},
    };
    const char *limit[] = {"ST_MAX_EXPERTS", "ST_MAX_EXPERTS", "ST_MAX_TOPK"};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        char file[64];
        snprintf(file, sizeof file, "%s.gguf", models[m].name);
        char *p = cli_gguf(dir, file, &models[m]), *out = cli_join(dir, "out");
        char *const cases[][12] = {
            {"shapes", p, NULL},
            {"--backend", "cpu", "tune", p, "--quick", "--no-verify", "--out", out, NULL},
            {"--backend", "cpu", "verify", p, table, NULL},
            {"--backend", "cpu", "bench", "--no-suite", "--quick", "--model", p, NULL},
            {"--backend", "cpu", "coverage", p, table, NULL},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            cli_run r = cli_exec(cases[i], 120, NULL, NULL);
            char what[128];
            snprintf(what, sizeof what, "%s of %s", !strcmp(cases[i][0], "shapes") ? "shapes" : cases[i][2], file);
            cli_expect_one_line(&r, 1, limit[m], what);
            cli_free(&r);
        }
        assert_false(cli_exists(out));
        free(p);
        free(out);
    }
    free(table);
}

static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (size_t)kb * 1024;
}

/* A shape the parser accepts can need a terabyte: refused with the bytes
 * before anything is allocated (the process used to be killed, or to
 * fail after minutes). */
static void shapes_beyond_this_machines_memory_are_refused_with_the_bytes(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *out = cli_join(dir, "out"), *table = cpu_table(dir, "ok.table");
    const char *huge = "mmvq q8_0 1048576 1048576";
    char *const cases[][16] = {
        {"--backend", "cpu", "tune", "--shape", (char *)huge, "--quick", "--out", out, NULL},
        {"--backend", "cpu", "tune", "--shape", "expert q8_0 q8_0 1048576 1048576 1", "--experts", num(ST_MAX_EXPERTS),
         "--topk", num(ST_MAX_TOPK), "--quick", "--out", out, NULL},
        {"--backend", "cpu", "verify", "--synthetic", (char *)huge, table, NULL},
        {"--backend", "cpu", "bench", "--no-suite", "--quick", "--shape", (char *)huge, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run r = cli_exec(cases[i], QUICK, NULL, NULL);
        cli_expect_one_line(&r, 1, "bytes available now", cases[i][2]);
        assert_non_null(strstr(r.err, "needs "));
        cli_free(&r);
    }
    /* 131072 x 131072 q8_0: 18 GB of weights, and a copy; refused wherever
     * it does not fit (skipped on a machine where it does) */
    const double need = 2.0 * 131072.0 * 131072.0 * 34.0 / 32.0;
    if (need > (double)mem_available()) {
        cli_run r = cli(QUICK, "--backend", "cpu", "tune", "--shape", "mmvq q8_0 131072 131072", "--quick", "--out", out,
                        NULL);
        cli_expect_one_line(&r, 1, "bytes available now", "tune 131072 x 131072");
        cli_free(&r);
    } else {
        print_message("131072 x 131072 fits this machine (%zu bytes available): not refused here\n", mem_available());
    }
    assert_false(cli_exists(out));
    free(out);
    free(table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(numeric_options_refuse_nan_infinity_and_out_of_range),
        cmocka_unit_test(an_option_is_never_taken_as_a_value),
        cmocka_unit_test(an_unknown_option_is_called_unknown_even_when_last),
        cmocka_unit_test(options_that_would_be_ignored_are_refused),
        cmocka_unit_test(bench_measures_the_token_counts_given),
        cmocka_unit_test(a_missing_file_is_an_error_wherever_it_is_named),
        cmocka_unit_test(fifos_and_devices_are_refused_at_once_everywhere),
        cmocka_unit_test(a_table_with_a_byte_order_mark_is_refused_by_name),
        cmocka_unit_test(hostile_table_text_is_shown_escaped),
        cmocka_unit_test(hostile_model_names_are_shown_escaped),
        cmocka_unit_test(non_finite_reference_values_fail_vectors),
        cmocka_unit_test(models_beyond_the_named_limits_are_refused_everywhere),
        cmocka_unit_test(shapes_beyond_this_machines_memory_are_refused_with_the_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
