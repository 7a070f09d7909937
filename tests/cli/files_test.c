/* The file rule (src/tuning/file_write.c) and the journaled install
 * (src/tuning/tune_out.c), issue 26: a kill at every step of an install
 * (and of its roll back) leaves the old set or the new set and nothing else
 * after the next run; prune removes only files proven to be a superseded
 * table's; no output replaces a FIFO, a folder or its input; a newline in
 * a table's file name cannot forge a line of `table list`; a page's path
 * is never cut. Fast: the kill tests stop the install at step N through a
 * hook (st_file_kill_at_step), no tune per instant. */
#include "cli_util.h"

#include "file_write.h"
#include "out_manifest.h"
#include "strata/decode.h"
#include "strata/tools/report.h"
#include "strata/tools/tables.h"
#include "tools_internal.h"
#include "tune_out.h"

#include <cjson/cJSON.h>
#include <sys/file.h>

#define QUICK_S 30.0

/* The text of a table for this process with one mmvq row of ROWS, and
 * COMMENTS (may be NULL) as comment lines. */
static char *table_text(int rows, const char *const *comments, size_t *len)
{
    const st_identity id = cpu_identity();
    st_table *t = NULL;
    assert_int_equal(st_table_create(&id, &t), ST_OK);
    for (const char *const *c = comments; c && *c; c++) assert_int_equal(st_table_add_comment(t, *c), ST_OK);
    const st_mmvq_key k = {ST_Q8_0, 64, 64};
    assert_int_equal(st_table_add_mmvq(t, &k, rows), ST_OK);
    char *text = NULL;
    assert_int_equal(st_table_format(t, &text, len), ST_OK);
    st_table_destroy(t);
    return text;
}

static char *slurp(const char *path)
{
    char *b = NULL;
    size_t n = 0;
    if (st_read_file(path, &b, &n) != ST_OK) return NULL;
    return b;
}

/* ---- a kill at every step ---------------------------------------------------------- */

#define TABLE "strata-x-cpu.table"
#define JSON "strata-x.autotune.json"
#define HTML "strata-x.autotune.html"
#define MANIFEST "strata-x.autotune.manifest"

/* DIR/MF: a manifest listing TABLE, the reports R1 and R2 (may be NULL)
 * with the bytes they have now. */
static void manifest(const char *dir, const char *mf, const char *table, const char *r1, const char *r2)
{
    const char *names[3] = {table, r1, r2};
    const st_mf_role roles[3] = {ST_MF_TABLE, ST_MF_REPORT, ST_MF_PAGE};
    char *p = cli_join(dir, mf);
    assert_int_equal(st_manifest_write_files(dir, p, names, roles, r2 ? 3 : r1 ? 2 : 1), ST_OK);
    free(p);
}

/* The old set: a table, its report, its page and their manifest. */
static void old_set(const char *dir, const char *t_old, size_t tl)
{
    cli_rm_tree(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    free(cli_write(dir, TABLE, t_old, tl));
    free(cli_write(dir, JSON, "old json", 8));
    free(cli_write(dir, HTML, "old html", 8));
    manifest(dir, MANIFEST, TABLE, JSON, HTML);
}

/* Whether DIR's manifest lists the table, report and page with the bytes
 * they have now (the manifest moves with the set). */
static bool manifest_matches(const char *dir)
{
    char *p = cli_join(dir, MANIFEST), *text = slurp(p);
    free(p);
    st_manifest m;
    const bool ok = text && st_manifest_parse(text, strlen(text), &m) == ST_OK;
    free(text);
    if (!ok) return false;
    const char *names[3] = {TABLE, JSON, HTML};
    const st_mf_role roles[3] = {ST_MF_TABLE, ST_MF_REPORT, ST_MF_PAGE};
    for (int i = 0; i < 3; i++) {
        char *f = cli_join(dir, names[i]), *b = slurp(f), hex[ST_SHA256_HEX] = "";
        if (b) st_sha256_buf(b, strlen(b), hex);
        free(f);
        free(b);
        if (st_manifests_prove(&m, 1, roles[i], names[i], hex) != 0) return false;
    }
    return true;
}

/* "old" or "new" when DIR holds the whole old or new set, else fails. */
static const char *which_set(const char *dir, const char *t_old, const char *t_new, long step)
{
    char *p[3] = {cli_join(dir, TABLE), cli_join(dir, JSON), cli_join(dir, HTML)};
    char *v[3];
    for (int i = 0; i < 3; i++) v[i] = slurp(p[i]);
    const bool old = v[0] && v[1] && v[2] && !strcmp(v[0], t_old) && !strcmp(v[1], "old json") && !strcmp(v[2], "old html");
    const bool neu = v[0] && v[1] && v[2] && !strcmp(v[0], t_new) && !strcmp(v[1], "new json") && !strcmp(v[2], "new html");
    if (!old && !neu)
        fail_msg("killed at step %ld: a mixed set (table %s, json '%s', html '%s')", step,
                 !v[0] ? "missing" : !strcmp(v[0], t_old) ? "old" : !strcmp(v[0], t_new) ? "new" : "other", v[1] ? v[1] : "-",
                 v[2] ? v[2] : "-");
    for (int i = 0; i < 3; i++) {
        free(p[i]);
        free(v[i]);
    }
    if (!manifest_matches(dir)) fail_msg("killed at step %ld: the manifest does not list the %s set", step, old ? "old" : "new");
    return old ? "old" : "new";
}

/* What a run leaves that is not an output: must be nothing. */
static void no_litter(const char *dir, long step)
{
    const char *parts[] = {".tmp.", ".old.", ".candidate", ".strata-tune.journal", ".strata-tune-probe", ".strata-tune.lock"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (cli_count(dir, parts[i]) != 0) {
            cli_print_dir(dir);
            fail_msg("step %ld: '%s' left in the folder", step, parts[i]);
        }
    st_tables_index *ix = NULL;
    st_index_state state;
    assert_int_equal(st_tables_index_read(dir, &ix, &state), ST_OK);
    st_tables_index_free(ix);
    if (state == ST_INDEX_STALE || state == ST_INDEX_DAMAGED)
        fail_msg("step %ld: tables.json is %s", step, st_index_state_text(state));
}

/* Runs the install in a child killed at step STEP (or failing the
 * table's rename when FAIL); returns the child's wait status. */
static int install_child(const char *dir, const char *t_new, size_t tl, long step, bool fail)
{
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const st_identity id = cpu_identity();
        st_tune_out out;
        if (st_tune_out_open(&out, dir, "x", -1, &id, false, 4096) != ST_OK) _exit(10);
        st_file_steps = 0;
        st_file_kill_at_step = step;
        if (fail) st_file_fail_rename_of = ".table";
        const st_status s = st_tune_out_install(&out, &id, NULL, t_new, tl, "new json", 8, "new html", 8);
        st_file_kill_at_step = -1;
        st_tune_out_close(&out);
        _exit(fail ? (s != ST_OK && strstr(st_last_error(), "the old files are back") ? 0 : 12) : s == ST_OK ? 0 : 11);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static bool settle_by_prune;

static void collect_note(void *user, const char *line)
{
    char *buf = user;
    const size_t at = strlen(buf);
    snprintf(buf + at, 4096 - at, "%s\n", line);
}

/* The next run of the folder (open under the lock, close; or `table list
 * --prune`): completes or rolls back what the killed one left. */
static void next_run(const char *dir)
{
    const st_identity id = cpu_identity();
    if (settle_by_prune) {
        st_tables_index *ix = NULL;
        int removed = 0;
        if (st_tables_index_build(dir, &id, NULL, &ix) != ST_OK ||
            st_tables_prune(dir, &id, NULL, ix, NULL, NULL, &removed) != ST_OK)
            fail_msg("prune after a kill: %s", st_last_error());
        st_tables_index_free(ix);
        return;
    }
    st_tune_out out;
    if (st_tune_out_open(&out, dir, "x", -1, &id, false, 4096) != ST_OK) fail_msg("the next run: %s", st_last_error());
    st_tune_out_close(&out);
}

static void kill_at_every_step(bool fail)
{
    const char *dir = cli_dir();
    size_t lo = 0, ln = 0;
    const char *c_old[] = {"the old campaign", NULL}, *c_new[] = {"the new campaign", NULL};
    char *t_old = table_text(2, c_old, &lo), *t_new = table_text(4, c_new, &ln);
    long step = 1;
    int olds = 0, news = 0;
    for (;; step++) {
        assert_true(step < 200);
        old_set(dir, t_old, lo);
        const int st = install_child(dir, t_new, ln, step, fail);
        const bool killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
        if (!killed && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            fail_msg("step %ld: the install ended with status %d", step, st);
        next_run(dir);
        const char *set = which_set(dir, t_old, t_new, step);
        no_litter(dir, step);
        olds += !strcmp(set, "old");
        news += !strcmp(set, "new");
        if (!killed) { /* past the last step: the install's own outcome */
            assert_string_equal(set, fail ? "old" : "new");
            break;
        }
    }
    print_message("%s: %ld steps, each killed: %d left the old set, %d the new\n", fail ? "failing install" : "install",
                  step - 1, olds, news);
    assert_true(step > 15); /* temporary files, links, journal, renames, index: many instants */
    assert_true(olds > 0 && (fail || news > 0));
    free(t_old);
    free(t_new);
}

static void a_kill_at_any_step_leaves_the_old_or_the_new_set(void **state)
{
    (void)state;
    kill_at_every_step(false);
}

static void a_kill_during_a_roll_back_leaves_the_old_or_the_new_set(void **state)
{
    (void)state;
    kill_at_every_step(true);
}

/* ---- outputs never replace what is not a regular file, nor the input ---------------- */

static void report_never_replaces_a_fifo_a_folder_or_its_input(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *json = cli_write(dir, "r.json", "{}", 2);
    char *fifo = cli_fifo(dir, "f.html");
    char *folder = cli_join(dir, "d.html");
    assert_int_equal(mkdir(folder, 0755), 0);
    cli_run r = cli(QUICK_S, "report", json, "-o", fifo, NULL);
    cli_expect_one_line(&r, 1, "is a FIFO: not replaced", "report -o FIFO");
    cli_free(&r);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    r = cli(QUICK_S, "report", json, "-o", folder, NULL);
    cli_expect_one_line(&r, 1, "is a folder: not replaced", "report -o FOLDER");
    cli_free(&r);
    r = cli(QUICK_S, "report", json, "-o", json, NULL);
    cli_expect_one_line(&r, 1, "is the input", "report r.json -o r.json");
    cli_free(&r);
    char *again = slurp(json);
    assert_string_equal(again, "{}");
    free(again);
    /* another spelling of the input */
    char *dot = malloc(strlen(dir) + 16);
    sprintf(dot, "%s/./r.json", dir);
    r = cli(QUICK_S, "report", json, "-o", dot, NULL);
    cli_expect_one_line(&r, 1, "is the input", "report r.json -o ./r.json");
    cli_free(&r);
    /* bench --html and verify --html: refused before the run, in one line */
    r = cli(QUICK_S, "--backend", "cpu", "bench", "--shape", "mmvq q8_0 64 64", "--quick", "--no-suite", "--html", fifo, NULL);
    cli_expect_one_line(&r, 1, "is a FIFO: not replaced", "bench --html FIFO");
    cli_free(&r);
    size_t tl = 0;
    char *tt = table_text(2, NULL, &tl);
    char *table = cli_write(dir, "t.json", tt, tl); /* a table whose name is the page's JSON */
    char *tpage = cli_join(dir, "t.html");
    r = cli(QUICK_S, "--backend", "cpu", "verify", STRATA_TEST_DATA "/gguf/tiny-moe.gguf", table, "--html", tpage, NULL);
    cli_expect_one_line(&r, 1, "is the input", "verify MODEL t.json --html t.html");
    cli_free(&r);
    char *after = slurp(table);
    assert_string_equal(after, tt);
    free(after);
    free(tt);
    free(table);
    free(tpage);
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* still the FIFO after bench */
    assert_int_equal(cli_count(dir, ".tmp."), 0);
    free(dot);
    free(json);
    free(fifo);
    free(folder);
}

/* A folder (or FIFO) where the report, its page, tables.json or the
 * gate's candidate goes is refused when the tune opens its folder, before
 * the sweep, in one line naming it, and nothing is left. */
static void every_output_path_is_checked_before_the_sweep(void **state)
{
    (void)state;
    const char *names[] = {JSON, HTML, "tables.json", "strata-x-cpu.table.candidate", TABLE};
    const st_identity id = cpu_identity();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *dir = cli_dir();
        size_t tl = 0;
        char *t = table_text(2, NULL, &tl);
        if (i + 1 < sizeof names / sizeof names[0]) free(cli_write(dir, TABLE, t, tl)); /* this identity's table */
        free(t);
        char *p = cli_join(dir, names[i]);
        if (i + 1 == sizeof names / sizeof names[0]) { /* the new table's own name, with --force */
            st_tune_out o;
            assert_int_equal(st_tune_out_open(&o, dir, "x", -1, &id, true, 4096), ST_OK);
            free(p);
            p = strdup(o.table_path);
            st_tune_out_close(&o);
        }
        if (i % 2) assert_int_equal(mkfifo(p, 0644), 0);
        else assert_int_equal(mkdir(p, 0755), 0);
        st_tune_out out;
        const st_status s = st_tune_out_open(&out, dir, "x", -1, &id, i + 1 == sizeof names / sizeof names[0], 4096);
        if (s == ST_OK || !strstr(st_last_error(), strrchr(p, '/') + 1) || !strstr(st_last_error(), "not replaced"))
            fail_msg("%s: a %s there: %s", names[i], i % 2 ? "FIFO" : "folder", s == ST_OK ? "opened" : st_last_error());
        assert_int_equal(cli_count(dir, ".strata-tune"), 0); /* no lock, probe or journal left */
        free(p);
    }
}

/* A page's path that does not fit is "" (refused), never a cut path that
 * names another file. */
static void a_page_path_is_never_cut(void **state)
{
    (void)state;
    char out[32];
    st_report_html_path("/a/b/strata-model.autotune.json", out, sizeof out);
    assert_string_equal(out, "/a/b/strata-model.autotune.html");
    st_report_html_path("/a/b/c/strata-model.autotune.json", out, sizeof out);
    assert_string_equal(out, "");
    assert_int_not_equal(st_report_html_write("/a/b/c/strata-model.autotune.json", out), ST_OK);
}

/* ---- prune ---------------------------------------------------------------------------- */

/* DIR/NAME: a table for ID with a campaign's provenance (DATE, REPORT). */
static void prov_table(const char *dir, const char *name, const st_identity *id, const char *date, const char *report)
{
    st_table *t = NULL;
    assert_int_equal(st_table_create(id, &t), ST_OK);
    st_provenance p;
    memset(&p, 0, sizeof p);
    snprintf(p.date, sizeof p.date, "%s", date);
    snprintf(p.device, sizeof p.device, "%s", id->device_name);
    snprintf(p.model, sizeof p.model, "m");
    snprintf(p.report, sizeof p.report, "%s", report);
    assert_int_equal(st_provenance_to_table(t, &p), ST_OK);
    const st_mmvq_key k = {ST_Q8_0, 64, 64};
    assert_int_equal(st_table_add_mmvq(t, &k, 2), ST_OK);
    char *path = cli_join(dir, name);
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    free(path);
    st_table_destroy(t);
}

/* A superseded table whose report lines name a file outside the folder,
 * the table that engages, the lock and tables.json: prune removes the
 * table and nothing it names but what is proven its own; a superseded
 * table no manifest lists, or lists with other bytes, stays. */
static void prune_removes_only_what_is_proven_a_superseded_tables(void **state)
{
    (void)state;
    const char *top = cli_dir();
    char *dir = cli_join(top, "tables");
    assert_int_equal(mkdir(dir, 0755), 0);
    char *outside = cli_write(top, "precious", "mine", 4);
    const st_identity id = cpu_identity();
    /* the old campaign (superseded: an older date, same device and model) */
    st_identity old = id; /* an older build: another compiler token, so it does not engage */
    snprintf(old.compiler, sizeof old.compiler, "1111222233334444");
    prov_table(dir, "strata-old.table", &old, "2026-01-01T00:00:00Z", "../precious strata-new.table");
    prov_table(dir, "strata-old2.table", &old, "2026-01-01T00:00:00Z", "old.json old.html");
    prov_table(dir, "strata-old3.table", &old, "2026-01-01T00:00:00Z", ".strata-tune.lock tables.json");
    prov_table(dir, "strata-old4.table", &old, "2026-01-02T00:00:00Z", "");  /* no manifest lists it */
    prov_table(dir, "strata-old5.table", &old, "2026-01-03T00:00:00Z", "");  /* changed since its manifest */
    prov_table(dir, "strata-new.table", &id, "2026-06-01T00:00:00Z", "new.json");
    free(cli_write(dir, ".strata-tune.lock", "1\n", 2));
    char rep[256];
    snprintf(rep, sizeof rep, "{\"table\": {\"path\": \"%s/strata-old2.table\"}}", dir);
    free(cli_write(dir, "old.json", rep, strlen(rep)));
    free(cli_write(dir, "old.html", "<p>", 3));
    manifest(dir, "a.manifest", "strata-old.table", NULL, NULL);
    manifest(dir, "b.manifest", "strata-old2.table", "old.json", "old.html");
    manifest(dir, "c.manifest", "strata-old3.table", NULL, NULL);
    manifest(dir, "e.manifest", "strata-old5.table", NULL, NULL);
    manifest(dir, "n.manifest", "strata-new.table", NULL, NULL);
    {   /* old5 changes after its run wrote the manifest: no longer proven ours */
        char *p = cli_join(dir, "strata-old5.table");
        FILE *f = fopen(p, "a");
        fputs("# edited by hand\n", f);
        fclose(f);
        free(p);
    }
    /* a manifest naming what is not ours is a name like any other: never
     * outside the folder, never the lock (it does not parse: skipped) */
    const char *evil = "strata-tune manifest 1\ntable\t-\t../precious\n";
    free(cli_write(dir, "evil.manifest", evil, strlen(evil)));
    st_tables_index *ix = NULL;
    assert_int_equal(st_tables_index_build(dir, &id, NULL, &ix), ST_OK);
    int superseded = 0;
    for (int i = 0; i < ix->n; i++) superseded += ix->e[i].status == ST_TSTATUS_SUPERSEDED;
    if (superseded != 5 || strcmp(ix->engages, "strata-new.table"))
        fail_msg("the folder is not as the test means it: %d superseded, engages '%s' (%s)", superseded, ix->engages,
                 ix->dir_line);
    /* a folder another process has locked is refused at once, nothing removed */
    int removed = 0;
    char *lock = cli_join(dir, ".strata-tune.lock");
    const int lfd = open(lock, O_RDWR);
    assert_true(lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) == 0);
    const pid_t pid = fork();
    if (pid == 0) _exit(st_tables_prune(dir, &id, NULL, ix, NULL, NULL, &removed) == ST_ERR_EXISTS &&
                        strstr(st_last_error(), "another tune is writing") ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    close(lfd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("prune of a locked folder was not refused");
    char *o2 = cli_join(dir, "strata-old2.table");
    assert_true(cli_exists(o2));
    char notes[4096] = "";
    assert_int_equal(st_tables_prune(dir, &id, NULL, ix, collect_note, notes, &removed), ST_OK);
    st_tables_index_free(ix);
    assert_true(cli_exists(outside));
    char *keep[] = {"strata-new.table", "tables.json", "strata-old4.table", "strata-old5.table", "n.manifest",
                    "e.manifest", "evil.manifest"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        char *p = cli_join(dir, keep[i]);
        if (!cli_exists(p)) fail_msg("prune removed %s:\n%s", keep[i], notes);
        free(p);
    }
    assert_false(cli_exists(lock)); /* a lock file left by a dead tune: prune took it and removed it, as a tune does */
    /* the three superseded tables proven ours go, and the report proven
     * old2's (its JSON says so, the manifest has its bytes; its page beside
     * it), and the manifests that prove nothing any more */
    const char *gone[] = {"strata-old.table", "strata-old2.table", "strata-old3.table", "old.json", "old.html",
                          "a.manifest", "b.manifest", "c.manifest"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        char *p = cli_join(dir, gone[i]);
        if (cli_exists(p)) fail_msg("prune kept %s:\n%s", gone[i], notes);
        free(p);
    }
    assert_int_equal(removed, 3);
    if (!strstr(notes, "kept strata-old4.table: no manifest of this folder lists it") ||
        !strstr(notes, "kept strata-old5.table: no manifest of this folder lists it"))
        fail_msg("the kept lines:\n%s", notes);
    free(o2);
    free(lock);
    free(outside);
    free(dir);
}

/* Prune settles the folder under its lock first: killed at any step of an
 * install, the folder prune leaves holds the old set or the new one, with
 * no journal, link or temporary file. */
static void prune_settles_an_interrupted_install_first(void **state)
{
    (void)state;
    settle_by_prune = true;
    kill_at_every_step(false);
    settle_by_prune = false;
}

/* ---- table list ------------------------------------------------------------------------ */

static void a_newline_in_a_file_name_cannot_forge_a_line(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    size_t l = 0;
    char *t = table_text(2, NULL, &l);
    free(cli_write(dir, "a\nengages here: forged.table", t, l));
    cli_run r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    cli_expect_exit(&r, 0, "table list");
    for (const char *line = r.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, "engages here: forged", 20)) fail_msg("a forged line:\n%s", r.out);
    assert_non_null(strstr(r.out, "a\\x0aengages here: forged.table"));
    cli_free(&r);
    free(t);
}

/* ---- issue 26, the red-team pass ------------------------------------------------------ */

/* A pid that is gone (a child that exited and was reaped). */
static long dead_pid(void)
{
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return (long)pid;
}

/* An input named like a dead run's temporary file of the page a command
 * writes is an input, not litter: `report X -o page.html` with X named
 * "page.html.tmp.<dead pid>.1" keeps X (2026-12-06: the write's sweep of
 * dead temporaries removed it). */
static void report_keeps_an_input_named_like_its_pages_temporary_file(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *page = cli_join(dir, "b.html"), *bj = cli_join(dir, "b.json");
    cli_run r = cli(QUICK_S, "--backend", "cpu", "-q", "bench", "--quick", "--no-suite", "--shape", "mmvq q8_0 64 64",
                    "--html", page, NULL);
    cli_expect_exit(&r, 0, "bench --html");
    cli_free(&r);
    char name[128];
    snprintf(name, sizeof name, "p.html.tmp.%ld.1", dead_pid());
    char *in = cli_join(dir, name), *out = cli_join(dir, "p.html");
    assert_int_equal(rename(bj, in), 0);
    char *before = slurp(in);
    assert_non_null(before);
    r = cli(QUICK_S, "-q", "report", in, "-o", out, NULL);
    cli_expect_exit(&r, 0, "report p.html.tmp.<dead>.1 -o p.html");
    cli_free(&r);
    char *after = slurp(in);
    if (!after || strcmp(after, before)) fail_msg("report removed or changed its input %s", name);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    free(after);
    free(before);
    free(in);
    free(out);
    free(page);
    free(bj);
}

/* A tune's report set is named after the model, not the device: when the
 * manifest there lists a table for another device that is still in the
 * folder, the tune is refused before the sweep and the other device's
 * table, report, page and manifest stay as they are (2026-12-06: a CPU
 * tune replaced a gfx1100 table's report set). */
static void another_devices_report_set_is_refused(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    st_identity other = cpu_identity();
    snprintf(other.arch, sizeof other.arch, "gfx1100");
    prov_table(dir, "strata-tune-tiny-moe-tests-gfx1100.table", &other, "2026-06-01T00:00:00Z",
               "strata-tune-tiny-moe-tests.autotune.json");
    free(cli_write(dir, "strata-tune-tiny-moe-tests.autotune.json", "theirs json", 11));
    free(cli_write(dir, "strata-tune-tiny-moe-tests.autotune.html", "theirs html", 11));
    manifest(dir, "strata-tune-tiny-moe-tests.autotune.manifest", "strata-tune-tiny-moe-tests-gfx1100.table",
             "strata-tune-tiny-moe-tests.autotune.json", "strata-tune-tiny-moe-tests.autotune.html");
    cli_run r = cli(600.0, "--backend", "cpu", "tune", STRATA_TEST_DATA "/gguf/tiny-moe.gguf", "--shapes", "mmvq",
                    "--ntok-mix", "1", "--quick", "--no-verify", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, "(another device)", "a tune beside another device's report set");
    cli_free(&r);
    char *p = cli_join(dir, "strata-tune-tiny-moe-tests.autotune.json"), *v = slurp(p);
    assert_non_null(v);
    assert_string_equal(v, "theirs json");
    free(v);
    free(p);
    if (cli_count(dir, NULL) != 4) {
        cli_print_dir(dir);
        fail_msg("the folder changed");
    }
}

/* A re-tune after a runtime upgrade: the table's name carries the runtime
 * version, the report set's only the model, so the new run's manifest
 * replaces the one that proved the old table. It carries that table over
 * (still there with the bytes listed), and `table list --prune` removes it
 * as superseded, keeping the new set whole (2026-12-06: the old table was
 * kept forever, "no manifest of this folder lists it"). */
static void prune_after_a_runtime_upgrade_removes_the_old_table(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const char *stem = "strata-tune-tiny-moe-tests";
    char cur[160], old[160], mf[160], json[160], html[160];
    snprintf(cur, sizeof cur, "%s-cpu-%s.table", stem, st_version());
    snprintf(old, sizeof old, "%s-cpu-0.0.1.table", stem);
    snprintf(mf, sizeof mf, "%s.autotune.manifest", stem);
    snprintf(json, sizeof json, "%s.autotune.json", stem);
    snprintf(html, sizeof html, "%s.autotune.html", stem);
    for (int run = 0; run < 2; run++) {
        cli_run r = cli(600.0, "--backend", "cpu", "tune", STRATA_TEST_DATA "/gguf/tiny-moe.gguf", "--shapes", "mmvq",
                        "--ntok-mix", "1", "--quick", "--no-verify", "--out", dir, NULL);
        cli_expect_exit(&r, 0, run ? "the tune after the upgrade" : "the first tune");
        cli_free(&r);
        if (run) break;
        /* what the runtime 0.0.1 left: its table (its header's version,
         * its name) and the manifest of its set */
        char *pc = cli_join(dir, cur), *t = slurp(pc);
        assert_non_null(t);
        char *sp = strchr(t, ' '), *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
        assert_true(sp2 && !strncmp(sp + 1, st_version(), (size_t)(sp2 - sp - 1)));
        char *t_old = malloc(strlen(t) + 16);
        sprintf(t_old, "%.*s 0.0.1%s", (int)(sp - t), t, sp2);
        free(cli_write(dir, old, t_old, strlen(t_old)));
        assert_int_equal(unlink(pc), 0);
        manifest(dir, mf, old, json, html);
        free(t_old);
        free(t);
        free(pc);
    }
    /* the new run's manifest proves both tables */
    char *pm = cli_join(dir, mf), *text = slurp(pm);
    st_manifest m;
    assert_true(text && st_manifest_parse(text, strlen(text), &m) == ST_OK);
    int tables = 0;
    for (int k = 0; k < m.n; k++) tables += m.e[k].role == ST_MF_TABLE && (!strcmp(m.e[k].name, cur) || !strcmp(m.e[k].name, old));
    if (tables != 2) fail_msg("the new manifest does not carry the old table:\n%s", text);
    free(text);
    cli_run r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, "--prune", NULL);
    char want[400];
    snprintf(want, sizeof want, "removed %s (superseded by %s)", old, cur);
    cli_expect_exit(&r, 0, "table list --prune");
    if (!strstr(r.out, want)) fail_msg("table list --prune:\n%s%s", r.out, r.err);
    cli_free(&r);
    char *po = cli_join(dir, old);
    assert_false(cli_exists(po));
    const char *keep[] = {cur, json, html, mf, "tables.json"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        char *p = cli_join(dir, keep[i]);
        if (!cli_exists(p)) fail_msg("prune removed %s of the new set", keep[i]);
        free(p);
    }
    free(po);
    free(pm);
}

/* `table list` with a folder path longer than its buffer: one line, never
 * a listing of the cut path (2026-12-06: it listed the path cut at 4095
 * bytes). */
static void table_list_refuses_a_path_it_would_cut(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const size_t n = strlen(dir) + 2 * 2100 + 16;
    char *p = malloc(n);
    assert_non_null(p);
    size_t at = (size_t)snprintf(p, n, "%s", dir);
    for (int i = 0; i < 2100; i++) at += (size_t)snprintf(p + at, n - at, "/.");
    cli_run r = cli(QUICK_S, "table", "list", p, NULL);
    cli_expect_one_line(&r, 1, "more than the 4095 a path may have here", "table list with a 4.2 KB path");
    cli_free(&r);
    free(p);
}

/* A dispatch knob (STRATA_EXPERT_V2=1) stops every table from engaging
 * while it is set: prune must not take this build's table for superseded
 * by another build's newer table and remove it with its report, page and
 * manifest. Engagement for prune is judged without knobs. */
static void prune_with_a_knob_set_keeps_the_table_that_engages(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const st_identity id = cpu_identity();
    st_identity other = id;
    snprintf(other.compiler, sizeof other.compiler, "1111222233334444");
    prov_table(dir, "strata-real.table", &id, "2026-06-01T00:00:00Z", "real.json real.html");
    prov_table(dir, "strata-other.table", &other, "2099-01-01T00:00:00Z", "");
    char rep[256];
    snprintf(rep, sizeof rep, "{\"table\": {\"path\": \"%s/strata-real.table\"}}", dir);
    free(cli_write(dir, "real.json", rep, strlen(rep)));
    free(cli_write(dir, "real.html", "<p>", 3));
    manifest(dir, "real.manifest", "strata-real.table", "real.json", "real.html");
    manifest(dir, "other.manifest", "strata-other.table", NULL, NULL);
    st_dispatch_config knob;
    st_dispatch_config_default(&knob);
    knob.active[ST_KNOB_EXPERT_V2] = true;
    st_tables_index *ix = NULL;
    assert_int_equal(st_tables_index_build(dir, &id, &knob, &ix), ST_OK);
    int removed = 0;
    char notes[4096] = "";
    assert_int_equal(st_tables_prune(dir, &id, &knob, ix, collect_note, notes, &removed), ST_OK);
    st_tables_index_free(ix);
    const char *keep[] = {"strata-real.table", "real.json", "real.html", "real.manifest"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        char *p = cli_join(dir, keep[i]);
        if (!cli_exists(p)) fail_msg("prune with STRATA_EXPERT_V2 set removed %s:\n%s", keep[i], notes);
        free(p);
    }
    assert_int_equal(removed, 0);
    if (!strstr(notes, "kept strata-real.table: it engages in this build without dispatch knobs (STRATA_EXPERT_V2"))
        fail_msg("the kept line:\n%s", notes);
    /* and through the CLI, as the user runs it */
    char *argv[] = {"--backend", "cpu", "table", "list", (char *)dir, "--prune", NULL};
    setenv("STRATA_EXPERT_V2", "1", 1);
    cli_run r = cli_exec(argv, QUICK_S, NULL, NULL);
    unsetenv("STRATA_EXPERT_V2");
    char *real = cli_join(dir, "strata-real.table");
    if (!cli_exists(real)) fail_msg("table list --prune with STRATA_EXPERT_V2=1 removed the table:\n%s%s", r.out, r.err);
    if (!strstr(r.out, "prune: nothing removed (1 superseded table kept"))
        fail_msg("the summary says nothing of the kept table:\n%s", r.out);
    free(real);
    cli_free(&r);
}

/* The index is part of the install: when tables.json cannot be written
 * (a full disk) the table, report, page and manifest are rolled back, so
 * "not installed" is true, and nothing is left. */
static void a_failed_index_write_rolls_the_set_back(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    size_t lo = 0, ln = 0;
    const char *c_old[] = {"the old campaign", NULL}, *c_new[] = {"the new campaign", NULL};
    char *t_old = table_text(2, c_old, &lo), *t_new = table_text(4, c_new, &ln);
    old_set(dir, t_old, lo);
    const st_identity id = cpu_identity();
    st_tune_out out;
    assert_int_equal(st_tune_out_open(&out, dir, "x", -1, &id, false, 4096), ST_OK);
    st_file_fail_rename_of = "tables.json";
    const st_status s = st_tune_out_install(&out, &id, NULL, t_new, ln, "new json", 8, "new html", 8);
    st_file_fail_rename_of = NULL;
    st_tune_out_close(&out);
    if (s == ST_OK || !strstr(st_last_error(), "the old files are back"))
        fail_msg("the install with tables.json failing: %s", s == ST_OK ? "installed" : st_last_error());
    assert_string_equal(which_set(dir, t_old, t_new, 0), "old");
    no_litter(dir, 0);
    free(t_old);
    free(t_new);
}

/* The sweep of a dead run's litter removes only what the tool made for
 * its own outputs: never a user's file that merely has the pattern. */
static void the_sweep_removes_only_our_litter(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const long pid = dead_pid();
    size_t tl = 0;
    char *t = table_text(2, NULL, &tl);
    char name[256];
    const char *users[] = {"important.table.candidate", "important.json.tmp.%ld.1", "notes.html.old.%ld",
                           "mine.table.candidate"};
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
        snprintf(name, sizeof name, users[i], pid);
        free(cli_write(dir, name, i == 3 ? "not a table" : "user data", i == 3 ? 11 : 9));
    }
    free(cli_write(dir, "mine.table", "user data", 9)); /* not a table: mine.table.candidate is not ours */
    snprintf(name, sizeof name, "strata-x.autotune.json.tmp.%ld.1", pid);
    free(cli_write(dir, name, "ours", 4));
    snprintf(name, sizeof name, "strata-x.autotune.json.tmp.%ld.2", (long)getppid()); /* alive (the test's parent) */
    free(cli_write(dir, name, "alive", 5));
    /* this process's own pid: an earlier process's that had the same pid
     * (pids repeat from run to run in a container), since a settling runs
     * under the lock before the run made any file: litter */
    snprintf(name, sizeof name, "strata-x.autotune.json.tmp.%ld.3", (long)getpid());
    free(cli_write(dir, name, "same pid", 8));
    free(cli_write(dir, TABLE ".candidate", t, tl)); /* the gate's candidate beside our table */
    const st_identity id = cpu_identity();
    int done = 0;
    assert_int_equal(st_tune_out_recover(NULL, dir, &id, NULL, &done), ST_OK);
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
        snprintf(name, sizeof name, users[i], pid);
        char *p = cli_join(dir, name);
        if (!cli_exists(p)) fail_msg("the sweep removed the user's %s", name);
        free(p);
    }
    snprintf(name, sizeof name, "strata-x.autotune.json.tmp.%ld.2", (long)getppid());
    char *alive = cli_join(dir, name);
    assert_true(cli_exists(alive));
    free(alive);
    assert_int_equal(done, 3);
    assert_int_equal(cli_count(dir, "strata-x"), 1);
    free(t);
}

/* The lock file is ours only when it is a regular file with one link: a
 * hard link to a file elsewhere is never written through or removed, a
 * FIFO is never used or removed; each is refused in one line. */
static void the_lock_is_never_a_link_or_a_fifo(void **state)
{
    (void)state;
    const char *top = cli_dir();
    char *dir = cli_join(top, "out");
    assert_int_equal(mkdir(dir, 0755), 0);
    char *outside = cli_write(top, "precious", "keep me\n", 8);
    char *lock = cli_join(dir, ".strata-tune.lock");
    assert_int_equal(link(outside, lock), 0);
    const st_identity id = cpu_identity();
    st_tune_out out;
    st_status s = st_tune_out_open(&out, dir, "x", -1, &id, false, 4096);
    if (s == ST_OK || !strstr(st_last_error(), "another hard link")) fail_msg("a hard-linked lock: %s", s == ST_OK ? "used" : st_last_error());
    char *v = slurp(outside);
    assert_string_equal(v, "keep me\n");
    free(v);
    assert_true(cli_exists(lock));
    st_folder_lock_t lk;
    assert_int_not_equal(st_folder_lock(dir, "prune", &lk), ST_OK);
    assert_true(cli_exists(lock));
    unlink(lock);
    assert_int_equal(mkfifo(lock, 0644), 0);
    s = st_tune_out_open(&out, dir, "x", -1, &id, false, 4096);
    if (s == ST_OK || !strstr(st_last_error(), "a FIFO")) fail_msg("a FIFO lock: %s", s == ST_OK ? "used" : st_last_error());
    struct stat st;
    assert_int_equal(lstat(lock, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    /* through the CLI: one line, nothing changed */
    cli_run r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, "--prune", NULL);
    cli_expect_one_line(&r, 1, "not a lock file this tool wrote", "table list --prune with a FIFO lock");
    cli_free(&r);
    assert_int_equal(lstat(lock, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    free(lock);
    free(outside);
    free(dir);
}

/* A journal this tool did not write (planted, or from another run) is
 * refused in one line and the folder is left as it is: a 'back' line
 * never removes a table it does not prove the run wrote, a 'forward' line
 * never renames over a FIFO, a temporary file of a live process is never
 * taken. */
static void a_planted_journal_is_refused_and_changes_nothing(void **state)
{
    (void)state;
    const st_identity id = cpu_identity();
    size_t tl = 0;
    char *t = table_text(2, NULL, &tl);
    const long pid = dead_pid();
    char hex[ST_SHA256_HEX];
    st_sha256_buf("new json", 8, hex);
    for (int k = 0; k < 4; k++) {
        const char *dir = cli_dir();
        free(cli_write(dir, TABLE, t, tl));
        free(cli_write(dir, JSON, "old json", 8));
        char *fifo = cli_join(dir, "strata-y.autotune.json");
        assert_int_equal(mkfifo(fifo, 0644), 0);
        char tmp[128], j[1024];
        snprintf(tmp, sizeof tmp, JSON ".tmp.%ld.1", k == 3 ? (long)getppid() : pid);
        free(cli_write(dir, tmp, "new json", 8));
        snprintf(tmp, sizeof tmp, "strata-y.autotune.json.tmp.%ld.1", pid);
        free(cli_write(dir, tmp, "new json", 8));
        if (k == 0) /* the old form: a 'back' line, nothing stood there: removes the table */
            snprintf(j, sizeof j, "strata-tune journal 1 back\n" TABLE ".tmp.%ld.1\t" TABLE "\t-\n", pid);
        else if (k == 1) /* the same with a hash: the table does not hold those bytes */
            snprintf(j, sizeof j, "strata-tune journal 1 back\n" TABLE ".tmp.%ld.1\t" TABLE "\t-\t%s\n", pid, hex);
        else if (k == 2) /* forward over a FIFO */
            snprintf(j, sizeof j, "strata-tune journal 1 forward\n%s\tstrata-y.autotune.json\t-\t%s\n", tmp, hex);
        else /* a live process's temporary file */
            snprintf(j, sizeof j, "strata-tune journal 1 forward\n" JSON ".tmp.%ld.1\t" JSON "\t-\t%s\n", (long)getppid(), hex);
        free(cli_write(dir, ".strata-tune.journal", j, strlen(j)));
        const int before = cli_count(dir, NULL);
        st_tune_out out;
        const st_status s = st_tune_out_open(&out, dir, "x", -1, &id, false, 4096);
        if (s == ST_OK) fail_msg("journal %d: settled, not refused", k);
        if (strchr(st_last_error(), '\n') || !strstr(st_last_error(), ".strata-tune.journal"))
            fail_msg("journal %d: %s", k, st_last_error());
        if (cli_count(dir, NULL) != before) {
            cli_print_dir(dir);
            fail_msg("journal %d: the folder changed", k);
        }
        char *tp = cli_join(dir, TABLE), *v = slurp(tp);
        if (!v || strcmp(v, t)) fail_msg("journal %d: the table changed", k);
        free(v);
        free(tp);
        struct stat st;
        assert_int_equal(lstat(fifo, &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
        free(fifo);
    }
    free(t);
}

/* The folder's name from the command line is escaped in table list's
 * first line like every other name: a newline in it cannot forge a line. */
static void table_list_escapes_its_folder(void **state)
{
    (void)state;
    const char *top = cli_dir();
    char *dir = cli_join(top, "t\nengages here: forged");
    assert_int_equal(mkdir(dir, 0755), 0);
    size_t l = 0;
    char *t = table_text(2, NULL, &l);
    free(cli_write(dir, "a.table", t, l));
    cli_run r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    cli_expect_exit(&r, 0, "table list");
    for (const char *line = r.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, "engages here: forged", 20)) fail_msg("a forged line:\n%s", r.out);
    const char *nl = strchr(r.out, '\n');
    if (!nl || !strstr(r.out, "t\\x0aengages here: forged/tables.json") || strstr(r.out, "tables.json") > nl)
        fail_msg("the first line:\n%s", r.out);
    cli_free(&r);
    free(t);
    free(dir);
}

#define MODEL STRATA_TEST_DATA "/gguf/tiny-moe.gguf"

/* The model given to tune is never one of its outputs, whatever its name:
 * a model inside --out under the report's name (or the lock's, or the
 * manifest's) is refused in one line before the folder changes, and stays
 * as it was. */
static void the_model_is_never_an_output(void **state)
{
    (void)state;
    const char *names[] = {"strata-tune-tiny-moe-tests.autotune.json", ".strata-tune.lock",
                           "strata-tune-tiny-moe-tests.autotune.manifest"};
    char *model = NULL;
    size_t ml = 0;
    assert_int_equal(st_read_file(MODEL, &model, &ml), ST_OK);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *dir = cli_dir();
        char *copy = cli_write(dir, names[i], model, ml);
        cli_run r = cli(600.0, "--backend", "cpu", "tune", copy, "--ntok-mix", "1", "--quick", "--no-verify", "--out", dir,
                        NULL);
        cli_expect_one_line(&r, 1, "is the input", names[i]);
        cli_free(&r);
        char *after = NULL;
        size_t l = 0;
        assert_int_equal(st_read_file(copy, &after, &l), ST_OK);
        if (l != ml || memcmp(after, model, ml)) fail_msg("%s: the model was changed", names[i]);
        free(after);
        if (cli_count(dir, NULL) != 1) { /* nothing else written */
            cli_print_dir(dir);
            fail_msg("%s: files were written beside the model", names[i]);
        }
        free(copy);
    }
    free(model);
}

/* The input model is never the gate's candidate of a table this folder
 * already holds under another name, and never litter the settling sweeps,
 * whatever its name: refused, or left as it is. A user's own file where
 * the candidate goes is refused too, before the folder changes. */
static void the_input_is_never_a_candidate_or_litter(void **state)
{
    (void)state;
    char *model = NULL;
    size_t ml = 0, tl = 0;
    assert_int_equal(st_read_file(MODEL, &model, &ml), ST_OK);
    char *t = table_text(2, NULL, &tl);
    for (int k = 0; k < 2; k++) {
        const char *dir = cli_dir();
        free(cli_write(dir, "mine.table", t, tl)); /* this process's table, under a name of the user's */
        char *cand = cli_write(dir, "mine.table.candidate", k ? "user data" : model, k ? 9 : ml);
        cli_run r = cli(600.0, "--backend", "cpu", "tune", k ? MODEL : cand, "--shapes", "mmvq", "--ntok-mix", "1",
                        "--quick", "--out", dir, NULL);
        cli_expect_one_line(&r, 1, k ? "is not a gate candidate this tool left" : "is the input", "the candidate");
        cli_free(&r);
        char *after = slurp(cand);
        if (!after || memcmp(after, k ? "user data" : model, k ? 9 : ml)) fail_msg("case %d: the candidate's file changed", k);
        free(after);
        if (cli_count(dir, NULL) != 2) {
            cli_print_dir(dir);
            fail_msg("case %d: the folder changed", k);
        }
        free(cand);
    }
    /* named like a dead run's temporary file, link or probe: not swept */
    const long pid = dead_pid();
    const char *names[] = {"strata-x.autotune.json.tmp.%ld.1", "strata-x.autotune.json.old.%ld", ".strata-tune-probe.%ld",
                           /* the temporary file of this run's own report (the write's sweep of
                            * its dead temporaries, 2026-12-06: removed the model) */
                           "strata-tune-tiny-moe-tests.autotune.json.tmp.%ld.1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *dir = cli_dir();
        char name[128];
        snprintf(name, sizeof name, names[i], pid);
        char *copy = cli_write(dir, name, model, ml);
        cli_run r = cli(600.0, "--backend", "cpu", "-q", "tune", copy, "--shapes", "mmvq", "--ntok-mix", "1", "--quick",
                        "--no-verify", "--out", dir, NULL);
        cli_expect_exit(&r, 0, name); /* the run went through the settling and the install */
        char *after = slurp(copy);
        if (!after || memcmp(after, model, ml)) fail_msg("%s: the model was removed or changed (status %d): %s", name, r.status, r.err);
        free(after);
        cli_free(&r);
        free(copy);
    }
    free(t);
    free(model);
}

/* A symbolic link where an output goes is refused before the run (it
 * would be neither followed nor replaced: a roll back keeps the old file
 * by a hard link, which would make a second link, not a copy). */
static void a_symbolic_link_at_an_output_is_refused(void **state)
{
    (void)state;
    const char *dir = cli_dir(), *outside = cli_dir();
    char *target = cli_write(outside, "o.json", "theirs", 6);
    char *link = cli_join(dir, "strata-tune-tiny-moe-tests.autotune.json");
    assert_int_equal(symlink(target, link), 0);
    cli_run r = cli(600.0, "--backend", "cpu", "tune", MODEL, "--shapes", "mmvq", "--ntok-mix", "1", "--quick",
                    "--no-verify", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, "is a symbolic link: not replaced", "a link at the report");
    cli_free(&r);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    char *v = slurp(target);
    assert_non_null(v);
    assert_string_equal(v, "theirs");
    free(v);
    if (cli_count(dir, NULL) != 1) {
        cli_print_dir(dir);
        fail_msg("files were written beside the link");
    }
    /* a link at the journal (even one to nothing): refused before the
     * sweep, and left as it is (2026-12-06: the failed install removed it) */
    {
        const char *jd = cli_dir();
        char *jl = cli_join(jd, ".strata-tune.journal");
        assert_int_equal(symlink("../nonexistent", jl), 0);
        cli_run j = cli(600.0, "--backend", "cpu", "tune", MODEL, "--shapes", "mmvq", "--ntok-mix", "1", "--quick",
                        "--no-verify", "--out", jd, NULL);
        cli_expect_one_line(&j, 1, "is a symbolic link, not a journal this tool wrote", "a link at the journal");
        cli_free(&j);
        assert_int_equal(lstat(jl, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        if (cli_count(jd, NULL) != 1) {
            cli_print_dir(jd);
            fail_msg("files were written beside the journal's link");
        }
        free(jl);
    }
    /* report -o onto a link: the same, before the JSON is read */
    char *page = cli_join(dir, "page.html");
    assert_int_equal(symlink(target, page), 0);
    char *json = cli_write(dir, "r.json", "{}", 2);
    r = cli(QUICK_S, "report", json, "-o", page, NULL);
    cli_expect_one_line(&r, 1, "is a symbolic link: not replaced", "report -o onto a link");
    cli_free(&r);
    free(json);
    assert_int_equal(lstat(page, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    free(page);
    free(link);
    free(target);
}

/* A table of this process whose name has a control byte is refused before
 * the sweep (the run could not name it in its manifest), in one line that
 * shows the byte escaped; coverage shows such names escaped too. */
static void a_table_name_with_a_control_byte_is_refused_first(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    size_t tl = 0;
    char *t = table_text(2, NULL, &tl);
    free(cli_write(dir, "my\ntable.table", t, tl));
    cli_run r = cli(600.0, "--backend", "cpu", "tune", MODEL, "--shapes", "mmvq", "--ntok-mix", "1", "--quick",
                    "--no-verify", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, "has a name this tool does not write", "a newline in the table's name");
    if (strstr(r.out, "tuned")) fail_msg("the sweep ran before the refusal: %s", r.out);
    cli_free(&r);
    if (cli_count(dir, NULL) != 1) {
        cli_print_dir(dir);
        fail_msg("the folder changed");
    }
    /* coverage names the file in one line */
    char *odd = cli_write(dir, "x\n\x1b[2Jy.table", "not a table", 11);
    r = cli(QUICK_S, "--backend", "cpu", "coverage", MODEL, odd, NULL);
    cli_expect_one_line(&r, 1, "coverage", "coverage of a non-table with a newline in its name");
    if (strchr(r.err, 0x1b)) fail_msg("coverage printed a raw escape byte");
    cli_free(&r);
    free(odd);
    free(t);
}

/* The reservation counts whole blocks per file: a 100 KiB tmpfs used to
 * pass the probe, run the sweep, then fail at the journal with a line
 * naming a report that was never written. Now: refused before the sweep,
 * or installed; never a report line for a file that is not there. Root
 * only (a tmpfs). */
static void the_reservation_counts_whole_blocks(void **state)
{
    (void)state;
    for (int kib = 96; kib <= 112; kib += 4) {
        const char *dir = cli_dir();
        if (!cli_tmpfs(dir, (size_t)kib << 10, false)) {
            print_message("no tmpfs here: not tested\n");
            return;
        }
        cli_run r = cli(600.0, "--backend", "cpu", "tune", MODEL, "--shapes", "expert", "--quick", "--no-verify", "--out",
                        dir, NULL);
        if (r.status == 0) {
            char *p = cli_join(dir, "strata-tune-tiny-moe-tests.autotune.json");
            if (!cli_exists(p)) fail_msg("%d KiB: installed without its report", kib);
            free(p);
        } else {
            if (strstr(r.out, "tuned")) fail_msg("%d KiB: failed after the sweep: %s%s", kib, r.out, r.err);
            if (!strstr(r.err, "probe")) fail_msg("%d KiB: not refused by the reservation: %s", kib, r.err);
            if (cli_count(dir, NULL) != 0) {
                cli_print_dir(dir);
                fail_msg("%d KiB: files left", kib);
            }
        }
        cli_free(&r);
    }
}

/* The reservation counts what tables.json takes: it is rewritten beside
 * itself, so a folder holding a large index and too little room for its
 * new copy is refused before the sweep (it used to reserve a fixed 32 KiB,
 * rename the set in, then fail on tables.json). Root only (a tmpfs). */
static void the_reservation_counts_the_index(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    if (!cli_tmpfs(dir, 768 << 10, false)) {
        print_message("no tmpfs here: not tested\n");
        return;
    }
    const size_t n = 560 << 10;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    free(cli_write(dir, "tables.json", big, n));
    free(big);
    cli_run r = cli(600.0, "--backend", "cpu", "-q", "tune", "--shape", "mmvq q8_0 64 64", "--ntok-mix", "1", "--quick",
                    "--no-verify", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, strerror(ENOSPC), "tune beside a 560 KiB tables.json into 768 KiB");
    assert_non_null(strstr(r.err, "probe"));
    assert_int_equal(cli_count(dir, NULL), 1); /* the index, nothing else */
    cli_free(&r);
    cli_umount(dir);
}

/* The reservation counts what the folder's files make the outputs: the
 * table merged into (its new copy and the gate's candidate beside it) and
 * an index where none stands (2026-12-06: beside a table of 6000 rows and
 * no tables.json, the probe passed, the sweep ran and the install failed
 * for room, leaving a new tables.json). Refused before the sweep; the
 * folder stays as it was. */
static void the_reservation_counts_the_merged_table_and_a_new_index(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    if (!cli_tmpfs(dir, 400 << 10, false)) {
        print_message("no tmpfs here: not tested\n");
        return;
    }
    const st_identity id = cpu_identity();
    st_table *t = NULL;
    assert_int_equal(st_table_create(&id, &t), ST_OK);
    for (int i = 0; i < 6000; i++) {
        const st_mmvq_key k = {ST_Q8_0, 32 * (i + 1), 64};
        assert_int_equal(st_table_add_mmvq(t, &k, 2), ST_OK);
    }
    char *path = cli_join(dir, "mine.table");
    assert_int_equal(st_table_write_atomic(t, path), ST_OK);
    st_table_destroy(t);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > (100 << 10)); /* the merge's two copies alone take more than the room left */
    cli_run r = cli(600.0, "--backend", "cpu", "-q", "tune", "--shape", "mmvq q8_0 64 64", "--ntok-mix", "1", "--quick",
                    "--no-verify", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, strerror(ENOSPC), "tune beside a 6000-row table, no index, into 400 KiB");
    assert_non_null(strstr(r.err, "probe"));
    if (cli_count(dir, NULL) != 1) { /* the table, nothing else */
        cli_print_dir(dir);
        fail_msg("the folder changed");
    }
    cli_free(&r);
    free(path);
    cli_umount(dir);
}

/* A report's JSON and its page are one pair: when the page cannot be
 * written (a full disk: here the write hook fails every file past the
 * JSON's size), neither is left, nor a temporary file; an old pair stays
 * as it was. */
static void a_report_and_its_page_are_written_together(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const char *json = "{\"report\": \"verify\", \"steps\": []}";
    char *page = cli_join(dir, "p.html"), *pj = cli_join(dir, "p.json");
    st_table_write_fail_after_bytes = (long)strlen(json) + 1; /* the JSON fits, the page does not */
    const st_status s = st_report_write(json, page);
    st_table_write_fail_after_bytes = -1;
    assert_int_not_equal(s, ST_OK);
    if (cli_exists(pj) || cli_exists(page) || cli_count(dir, NULL) != 0) {
        cli_print_dir(dir);
        fail_msg("a failed page left files: %s", st_last_error());
    }
    free(cli_write(dir, "p.json", "old json", 8));
    free(cli_write(dir, "p.html", "old html", 8));
    st_table_write_fail_after_bytes = (long)strlen(json) + 1;
    assert_int_not_equal(st_report_write(json, page), ST_OK);
    st_table_write_fail_after_bytes = -1;
    char *a = slurp(pj), *b = slurp(page);
    assert_string_equal(a, "old json");
    assert_string_equal(b, "old html");
    free(a);
    free(b);
    assert_int_equal(cli_count(dir, NULL), 2);
    assert_int_equal(st_report_write(json, page), ST_OK); /* and the pair when it fits */
    assert_int_equal(cli_count(dir, NULL), 2);
    free(page);
    free(pj);
}

/* table list: a table whose name is not UTF-8 keeps the index up to date
 * (it was rewritten on every listing), and a journal an interrupted install
 * left is said, not hidden behind a mixed set. */
static void table_list_index_and_interrupted_install(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    size_t l = 0;
    char *t = table_text(2, NULL, &l);
    free(cli_write(dir, "\xff-a.table", t, l));
    cli_run r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    cli_expect_exit(&r, 0, "table list (first)");
    cli_free(&r);
    r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    cli_expect_exit(&r, 0, "table list (second)");
    if (!strstr(r.out, "tables.json: up to date, 1 table")) fail_msg("the index was not kept:\n%s", r.out);
    cli_free(&r);
    free(cli_write(dir, ".strata-tune.journal", "strata-tune journal 1 forward\n", 30));
    r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    if (!strstr(r.out, "holds the journal of an interrupted install")) fail_msg("no word of the journal:\n%s", r.out);
    cli_free(&r);
    free(t);
}

/* A settings run's set (report, page, profile, manifest) goes in through
 * the tune's journal (st_out_install_set): a SIGKILL at every step leaves,
 * once the next run of the folder settled it, all four old files or all
 * four new ones, and nothing else. */
/* A refusal the settling already named ("settings: ...") is not named
 * again by its caller (st_fail_prefixed); any other gets the prefix. */
static void a_refusal_names_its_command_once(void **state)
{
    (void)state;
    st_fail(ST_ERR_PARSE, "settings: %s is not a journal this tool wrote", "d/j");
    assert_int_equal(st_fail_prefixed(ST_ERR_PARSE, "settings"), ST_ERR_PARSE);
    assert_string_equal(st_last_error(), "settings: d/j is not a journal this tool wrote");
    st_fail(ST_ERR_IO, "settingsX: no");
    st_fail_prefixed(ST_ERR_IO, "settings");
    assert_string_equal(st_last_error(), "settings: settingsX: no");
    st_fail(ST_ERR_IO, "cannot read d/j");
    st_fail_prefixed(ST_ERR_IO, "settings");
    assert_string_equal(st_last_error(), "settings: cannot read d/j");
    st_clear_error();
}

/* st_set_log sink: keeps the first line (USER: 512 bytes) */
static void keep_line(void *user, const char *line)
{
    char *b = user;
    if (!*b) snprintf(b, 512, "%s", line);
}

static void a_kill_at_any_step_of_a_settings_install_leaves_one_set(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const char *names[4] = {"strata-settings-m.json", "strata-settings-m.html", "strata-settings-m.profile.json",
                            "strata-settings-m.manifest"};
    char *paths[4];
    for (int k = 0; k < 4; k++) paths[k] = cli_join(dir, names[k]);
    const char *newt[3] = {"new json", "new html", "new profile"};
    const size_t newl[3] = {8, 8, 11};
    int olds = 0, news = 0, lines_named = 0;
    long k = 1;
    for (;; k++) {
        for (int i = 0; i < 4; i++) free(cli_write(dir, names[i], "old", 3));
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            st_folder_lock_t l;
            if (st_folder_lock(dir, "settings", &l) != ST_OK) _exit(10);
            st_file_steps = 0;
            st_file_kill_at_step = k;
            const st_mf_role roles[3] = {ST_MF_REPORT, ST_MF_PAGE, ST_MF_PROFILE};
            const st_status s = st_out_install_set(dir, paths[3], 3, (const char *const *)paths, roles, newt, newl, NULL);
            st_folder_unlock(&l);
            _exit(s == ST_OK ? 0 : 1);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        const bool finished = WIFEXITED(st);
        if (finished && WEXITSTATUS(st) != 0) fail_msg("step %ld: the install failed", k);
        /* the next run of the folder */
        st_folder_lock_t l;
        assert_int_equal(st_folder_lock(dir, "settings", &l), ST_OK);
        int done = 0;
        /* its lines name the command that settled the folder */
        char line[512] = "";
        st_set_log(keep_line, line);
        const st_status rs = st_tune_out_recover("settings", dir, NULL, NULL, &done);
        st_set_log(NULL, NULL); /* before any assertion: LINE is this frame's */
        assert_int_equal(rs, ST_OK);
        if (done > 0 && strncmp(line, "settings: ", 10)) fail_msg("step %ld: the settling line '%s'", k, line);
        lines_named += done > 0;
        st_folder_unlock(&l);
        int o = 0, nw = 0;
        for (int i = 0; i < 4; i++) {
            char *v = slurp(paths[i]);
            o += v && !strcmp(v, "old");
            /* the manifest is the run's own: it lists the three files */
            nw += v && (i < 3 ? !strcmp(v, newt[i]) : !strncmp(v, "strata-tune manifest 1\n", 23) &&
                                                          strstr(v, "profile\t") && strstr(v, names[2]));
            free(v);
        }
        if (!(o == 4 || nw == 4) || cli_count(dir, NULL) != 4) {
            cli_print_dir(dir);
            fail_msg("step %ld: a mixed set or litter (%d old, %d new)", k, o, nw);
        }
        olds += o == 4;
        news += nw == 4;
        if (finished) break;
    }
    print_message("a settings install: %ld steps, each killed: %d left the old set, %d the new; %d settlings named "
                  "'settings'\n", k - 1, olds, news - 1, lines_named);
    assert_true(k > 8 && olds > 0 && news > 1 && lines_named > 0);
    for (int i = 0; i < 4; i++) free(paths[i]);
}

/* The lock is ours only when it holds what the tool writes there ("PID
 * WHO"): a small file of the user's at that name is refused and kept. */
static void a_lock_with_other_contents_is_kept(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *lock = cli_write(dir, ".strata-tune.lock", "keep me\n", 8);
    const st_identity id = cpu_identity();
    st_tune_out out;
    const st_status s = st_tune_out_open(&out, dir, "x", -1, &id, false, 4096);
    if (s == ST_OK || !strstr(st_last_error(), "not a lock file this tool wrote"))
        fail_msg("a lock with other contents: %s", s == ST_OK ? "used" : st_last_error());
    if (s == ST_OK) st_tune_out_close(&out);
    char *v = slurp(lock);
    assert_non_null(v);
    assert_string_equal(v, "keep me\n");
    free(v);
    /* one of ours ("PID WHO" of a dead run) is taken over */
    free(cli_write(dir, ".strata-tune.lock", "12345 table list\n", 17));
    assert_int_equal(st_tune_out_open(&out, dir, "x", -1, &id, false, 4096), ST_OK);
    st_tune_out_close(&out);
    free(lock);
}

/* A file another run's manifest lists is never written over by a run that
 * names it (report -o, --html, a settings run, a tune's report): it would
 * break that run's set. A name too long for its temporary file is refused
 * before anything runs. */
static void another_runs_files_and_long_names_are_refused(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *json = cli_write(dir, "r.json", "{}", 2);
    free(cli_write(dir, "strata-settings-m.json", "theirs", 6));
    free(cli_write(dir, "strata-settings-m.html", "theirs", 6));
    const char *names[] = {"strata-settings-m.json", "strata-settings-m.html"};
    const st_mf_role roles[] = {ST_MF_REPORT, ST_MF_PAGE};
    char *mf = cli_join(dir, "strata-settings-m.manifest");
    assert_int_equal(st_manifest_write_files(dir, mf, names, roles, 2), ST_OK);
    char *page = cli_join(dir, "strata-settings-m.html");
    cli_run r = cli(QUICK_S, "report", json, "-o", page, NULL);
    cli_expect_one_line(&r, 1, "belongs to another run's set", "report -o over a settings page");
    cli_free(&r);
    r = cli(QUICK_S, "--backend", "cpu", "bench", "--quick", "--no-suite", "--shape", "mmvq q8_0 64 64", "--html", page, NULL);
    cli_expect_one_line(&r, 1, "belongs to another run's set", "bench --html over a settings page");
    cli_free(&r);
    char *v = slurp(page);
    assert_string_equal(v, "theirs");
    free(v);
    char longname[260];
    memset(longname, 'a', 240);
    memcpy(longname + 240, ".html", 6);
    char *lp = cli_join(dir, longname);
    r = cli(QUICK_S, "report", json, "-o", lp, NULL);
    cli_expect_one_line(&r, 1, "too long for its temporary file", "a 245-byte page name");
    cli_free(&r);
    if (cli_exists(lp)) fail_msg("the long page was written");
    free(lp);
    free(page);
    free(mf);
    free(json);
}

/* link() as the tools library calls it (files_test links it statically
 * with -Wl,--wrap=link, tests/CMakeLists.txt): fails with EPERM while
 * g_fail_link is set, as on a file system without hard links (vfat, exFAT,
 * some network mounts), which this machine cannot mount. */
static int g_fail_link;
int __real_link(const char *from, const char *to);
int __wrap_link(const char *from, const char *to);
int __wrap_link(const char *from, const char *to)
{
    if (g_fail_link) {
        errno = EPERM;
        return -1;
    }
    return __real_link(from, to);
}

/* A folder whose file system makes no hard links (the roll back keeps the
 * old files by them) is refused when the run opens it, before the sweep,
 * with one line, and nothing is left there: the probe, its link and the
 * lock removed, a table already there untouched. */
static void a_folder_without_hard_links_is_refused_first(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    free(cli_write(dir, "strata-old.table", "old table", 9));
    g_fail_link = 1;
    const st_status p = st_out_probe(dir, "settings", 4096);
    g_fail_link = 0; /* before any assertion: the later tests link again */
    char why[1024];
    snprintf(why, sizeof why, "%s", p == ST_OK ? "" : st_last_error());
    const st_identity id = cpu_identity();
    st_tune_out out;
    g_fail_link = 1;
    const st_status s = st_tune_out_open(&out, dir, "x", -1, &id, false, 4096);
    g_fail_link = 0;
    char twhy[1024];
    snprintf(twhy, sizeof twhy, "%s", s == ST_OK ? "opened" : st_last_error());
    if (s == ST_OK) st_tune_out_close(&out);
    if (p == ST_OK || !strstr(why, "settings: cannot make a hard link in") || !strstr(why, "Operation not permitted"))
        fail_msg("the probe: %s", p == ST_OK ? "passed" : why);
    if (s == ST_OK || !strstr(twhy, "tune: cannot make a hard link in")) fail_msg("a tune's folder: %s", twhy);
    if (cli_count(dir, NULL) != 1) {
        cli_print_dir(dir);
        fail_msg("the refusals left files");
    }
    char *t = cli_join(dir, "strata-old.table"), *v = slurp(t);
    assert_string_equal(v, "old table");
    free(v);
    free(t);
    /* links again: the same folder opens */
    assert_int_equal(st_out_probe(dir, "settings", 4096), ST_OK);
    assert_int_equal(cli_count(dir, NULL), 1);
}

/* A file system with room for too few files is refused before the sweep
 * (the install makes up to 16 at its peak). Root only (a tmpfs). */
static void too_few_inodes_are_refused_before_the_sweep(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    if (mount("tmpfs", dir, "tmpfs", 0, "size=4m,nr_inodes=12") != 0) {
        print_message("no tmpfs here: not tested\n");
        return;
    }
    cli_run r = cli(600.0, "--backend", "cpu", "tune", MODEL, "--shapes", "mmvq", "--ntok-mix", "1", "--quick",
                    "--no-verify", "--out", dir, NULL);
    umount(dir);
    cli_expect_one_line(&r, 1, "more files", "a tmpfs of 12 inodes");
    if (strstr(r.out, "tuned")) fail_msg("refused only after the sweep: %s", r.out);
    cli_free(&r);
}

/* A page's temporary files a killed run left (`--html P` is killed while
 * it reserves its room: P.tmp.<pid>.0 of 256 KiB) go at the next write of
 * P; a live process's and a file that merely looks like one stay. */
static void the_next_write_of_a_page_removes_its_dead_temps(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const long pid = dead_pid();
    char name[128];
    snprintf(name, sizeof name, "p.html.tmp.%ld.0", pid);
    free(cli_write(dir, name, "dead", 4));
    snprintf(name, sizeof name, "p.json.tmp.%ld.3", pid);
    free(cli_write(dir, name, "dead", 4));
    snprintf(name, sizeof name, "p.html.tmp.%ld.0", (long)getppid());
    free(cli_write(dir, name, "alive", 5));
    free(cli_write(dir, "p.html.tmp.notes", "mine", 4));
    char *page = cli_join(dir, "p.html");
    cli_run r = cli(QUICK_S, "--backend", "cpu", "bench", "--quick", "--no-suite", "--shape", "mmvq q8_0 64 64", "--html", page,
                    NULL);
    cli_expect_exit(&r, 0, "bench --html");
    cli_free(&r);
    if (cli_count(dir, NULL) != 4 || cli_count(dir, ".tmp.") != 2 || cli_count(dir, "tmp.notes") != 1) {
        cli_print_dir(dir);
        fail_msg("the dead temporary files were not removed, or others were");
    }
    free(page);
}

/* `table list` writes the index only under the folder's lock: while a
 * tune (here: this test) holds it, the listing shows the rebuilt index
 * and writes nothing; once free, it writes it. */
static void table_list_writes_the_index_under_the_lock(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    size_t l = 0;
    char *t = table_text(2, NULL, &l);
    free(cli_write(dir, "a.table", t, l));
    st_folder_lock_t lk;
    assert_int_equal(st_folder_lock(dir, "tune", &lk), ST_OK);
    cli_run r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    cli_expect_exit(&r, 0, "table list while locked");
    if (!strstr(r.out, "not written")) fail_msg("the index was written under a tune's lock:\n%s", r.out);
    cli_free(&r);
    char *ix = cli_join(dir, "tables.json");
    if (cli_exists(ix)) fail_msg("tables.json written while the folder was locked");
    st_folder_unlock(&lk);
    r = cli(QUICK_S, "--backend", "cpu", "table", "list", dir, NULL);
    cli_expect_exit(&r, 0, "table list after");
    cli_free(&r);
    if (!cli_exists(ix)) fail_msg("tables.json not written once the folder was free");
    if (cli_count(dir, NULL) != 2) {
        cli_print_dir(dir);
        fail_msg("table list left files");
    }
    free(ix);
    free(t);
}

/* report -o (and the --html pages) never write over a name the tuner keeps
 * for a tables folder: the lock, the journal, the index, a table, a
 * candidate, a manifest. */
static void report_never_writes_over_a_tuner_name(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *json = cli_write(dir, "r.json", "{}", 2);
    const char *names[] = {".strata-tune.lock", ".strata-tune.journal", "tables.json", "x.table", "x.table.candidate",
                           "x.autotune.manifest"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *o = cli_write(dir, names[i], "keep", 4);
        cli_run r = cli(QUICK_S, "report", json, "-o", o, NULL);
        cli_expect_one_line(&r, 1, "a name the tuner keeps", names[i]);
        cli_free(&r);
        char *v = slurp(o);
        if (!v || strcmp(v, "keep")) fail_msg("%s was written over", names[i]);
        free(v);
        free(o);
    }
    /* bench --html whose JSON would be tables.json */
    char *page = cli_join(dir, "tables.html");
    cli_run r = cli(QUICK_S, "--backend", "cpu", "bench", "--quick", "--no-suite", "--shape", "mmvq q8_0 64 64", "--html",
                    page, NULL);
    cli_expect_one_line(&r, 1, "a name the tuner keeps", "bench --html tables.html");
    cli_free(&r);
    free(page);
    free(json);
}

/* verify --html checks the room for its page and JSON before the gate
 * runs: a folder too full is refused in one line at once, and nothing is
 * left (the gate used to run, then the page failed, leaving the JSON
 * alone). Root only (a tmpfs). */
static void verify_html_reserves_its_room_before_the_run(void **state)
{
    (void)state;
    const char *top = cli_dir(), *full = cli_dir();
    if (!cli_tmpfs(full, 64 << 10, false)) {
        print_message("no tmpfs here: not tested\n");
        return;
    }
    size_t tl = 0;
    char *tt = table_text(2, NULL, &tl);
    char *table = cli_write(top, "t.table", tt, tl);
    char *page = cli_join(full, "p.html");
    cli_run r = cli(120.0, "--backend", "cpu", "verify", MODEL, table, "--html", page, NULL);
    cli_expect_one_line(&r, 1, strerror(ENOSPC), "verify --html into 64 KiB");
    assert_null(strstr(r.out, "PASS"));
    assert_int_equal(cli_count(full, NULL), 0);
    cli_free(&r);
    cli_umount(full);
    free(tt);
    free(table);
    free(page);
}

/* ---- the command line in a report's JSON ------------------------------------------------ */

/* An argument that is not UTF-8 (here the page's own name) is recorded
 * escaped, so the JSON beside `bench --html` stays valid UTF-8. */
static void the_command_line_in_a_report_is_utf8(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *page = cli_join(dir, "\xff-b.html");
    cli_run r = cli(120.0, "--backend", "cpu", "-q", "bench", "--shape", "mmvq q8_0 64 64", "--quick", "--no-suite", "--html",
                    page, NULL);
    cli_expect_exit(&r, 0, "bench --html with a name that is not UTF-8");
    cli_free(&r);
    char *json = cli_join(dir, "\xff-b.json");
    char *text = slurp(json);
    assert_non_null(text);
    if (!is_utf8(text)) fail_msg("the JSON beside bench --html is not valid UTF-8");
    cJSON *j = cJSON_Parse(text);
    const char *cl = cJSON_GetStringValue(cJSON_GetObjectItem(j, "command_line"));
    if (!cl || !strstr(cl, "\\xff-b.html")) fail_msg("command_line: %s", cl ? cl : "(none)");
    cJSON_Delete(j);
    free(text);
    free(json);
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_kill_at_any_step_leaves_the_old_or_the_new_set, cli_teardown),
        cmocka_unit_test_teardown(a_kill_during_a_roll_back_leaves_the_old_or_the_new_set, cli_teardown),
        cmocka_unit_test_teardown(report_never_replaces_a_fifo_a_folder_or_its_input, cli_teardown),
        cmocka_unit_test_teardown(every_output_path_is_checked_before_the_sweep, cli_teardown),
        cmocka_unit_test(a_page_path_is_never_cut),
        cmocka_unit_test_teardown(prune_removes_only_what_is_proven_a_superseded_tables, cli_teardown),
        cmocka_unit_test_teardown(prune_settles_an_interrupted_install_first, cli_teardown),
        cmocka_unit_test_teardown(a_newline_in_a_file_name_cannot_forge_a_line, cli_teardown),
        cmocka_unit_test_teardown(the_command_line_in_a_report_is_utf8, cli_teardown),
        cmocka_unit_test_teardown(prune_with_a_knob_set_keeps_the_table_that_engages, cli_teardown),
        cmocka_unit_test_teardown(a_failed_index_write_rolls_the_set_back, cli_teardown),
        cmocka_unit_test_teardown(the_sweep_removes_only_our_litter, cli_teardown),
        cmocka_unit_test_teardown(the_lock_is_never_a_link_or_a_fifo, cli_teardown),
        cmocka_unit_test_teardown(a_planted_journal_is_refused_and_changes_nothing, cli_teardown),
        cmocka_unit_test_teardown(table_list_escapes_its_folder, cli_teardown),
        cmocka_unit_test_teardown(the_model_is_never_an_output, cli_teardown),
        cmocka_unit_test_teardown(the_input_is_never_a_candidate_or_litter, cli_teardown),
        cmocka_unit_test_teardown(a_symbolic_link_at_an_output_is_refused, cli_teardown),
        cmocka_unit_test_teardown(a_table_name_with_a_control_byte_is_refused_first, cli_teardown),
        cmocka_unit_test_teardown(the_reservation_counts_whole_blocks, cli_teardown),
        cmocka_unit_test_teardown(table_list_writes_the_index_under_the_lock, cli_teardown),
        cmocka_unit_test_teardown(the_next_write_of_a_page_removes_its_dead_temps, cli_teardown),
        cmocka_unit_test_teardown(a_lock_with_other_contents_is_kept, cli_teardown),
        cmocka_unit_test_teardown(another_runs_files_and_long_names_are_refused, cli_teardown),
        cmocka_unit_test_teardown(too_few_inodes_are_refused_before_the_sweep, cli_teardown),
        cmocka_unit_test_teardown(a_folder_without_hard_links_is_refused_first, cli_teardown),
        cmocka_unit_test(a_refusal_names_its_command_once),
        cmocka_unit_test_teardown(a_kill_at_any_step_of_a_settings_install_leaves_one_set, cli_teardown),
        cmocka_unit_test_teardown(report_never_writes_over_a_tuner_name, cli_teardown),
        cmocka_unit_test_teardown(the_reservation_counts_the_index, cli_teardown),
        cmocka_unit_test_teardown(the_reservation_counts_the_merged_table_and_a_new_index, cli_teardown),
        cmocka_unit_test_teardown(a_report_and_its_page_are_written_together, cli_teardown),
        cmocka_unit_test_teardown(table_list_index_and_interrupted_install, cli_teardown),
        cmocka_unit_test_teardown(verify_html_reserves_its_room_before_the_run, cli_teardown),
        cmocka_unit_test_teardown(report_keeps_an_input_named_like_its_pages_temporary_file, cli_teardown),
        cmocka_unit_test_teardown(another_devices_report_set_is_refused, cli_teardown),
        cmocka_unit_test_teardown(table_list_refuses_a_path_it_would_cut, cli_teardown),
        cmocka_unit_test_teardown(prune_after_a_runtime_upgrade_removes_the_old_table, cli_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
