/* The decode tuning table on disk: the atomic write (old file intact on
 * failure), the loader's one line per load, directory auto-selection, and
 * the dispatch knobs read from the environment. */
#include "table_test_util.h"
#include "file_write.h"
#include "fuzz_table_identity.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/strata-table-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* st_table_load with a capturing sink: the status, the one line, and the
 * number of lines printed (must be 1). */
static st_status load_capture(const char *path, const st_dispatch_config *cfg, st_table **t,
                              capture *cap)
{
    st_dispatch_config def;
    st_dispatch_config_default(&def);
    memset(cap, 0, sizeof *cap);
    st_set_log(capture_line, cap);
    st_status s = st_table_load(path, &g_id, cfg ? cfg : &def, t);
    st_set_log(NULL, NULL);
    return s;
}

/* ---- files ----------------------------------------------------------------- */
static char *read_all(const char *path, size_t *len)
{
    char *buf = NULL;
    assert_int_equal(st_read_file(path, &buf, len), ST_OK);
    return buf;
}

static void table_write_atomic_replaces_file(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), path[4096];
    snprintf(path, sizeof path, "%s/x.table", dir);
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    st_mmvq_key m = {ST_IQ3_S, 2560, 2560};
    assert_int_equal(st_table_add_mmvq(t, &m, 4), ST_OK);
    write_text(dir, "x.table", "old contents\n");
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    char *want = NULL, *got = NULL;
    size_t wl = 0, gl = 0;
    assert_int_equal(st_table_format(t, &want, &wl), ST_OK);
    got = read_all(path, &gl);
    assert_int_equal(gl, wl);
    assert_memory_equal(got, want, wl);
    assert_int_equal(count_entries(dir), 1);
    free(want);
    free(got);
    /* into a directory that does not exist: an error, nothing created */
    char nowhere[4096];
    snprintf(nowhere, sizeof nowhere, "%s/missing/x.table", dir);
    assert_int_equal(st_table_write_atomic(t, nowhere), ST_ERR_IO);
    assert_int_equal(count_entries(dir), 1);
    st_table_destroy(t);
    remove_tree(dir);
    free(dir);
}

static void table_write_atomic_failure_keeps_old_file(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), path[4096];
    snprintf(path, sizeof path, "%s/x.table", dir);
    static const char old[] = "# the table that was there\ncpu 0 0 2\nmmvq q8_0 32 32 1\n";
    write_text(dir, "x.table", old);
    st_table *t = NULL;
    assert_int_equal(st_table_create(&g_id, &t), ST_OK);
    for (int i = 1; i <= 50; i++) {
        st_mmvq_key m = {ST_Q8_0, i, 64};
        assert_int_equal(st_table_add_mmvq(t, &m, 2), ST_OK);
    }
    static const long fail_at[] = {0, 1, 10, 200};
    for (size_t i = 0; i < sizeof fail_at / sizeof fail_at[0]; i++) {
        st_table_write_fail_after_bytes = fail_at[i];
        st_status s = st_table_write_atomic(t, path);
        st_table_write_fail_after_bytes = -1;
        assert_int_equal(s, ST_ERR_IO);
        size_t n = 0;
        char *got = read_all(path, &n);
        assert_int_equal(n, sizeof old - 1);
        assert_memory_equal(got, old, n);
        free(got);
        assert_int_equal(count_entries(dir), 1); /* no temporary left behind */
    }
    /* and the hook off again: the write goes through */
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    assert_int_equal(count_entries(dir), 1);
    st_table_destroy(t);
    remove_tree(dir);
    free(dir);
}

static void table_load_prints_one_line_on_success_and_each_refusal(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), path[4096], expected[MSG];
    snprintf(path, sizeof path, "%s/a.table", dir);
    capture cap;
    st_table *t = NULL;

    write_text(dir, "a.table", tbl("mmvq iq3_s 2560 2560 4\nmmvq q8_0 32 32 1\n"));
    assert_int_equal(load_capture(path, NULL, &t, &cap), ST_OK);
    assert_non_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected, "decode tuning: 2 shapes from %s (cpu, runtime %s)", path,
             g_id.runtime);
    assert_string_equal(cap.last, expected);
    st_table_destroy(t);

    /* Each kind of refusal through the loader: one line, the parser's. */
    char other_space[512], no_space[512], other_rt[512], other_cc[512];
    snprintf(other_space, sizeof other_space, "cpu %s %s 99\n", g_id.runtime, g_id.compiler);
    snprintf(no_space, sizeof no_space, "cpu %s %s\n", g_id.runtime, g_id.compiler);
    snprintf(other_rt, sizeof other_rt, "cpu 70152802 %s %d\n", g_id.compiler, g_id.space);
    snprintf(other_cc, sizeof other_cc, "cpu %s zzzz %d\n", g_id.runtime, g_id.space);
    char *body1 = strdup(tbl("bogus\n"));
    char *body2 = strdup(tbl("mmvq iq3_s 2560 2560 3\n"));
    char *body3 = strdup(tbl("mmvq x 1 1 1\n"));
    const struct {
        const char *text;
        st_status status;
        const char *tail;
    } cases[] = {
        {"", ST_ERR_PARSE, "empty file (no header line)"},
        {"# c\n", ST_ERR_PARSE, "empty file (no header line)"},
        {no_space, ST_ERR_REFUSED,
         "made before the kernel selection space was tracked - the kernels have changed since"},
        {other_space, ST_ERR_REFUSED, NULL},
        {other_rt, ST_ERR_REFUSED, NULL},
        {other_cc, ST_ERR_REFUSED, NULL},
        {body1, ST_ERR_PARSE, "line 2: unknown kernel kind 'bogus' (expected expert or mmvq)"},
        {body2, ST_ERR_PARSE, "line 2: rows 3 is not a compiled-in variant (1 2 4 8 16 mma8 mma16 mma32 split2 split4 split8 wide64x1 wide64x2 wide64x4 wide128x1 wide128x2 wide128x4)"},
        {body3, ST_ERR_PARSE, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(dir, "a.table", cases[i].text);
        t = (st_table *)&g_dummy;
        assert_int_equal(load_capture(path, NULL, &t, &cap), cases[i].status);
        assert_null(t);
        assert_int_equal(cap.count, 1);
        /* the loader prints exactly what the parser says */
        char msg[MSG];
        st_table *u = (st_table *)&g_dummy;
        assert_int_equal(st_table_parse(cases[i].text, strlen(cases[i].text), path, &g_id, NULL,
                                        &u, msg, sizeof msg),
                         cases[i].status);
        assert_null(u);
        assert_string_equal(cap.last, msg);
        if (cases[i].tail) {
            snprintf(expected, sizeof expected, "decode tuning: %s: %s", path, cases[i].tail);
            assert_string_equal(cap.last, expected);
        }
    }
    free(body1);
    free(body2);
    free(body3);
    char other_arch[64];
    snprintf(other_arch, sizeof other_arch, "gfx1100 1 2 %d\n", STRATA_SELECTION_SPACE);
    write_text(dir, "a.table", other_arch);
    t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(path, NULL, &t, &cap), ST_ERR_REFUSED);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: made for gfx1100, this device is cpu: run the tuner on this device",
             path);
    assert_string_equal(cap.last, expected);

    write_text(dir, "a.table", tbl(""));
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    cfg.active[ST_KNOB_EXPERT_V2] = true;
    t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(path, &cfg, &t, &cap), ST_ERR_REFUSED);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: STRATA_EXPERT_V2 reroutes the decode dispatch away from what the "
             "table measured",
             path);
    assert_string_equal(cap.last, expected);
    remove_tree(dir);
    free(dir);
}

static void table_load_refuses_unreadable_path(void **state)
{
    (void)state;
    capture cap;
    st_table *t = (st_table *)&g_dummy;
    char expected[MSG];
    const char *p = "/nonexistent/strata/x.table";
    assert_int_equal(load_capture(p, NULL, &t, &cap), ST_ERR_IO);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected, "decode tuning: %s: cannot read: %s", p, strerror(ENOENT));
    assert_string_equal(cap.last, expected);
}

static void write_table_for(const char *dir, const char *name, const char *arch,
                            const char *runtime, const char *compiler, int space)
{
    char text[1024];
    snprintf(text, sizeof text, "# provenance\n%s %s %s %d\nmmvq q8_0 32 32 1\n", arch, runtime,
             compiler, space);
    write_text(dir, name, text);
}

static void table_load_picks_the_matching_table_from_a_directory(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), expected[MSG], sub[4096];
    write_table_for(dir, "a.table", "gfx1030", g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "b.table", "cpu", "70152802", g_id.compiler, g_id.space);
    write_table_for(dir, "c.table", "cpu", g_id.runtime, "zzzzzzzz", g_id.space);
    write_table_for(dir, "d.table", "cpu", g_id.runtime, g_id.compiler, 99);
    write_text(dir, "e.table", "not a table at all");
    write_table_for(dir, "m.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    /* not *.table regular files: ignored even though they match */
    write_table_for(dir, "m.table.bak", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "notes.txt", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, ".hidden.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    snprintf(sub, sizeof sub, "%s/sub.table", dir);
    assert_int_equal(mkdir(sub, 0755), 0);

    capture cap;
    st_table *t = NULL;
    assert_int_equal(load_capture(dir, NULL, &t, &cap), ST_OK);
    assert_non_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected, "decode tuning: 1 shapes from %s/m.table (cpu, runtime %s)",
             dir, g_id.runtime);
    assert_string_equal(cap.last, expected);
    st_table_destroy(t);

    /* a trailing slash does not double up */
    char slashed[4096];
    snprintf(slashed, sizeof slashed, "%s/", dir);
    assert_int_equal(load_capture(slashed, NULL, &t, &cap), ST_OK);
    assert_string_equal(cap.last, expected);
    st_table_destroy(t);
    remove_tree(dir);
    free(dir);
}

static void table_load_reports_no_matching_table_in_directory(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), expected[MSG];
    write_table_for(dir, "a.table", "gfx1030", g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "b.table", "cpu", g_id.runtime, g_id.compiler, 99);
    write_text(dir, "c.table", "");
    write_table_for(dir, "match.txt", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    capture cap;
    st_table *t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(dir, NULL, &t, &cap), ST_ERR_NOT_FOUND);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: no table matches this process (%s); 3 tables skipped", dir, g_hdr);
    assert_string_equal(cap.last, expected);
    remove_tree(dir);
    free(dir);
}

static void table_load_refuses_several_matching_tables(void **state)
{
    (void)state;
    char *dir = make_tmpdir(), expected[MSG];
    write_table_for(dir, "b.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "a.table", g_id.arch, g_id.runtime, g_id.compiler, g_id.space);
    write_table_for(dir, "c.table", "gfx1030", g_id.runtime, g_id.compiler, g_id.space);
    capture cap;
    st_table *t = (st_table *)&g_dummy;
    assert_int_equal(load_capture(dir, NULL, &t, &cap), ST_ERR_REFUSED);
    assert_null(t);
    assert_int_equal(cap.count, 1);
    snprintf(expected, sizeof expected,
             "decode tuning: %s: 2 tables match this process (a.table, b.table): keep one", dir);
    assert_string_equal(cap.last, expected);
    remove_tree(dir);
    free(dir);
}

/* ---- knobs ------------------------------------------------------------------ */

static const char *const k_when[ST_KNOB_COUNT] = {
#define T_WHEN_(id, env, when, what) when,
    STRATA_DISPATCH_KNOBS(T_WHEN_)
#undef T_WHEN_
};

static void knob_value_active_follows_each_knob_kind(void **state)
{
    (void)state;
    for (int k = 0; k < ST_KNOB_COUNT; k++) {
        st_knob kn = (st_knob)k;
        assert_false(st_knob_value_active(kn, NULL));
        assert_false(st_knob_value_active(kn, ""));
        char label[128];
        if (!k_when[k]) {
            assert_false(st_knob_value_active(kn, "0"));
            assert_true(st_knob_value_active(kn, "1"));
            assert_true(st_knob_value_active(kn, "yes"));
            snprintf(label, sizeof label, "%s", st_knob_env(kn));
        } else {
            bool zero = !strcmp(k_when[k], "0");
            assert_int_equal(st_knob_value_active(kn, "0"), zero);
            assert_int_equal(st_knob_value_active(kn, "1"), !zero);
            assert_false(st_knob_value_active(kn, "yes"));
            assert_string_equal(st_knob_when(kn), zero ? "=0" : "=1");
            snprintf(label, sizeof label, "%s=%s", st_knob_env(kn), k_when[k]);
        }
        assert_string_equal(st_knob_label(kn), label);
        assert_true(strlen(st_knob_what(kn)) > 0);
    }
}

static void dispatch_config_from_env_reads_each_knob(void **state)
{
    (void)state;
    for (int k = 0; k < ST_KNOB_COUNT; k++) unsetenv(st_knob_env((st_knob)k));
    st_dispatch_config cfg;
    st_dispatch_config_from_env(&cfg);
    assert_int_equal(st_dispatch_config_first_active(&cfg), -1);
    for (int k = 0; k < ST_KNOB_COUNT; k++) {
        const char *env = st_knob_env((st_knob)k);
        setenv(env, k_when[k] ? k_when[k] : "1", 1);
        st_dispatch_config_from_env(&cfg);
        for (int j = 0; j < ST_KNOB_COUNT; j++) assert_int_equal(cfg.active[j], j == k);
        assert_int_equal(st_dispatch_config_first_active(&cfg), k);
        setenv(env, k_when[k] ? (strcmp(k_when[k], "0") ? "0" : "1") : "0", 1);
        st_dispatch_config_from_env(&cfg);
        assert_false(cfg.active[k]);
        unsetenv(env);
    }
    st_dispatch_config_from_env(&cfg);
    assert_int_equal(st_dispatch_config_first_active(&cfg), -1);
}

/* The table fuzzer's seeds (tests/fuzz/corpus/table) stay useful. A seed
 * whose header is the fuzzer's identity ("cpu 0.1.0 0123456789abcdef N",
 * fuzz_table.c) with N below this build's selection space is stale (it
 * stops at the header since a bump); with N = the space, valid_* seeds
 * parse and bad_* seeds are refused for a row, never for the header (N
 * above the space is a deliberate mismatch). Every valid_* seed parses
 * without an identity (parse_any). */
static void fuzz_table_seeds_reach_the_row_parser(void **state)
{
    (void)state;
    const char *dir = STRATA_SOURCE_DIR "/tests/fuzz/corpus/table";
    DIR *d = opendir(dir);
    assert_non_null(d);
    st_identity id;
    fuzz_table_identity(&id);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);
    int current = 0, valid = 0, bad = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const bool is_valid = !strncmp(e->d_name, "valid_", 6), is_bad = !strncmp(e->d_name, "bad_", 4);
        if (!is_valid && !is_bad) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        char buf[16384];
        const size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        char msg[1024];
        st_table *t = NULL;
        if (is_valid) {
            if (st_table_parse_any(buf, n, e->d_name, &t, msg, sizeof msg) != ST_OK) fail_msg("%s: %s", e->d_name, msg);
            st_table_destroy(t);
            t = NULL;
            valid++;
        }
        /* the header: the first line that is not blank or a comment */
        const char *p = buf, *end = buf + n;
        while (p < end) {
            const char *q = p;
            while (q < end && (*q == ' ' || *q == '\t')) q++;
            if (q < end && *q != '#' && *q != '\n' && *q != '\r') break;
            while (p < end && *p != '\n') p++;
            if (p < end) p++;
        }
        char line[128] = "";
        size_t ll = 0;
        while (p + ll < end && p[ll] != '\n' && p[ll] != '\r' && ll + 1 < sizeof line) ll++;
        memcpy(line, p, ll);
        line[ll] = '\0';
        int space = -1, used = 0;
        if (sscanf(line, "cpu 0.1.0 0123456789abcdef %d%n", &space, &used) != 1 || line[used] != '\0') continue;
        if (space < STRATA_SELECTION_SPACE)
            fail_msg("%s: a seed of selection space %d (this build: %d) stops at the header", e->d_name, space,
                     STRATA_SELECTION_SPACE);
        if (space > STRATA_SELECTION_SPACE) continue;
        current++;
        const st_status s = st_table_parse(buf, n, e->d_name, &id, &cfg, &t, msg, sizeof msg);
        st_table_destroy(t);
        if (is_valid && s != ST_OK) fail_msg("%s: %s", e->d_name, msg);
        if (is_bad) {
            if (s == ST_OK) fail_msg("%s parses", e->d_name);
            if (strstr(msg, "selection space") || strstr(msg, "made for") || strstr(msg, "header"))
                fail_msg("%s is refused for its header: %s", e->d_name, msg);
            bad++;
        }
    }
    closedir(d);
    assert_true(valid >= 5);
    assert_true(bad >= 5);
    assert_true(current >= 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_write_atomic_replaces_file),
        cmocka_unit_test(table_write_atomic_failure_keeps_old_file),
        cmocka_unit_test(table_load_prints_one_line_on_success_and_each_refusal),
        cmocka_unit_test(table_load_refuses_unreadable_path),
        cmocka_unit_test(table_load_picks_the_matching_table_from_a_directory),
        cmocka_unit_test(table_load_reports_no_matching_table_in_directory),
        cmocka_unit_test(table_load_refuses_several_matching_tables),
        cmocka_unit_test(knob_value_active_follows_each_knob_kind),
        cmocka_unit_test(dispatch_config_from_env_reads_each_knob),
        cmocka_unit_test(fuzz_table_seeds_reach_the_row_parser),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
