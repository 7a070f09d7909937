/* The tune's output folder (src/tuning/tune_out.c), through tune_decode and
 * the library: paths are never cut (table and report cannot collide), a
 * second model or shape set merges into the folder's one table for this
 * identity, folders that cannot take the outputs are refused before the
 * sweep (not a folder, read-only, full) with the system's reason, the table
 * is installed only together with its report, a second tune of a locked
 * folder is refused at once, and no catchable signal leaves a candidate,
 * temporary, probe or lock file behind. */
#include "cli_util.h"

#include "strata/decode.h"
#include "strata/tools/model.h"
#include "strata/tools/tuner.h"
#include "out_manifest.h"
#include "table_internal.h"
#include "tune_out.h"

#include <cjson/cJSON.h>
#include <sys/file.h>

#define MODEL STRATA_TEST_DATA "/gguf/tiny-moe.gguf"
#define LONG 600.0 /* seconds: a tune of the tiny model under ASan takes ~30 */
#define QUICK 30.0

/* A table for this process at DIR/NAME with one mmvq row (or none). */
static char *cpu_table(const char *dir, const char *name, const st_mmvq_key *row, int rows)
{
    const st_identity id = cpu_identity();
    st_table *t = NULL;
    assert_int_equal(st_table_create(&id, &t), ST_OK);
    assert_int_equal(st_table_add_comment(t, "made by the test"), ST_OK);
    if (row) assert_int_equal(st_table_add_mmvq(t, row, rows), ST_OK);
    char *p = cli_join(dir, name);
    assert_int_equal(st_table_write_atomic(t, p), ST_OK);
    st_table_destroy(t);
    return p;
}

static char *slurp(const char *path, size_t *len)
{
    char *b = NULL;
    size_t n = 0;
    if (st_read_file(path, &b, &n) != ST_OK) fail_msg("cannot read %s: %s", path, st_last_error());
    if (len) *len = n;
    return b;
}

/* Leftovers of a tune: candidates, temporary, probe and lock files. */
static int leftovers(const char *dir)
{
    return cli_count(dir, ".candidate") + cli_count(dir, ".tmp.") + cli_count(dir, ".strata-tune-probe") +
           cli_count(dir, ".strata-tune.lock");
}

/* Whether the folder DIR, loaded the way an engine loads it, engages. */
static bool folder_engages(const char *dir, char *line, size_t n)
{
    const st_identity id = cpu_identity();
    st_table *t = NULL;
    const bool ok = st_table_load_msg(dir, &id, NULL, &t, line, n) == ST_OK && t;
    st_table_destroy(t);
    return ok;
}

/* The JSON --json output of a tune. */
static cJSON *tune_json(const cli_run *r)
{
    cJSON *j = cJSON_Parse(r->out);
    if (!j) fail_msg("tune --json printed no JSON:\n%s\n%s", r->out, r->err);
    return j;
}

/* ---- paths ---------------------------------------------------------------------- */

static void long_output_paths_are_never_cut(void **state)
{
    (void)state;
    /* a folder path of more than the 1024 bytes the paths used to be cut
     * at, where the table and the report got the same cut name */
    const char *base = cli_dir();
    char path[2048];
    snprintf(path, sizeof path, "%s", base);
    char part[201];
    memset(part, 'd', 200);
    part[200] = '\0';
    while (strlen(path) < 1100) {
        strcat(path, "/");
        strcat(path, part);
        assert_int_equal(mkdir(path, 0755), 0);
    }
    cli_run r = cli(LONG, "--backend", "cpu", "-q", "--json", "tune", "--shape", "mmvq q8_0 64 64", "--quick", "--no-verify",
                    "--out", path, NULL);
    cli_expect_exit(&r, 0, "tune into a long path");
    cJSON *j = tune_json(&r);
    const char *table = cJSON_GetStringValue(cJSON_GetObjectItem(j, "table"));
    const char *report = cJSON_GetStringValue(cJSON_GetObjectItem(j, "report"));
    assert_non_null(table);
    assert_non_null(report);
    assert_true(strlen(table) > 1100 && strlen(report) > 1100);
    assert_string_not_equal(table, report);
    assert_true(cli_exists(table) && cli_exists(report));
    char *rep = slurp(report, NULL);
    cJSON *rj = cJSON_Parse(rep);
    if (!rj) fail_msg("the report is not JSON (overwritten?)");
    cJSON_Delete(rj);
    free(rep);
    /* the page too: beside the report, whole (it used to be cut at 1100
     * bytes and overwrite a file in a parent folder) */
    const char *html = cJSON_GetStringValue(cJSON_GetObjectItem(j, "report_html"));
    assert_non_null(html);
    assert_true(strlen(html) == strlen(report) && cli_exists(html));
    assert_int_equal(cli_count(base, NULL), 1); /* the first folder of the chain, nothing else */
    char line[ST_TABLE_MSG_MAX];
    if (!folder_engages(path, line, sizeof line)) fail_msg("the folder does not engage: %s", line);
    cJSON_Delete(j);
    cli_free(&r);

    /* past what a path may be: refused before anything, in one line */
    char huge[ST_TUNE_PATH_MAX + 64];
    memset(huge, 'x', sizeof huge - 1);
    huge[0] = '/';
    huge[sizeof huge - 1] = '\0';
    r = cli(QUICK, "--backend", "cpu", "tune", "--shape", "mmvq q8_0 64 64", "--quick", "--out", huge, NULL);
    cli_expect_one_line(&r, 1, "ST_TUNE_PATH_MAX", "tune into a path past ST_TUNE_PATH_MAX");
    cli_free(&r);
}

/* `tune ... 2>&1 | head -1`: the reader goes away after the first line;
 * the lines after the install must not end the run by SIGPIPE (exit 141
 * after everything was installed). */
static void a_closed_output_pipe_does_not_fail_a_completed_install(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]); /* no reader at all: every write is EPIPE */
        dup2(p[1], 1);
        dup2(p[1], 2);
        signal(SIGPIPE, SIG_DFL);
        execl(cli_path(), "tune_decode", "--backend", "cpu", "tune", "--shape", "mmvq q8_0 64 64", "--quick", "--no-verify",
              "--out", dir, (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    close(p[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("tune into a closed pipe: status %d (signal %d)", st, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    assert_int_equal(cli_count(dir, ".table"), 1);
    assert_int_equal(cli_count(dir, ".autotune.html"), 1);
    assert_int_equal(leftovers(dir), 0);
}

/* The reservation follows the token mix: one shape at 1..32 writes a
 * report of about 121 KB and a page of 23 KB, so a folder with 128 KiB
 * free (more than the 80 KiB the old flat reservation took) is refused
 * before the sweep, where it used to run the sweep and then fail with
 * ENOSPC; 512 KiB takes the run. Root only (a tmpfs); the file-size limit
 * stands in otherwise. */
static void fsize_limit(void *u);

static void the_reservation_follows_the_token_mix(void **state)
{
    (void)state;
    char mix[128] = "1";
    for (int i = 2; i <= 32; i++) snprintf(mix + strlen(mix), sizeof mix - strlen(mix), ",%d", i);
    for (int fits = 0; fits < 2; fits++) {
        const char *dir = cli_dir();
        const size_t room = fits ? 512 << 10 : 128 << 10;
        const bool mounted = cli_tmpfs(dir, room, false);
        char *argv[] = {"--backend", "cpu", "-q", "tune", "--shape", "mmvq q8_0 64 64", "--ntok-mix", mix, "--quick",
                        "--no-verify", "--out", (char *)dir, NULL};
        cli_run r = cli_exec(argv, LONG, mounted ? NULL : fsize_limit, (void *)(uintptr_t)room);
        if (fits) {
            cli_expect_exit(&r, 0, "tune at 1..32 into 512 KiB");
            assert_int_equal(cli_count(dir, ".table"), 1);
        } else {
            cli_expect_one_line(&r, 1, strerror(mounted ? ENOSPC : EFBIG), "tune at 1..32 into 128 KiB");
            assert_non_null(strstr(r.err, "probe"));
            assert_int_equal(cli_count(dir, ".table"), 0);
        }
        assert_int_equal(leftovers(dir), 0);
        cli_free(&r);
        if (mounted) cli_umount(dir);
    }
}

/* ---- one table per identity ----------------------------------------------------- */

/* Every shape key of a tune's report ("mmvq q8_0 64 64", "expert ...")
 * appears in the table as a row or as a tuned-default comment. */
static void table_covers_report(const char *table_path, const char *report_path)
{
    char *tt = slurp(table_path, NULL), *rt = slurp(report_path, NULL);
    cJSON *rj = cJSON_Parse(rt);
    assert_non_null(rj);
    const cJSON *sh;
    cJSON_ArrayForEach(sh, cJSON_GetObjectItem(rj, "shapes"))
    {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(sh, "kind"));
        char key[160];
        if (!strcmp(kind, "mmvq"))
            snprintf(key, sizeof key, "mmvq %s %d %d", cJSON_GetStringValue(cJSON_GetObjectItem(sh, "type")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "n_rows")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "n_cols")));
        else
            snprintf(key, sizeof key, "expert %s %s %d %d %d", cJSON_GetStringValue(cJSON_GetObjectItem(sh, "type")),
                     cJSON_GetStringValue(cJSON_GetObjectItem(sh, "down_type")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "n_embd")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "n_ff")),
                     (int)cJSON_GetNumberValue(cJSON_GetObjectItem(sh, "n_tokens")));
        char row[200], dflt[200];
        snprintf(row, sizeof row, "\n%s ", key);
        snprintf(dflt, sizeof dflt, "# tuned-default %s\n", key);
        if (!strstr(tt, row) && !strstr(tt, dflt)) fail_msg("%s lacks '%s' of %s:\n%s", table_path, key, report_path, tt);
    }
    cJSON_Delete(rj);
    free(tt);
    free(rt);
}

static void a_second_model_or_shape_set_merges_into_the_one_table(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    cli_run a = cli(LONG, "--backend", "cpu", "-q", "--json", "tune", MODEL, "--ntok-mix", "1", "--quick", "--no-verify",
                    "--out", dir, NULL);
    cli_expect_exit(&a, 0, "tune the model");
    cJSON *ja = tune_json(&a);
    cli_run b = cli(LONG, "--backend", "cpu", "-q", "--json", "tune", "--shape", "mmvq q8_0 64 128", "--quick",
                    "--no-verify", "--out", dir, NULL);
    cli_expect_exit(&b, 0, "tune a shape set into the same folder");
    cJSON *jb = tune_json(&b);
    const char *ta = cJSON_GetStringValue(cJSON_GetObjectItem(ja, "table"));
    const char *tb = cJSON_GetStringValue(cJSON_GetObjectItem(jb, "table"));
    assert_string_equal(ta, tb); /* the folder's table for this identity */
    assert_int_equal(cli_count(dir, ".table"), 1);
    assert_int_equal(leftovers(dir), 0);
    char line[ST_TABLE_MSG_MAX];
    if (!folder_engages(dir, line, sizeof line)) fail_msg("the folder no longer engages: %s", line);
    table_covers_report(ta, cJSON_GetStringValue(cJSON_GetObjectItem(ja, "report")));
    table_covers_report(ta, cJSON_GetStringValue(cJSON_GetObjectItem(jb, "report")));
    /* and `table check` of the folder agrees */
    cli_run c = cli(QUICK, "--backend", "cpu", "table", "check", dir, NULL);
    cli_expect_exit(&c, 0, "table check of the merged folder");
    cli_free(&c);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    cli_free(&a);
    cli_free(&b);
}

static void a_folder_the_loader_refuses_is_refused_before_the_sweep(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *a = cpu_table(dir, "a.table", NULL, 0), *b = cpu_table(dir, "b.table", NULL, 0);
    size_t na = 0;
    char *before = slurp(a, &na);
    cli_run r = cli(QUICK, "--backend", "cpu", "tune", MODEL, "--quick", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, "holds 2 tables for this process", "tune into a folder with two tables");
    assert_non_null(strstr(r.err, "keep one"));
    cli_free(&r);
    size_t nn = 0;
    char *after = slurp(a, &nn);
    assert_true(na == nn && !memcmp(before, after, na));
    free(after);
    free(before);
    unlink(b);
    /* this identity's table that does not parse: refused, or replaced with --force */
    const st_identity id = cpu_identity();
    char hdr[4 * ST_TOKEN_MAX + 16], text[300];
    st_identity_header(&id, hdr, sizeof hdr);
    const int n = snprintf(text, sizeof text, "%s\nmmvq q8_0 64 64 3\n", hdr);
    char *bad = cli_write(dir, "a.table", text, (size_t)n);
    r = cli(QUICK, "--backend", "cpu", "tune", "--shape", "mmvq q8_0 64 64", "--quick", "--no-verify", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, "does not parse", "tune into a folder whose table is broken");
    assert_non_null(strstr(r.err, "--force"));
    cli_free(&r);
    r = cli(LONG, "--backend", "cpu", "-q", "tune", "--shape", "mmvq q8_0 64 64", "--quick", "--no-verify", "--force",
            "--out", dir, NULL);
    cli_expect_exit(&r, 0, "tune --force over a broken table");
    cli_free(&r);
    char line[ST_TABLE_MSG_MAX];
    if (!folder_engages(dir, line, sizeof line)) fail_msg("%s", line);
    free(bad);
    free(a);
    free(b);
}

/* ---- folders that cannot take the outputs ---------------------------------------- */

static void no_hook(void *u) { (void)u; }

static void fsize_limit(void *u)
{
    signal(SIGXFSZ, SIG_IGN); /* tune_decode ignores it too */
    struct rlimit rl = {(rlim_t)(uintptr_t)u, (rlim_t)(uintptr_t)u};
    setrlimit(RLIMIT_FSIZE, &rl);
}

static void out_that_is_a_file_is_refused_before_the_sweep(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *file = cli_write(dir, "plain", "x", 1);
    cli_run r = cli(QUICK, "--backend", "cpu", "tune", MODEL, "--quick", "--out", file, NULL);
    cli_expect_one_line(&r, 1, "is a file, not a folder", "tune --out FILE");
    assert_null(strstr(r.err, "tuned")); /* before the sweep */
    cli_free(&r);
    free(file);
}

static void read_only_and_full_folders_are_refused_before_the_sweep(void **state)
{
    (void)state;
    /* read-only: a read-only mount where we can make one (root in CI), else
     * a folder without write permission (not root) */
    const char *ro = cli_dir();
    const bool mounted_ro = cli_tmpfs(ro, 64 << 10, true);
    if (!mounted_ro) assert_int_equal(chmod(ro, 0555), 0);
    if (mounted_ro || geteuid() != 0) {
        cli_run r = cli(QUICK, "--backend", "cpu", "tune", MODEL, "--quick", "--out", ro, NULL);
        cli_expect_one_line(&r, 1, strerror(mounted_ro ? EROFS : EACCES), "tune into a read-only folder");
        assert_non_null(strstr(r.err, ro));
        cli_free(&r);
    } else {
        print_message("read-only folder: root without mount: not tested here\n");
    }
    if (mounted_ro) cli_umount(ro);
    chmod(ro, 0755);

    /* full: a small tmpfs filled up (root), else the file-size limit */
    const char *full = cli_dir();
    const bool mounted = cli_tmpfs(full, 64 << 10, false);
    cli_run r;
    if (mounted) {
        char *fill = cli_join(full, "fill");
        const int fd = open(fill, O_WRONLY | O_CREAT, 0644);
        static const char block[4096];
        while (write(fd, block, sizeof block) > 0) {
        }
        close(fd);
        free(fill);
        r = cli(QUICK, "--backend", "cpu", "tune", MODEL, "--quick", "--out", full, NULL);
        cli_expect_one_line(&r, 1, strerror(ENOSPC), "tune into a full folder");
    } else {
        char *argv[] = {"--backend", "cpu", "tune", MODEL, "--quick", "--out", (char *)full, NULL};
        r = cli_exec(argv, QUICK, fsize_limit, (void *)(uintptr_t)4096);
        cli_expect_one_line(&r, 1, strerror(EFBIG), "tune with a 4 KB file-size limit");
    }
    assert_non_null(strstr(r.err, "probe"));
    assert_int_equal(cli_count(full, ".table"), 0);
    assert_int_equal(leftovers(full), 0);
    cli_free(&r);
    if (mounted) cli_umount(full);
}

/* The table is installed only with its report: with a file-size limit the
 * report cannot be written under, no table appears (it used to be installed,
 * naming a report that was not there, and the run exited 1). */
static void no_table_is_installed_without_its_report(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *argv[] = {"--backend", "cpu", "tune", MODEL, "--ntok-mix", "1", "--quick", "--no-verify", "--out", (char *)dir,
                    NULL};
    /* the table is < 1 KB, the report tens of KB */
    cli_run r = cli_exec(argv, LONG, fsize_limit, (void *)(uintptr_t)(16 << 10));
    cli_expect_one_line(&r, 1, strerror(EFBIG), "tune with a 16 KB file-size limit");
    assert_int_equal(cli_count(dir, ".table"), 0);
    assert_int_equal(cli_count(dir, ".json"), 0);
    assert_int_equal(leftovers(dir), 0);
    cli_free(&r);
}

/* The install itself, past the probe: the report fails (file-size limit,
 * or its path taken by a folder so its rename fails) and the folder keeps
 * the table it had, byte for byte, and nothing else. */
static void install_rolls_back_the_table_when_the_report_fails(void **state)
{
    (void)state;
    for (int how = 0; how < 2; how++) {
        const char *dir = cli_dir();
        const st_mmvq_key k = {ST_Q8_0, 64, 64};
        char *old = cpu_table(dir, "mine.table", &k, 2);
        size_t n_old = 0;
        char *old_text = slurp(old, &n_old);
        fflush(NULL);
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            const st_identity id = cpu_identity();
            st_tune_out out;
            if (st_tune_out_open(&out, dir, "x", -1, &id, false, 4096) != ST_OK) _exit(10);
            if (how == 0) {
                fsize_limit((void *)(uintptr_t)2048);
            } else if (mkdir(out.report_path, 0755) != 0) {
                _exit(11);
            }
            static char report[8192];
            memset(report, ' ', sizeof report);
            const char table[] = "cpu 0 0 0\n";
            const st_status s = st_tune_out_install(&out, &id, NULL, table, sizeof table - 1, report, sizeof report, NULL, 0);
            st_tune_out_close(&out);
            /* EFBIG (the limit) or "is a folder: not replaced" (the rule) */
            _exit(s != ST_OK && strstr(st_last_error(), "the table was not installed") ? 0 : 12);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("install case %d: child status %d", how, st);
        size_t n_now = 0;
        char *now = slurp(old, &n_now);
        assert_true(n_now == n_old && !memcmp(now, old_text, n_old));
        assert_int_equal(leftovers(dir), 0);
        assert_int_equal(cli_count(dir, NULL), how == 0 ? 1 : 2); /* the table (and the folder in the way) */
        free(now);
        free(old_text);
        free(old);
    }
}

/* The first entry of DIR whose name ends in END and does not hold NOT. */
static char *find_named(const char *dir, const char *end, const char *not)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char *found = NULL;
    while (!found && (e = readdir(d)) != NULL) {
        const size_t l = strlen(e->d_name), m = strlen(end);
        if (l >= m && !strcmp(e->d_name + l - m, end) && !(not && strstr(e->d_name, not))) found = cli_join(dir, e->d_name);
    }
    closedir(d);
    if (!found) fail_msg("no *%s in %s", end, dir);
    return found;
}

/* A re-tune that installs nothing (the gate cannot decide, or measures
 * the table slower) leaves the installed table's report as it was: its
 * own report goes beside it as strata-<model>.not-installed.autotune.json, and
 * tables.json still lists the installed table's report as its own. */
/* Whether the manifest beside REPORT (out_manifest.h) lists the file at
 * PATH in ROLE with the bytes it has now. */
static bool manifest_lists(const char *report, st_mf_role role, const char *path)
{
    char *mp = st_manifest_path_for(report), *text = NULL, *bytes = NULL, hex[ST_SHA256_HEX];
    size_t n = 0, bn = 0;
    st_manifest m;
    bool ok = mp && st_read_file(mp, &text, &n) == ST_OK && st_manifest_parse(text, n, &m) == ST_OK &&
              st_read_file(path, &bytes, &bn) == ST_OK;
    if (ok) {
        st_sha256_buf(bytes, bn, hex);
        ok = st_manifests_prove(&m, 1, role, strrchr(path, '/') + 1, hex) == 0;
    }
    free(mp);
    free(text);
    free(bytes);
    return ok;
}

static void a_re_tune_that_installs_nothing_keeps_the_installed_report(void **state)
{
    (void)state;
    st_model *m = NULL;
    assert_int_equal(st_model_open(MODEL, &m), ST_OK);
    const st_model_mmvq_shape *ms = st_model_mmvq_shape_at(m, 0);
    const st_mmvq_key k = {ms->type, ms->n_rows, ms->n_cols};
    st_model_close(m);
    const char *dir = cli_dir();
    free(cpu_table(dir, "mine.table", &k, 2)); /* a row the model's step uses: the gate runs */
    cli_run r = cli(LONG, "--backend", "cpu", "-q", "tune", MODEL, "--shapes", "expert", "--ntok-mix", "1", "--quick",
                    "--no-verify", "--out", dir, NULL);
    cli_expect_exit(&r, 0, "the first tune (installed)");
    cli_free(&r);
    char *table = find_named(dir, ".table", NULL), *report = find_named(dir, ".autotune.json", NULL);
    size_t nt = 0, nr = 0;
    char *t0 = slurp(table, &nt), *r0 = slurp(report, &nr);
    /* the run's manifest lists every file it left, with their bytes */
    char page[4096];
    snprintf(page, sizeof page, "%.*s.html", (int)strlen(report) - 5, report);
    if (!manifest_lists(report, ST_MF_TABLE, table) || !manifest_lists(report, ST_MF_REPORT, report) ||
        !manifest_lists(report, ST_MF_PAGE, page))
        fail_msg("the manifest beside %s does not list the run's files", report);
    r = cli(LONG, "--backend", "cpu", "tune", MODEL, "--shapes", "expert", "--ntok-mix", "1", "--quick", "--gate-budget",
            "0.01", "--out", dir, NULL);
    if (r.status == -1 || !WIFEXITED(r.status) || (WEXITSTATUS(r.status) != 3 && WEXITSTATUS(r.status) != 4))
        fail_msg("the re-tune: status %d, expected exit 3 or 4 (nothing installed)\n%s", r.status, r.err);
    size_t nt1 = 0, nr1 = 0;
    char *t1 = slurp(table, &nt1), *r1 = slurp(report, &nr1);
    assert_true(nt1 == nt && !memcmp(t0, t1, nt));
    if (nr1 != nr || memcmp(r0, r1, nr)) fail_msg("the installed table's report was overwritten");
    char *refused = find_named(dir, ".not-installed.autotune.json", NULL);
    assert_non_null(strstr(r.out, "not-installed")); /* the run names the report it wrote */
    /* its manifest lists what it wrote; the installed run's still lists its files */
    assert_true(manifest_lists(refused, ST_MF_REPORT, refused));
    assert_true(manifest_lists(report, ST_MF_TABLE, table) && manifest_lists(report, ST_MF_REPORT, report));
    char *ixp = cli_join(dir, "tables.json"), *ixs = slurp(ixp, NULL);
    cJSON *ix = cJSON_Parse(ixs);
    assert_non_null(ix);
    free(ixs);
    free(ixp);
    char *ixt = cJSON_PrintUnformatted(ix);
    const char *b = strrchr(report, '/') + 1;
    char want[512];
    snprintf(want, sizeof want, "\"file\":\"%s\",\"status\":\"present\"", b);
    if (!strstr(ixt, want)) fail_msg("tables.json does not list %s as present:\n%s", b, ixt);
    free(ixt);
    cJSON_Delete(ix);
    assert_int_equal(leftovers(dir), 0);
    cli_free(&r);
    free(refused);
    free(t0);
    free(t1);
    free(r0);
    free(r1);
    free(table);
    free(report);
}

/* The files are "strata-<model>-...": the prefix once, also for a model
 * whose own name starts with it (the tiny test model's). */
static void the_prefix_is_never_doubled(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    const st_identity id = cpu_identity();
    const char *names[] = {"qwen3", "strata-tune-tiny-moe-tests"};
    const char *want[] = {"/strata-qwen3.autotune.json", "/strata-tune-tiny-moe-tests.autotune.json"};
    const char *want_t[] = {"/strata-qwen3-cpu-", "/strata-tune-tiny-moe-tests-cpu-"};
    for (int i = 0; i < 2; i++) {
        st_tune_out out;
        assert_int_equal(st_tune_out_open(&out, dir, names[i], -1, &id, false, 4096), ST_OK);
        const char *r = strrchr(out.report_path, '/'), *t = strrchr(out.table_path, '/');
        assert_string_equal(r, want[i]);
        assert_true(!strncmp(t, want_t[i], strlen(want_t[i])));
        assert_null(strstr(out.table_path, "strata-strata"));
        st_tune_out_close(&out);
    }
}

/* ---- the lock ------------------------------------------------------------------ */

static void a_locked_folder_is_refused_at_once(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *lock = cli_join(dir, ".strata-tune.lock");
    const int fd = open(lock, O_RDWR | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_int_equal(write(fd, "4242\n", 5), 5);
    cli_run r = cli(QUICK, "--backend", "cpu", "tune", MODEL, "--quick", "--out", dir, NULL);
    cli_expect_one_line(&r, 1, "another tune is writing to", "tune into a locked folder");
    assert_non_null(strstr(r.err, "process 4242"));
    assert_int_equal(cli_count(dir, NULL), 1); /* only the lock */
    cli_free(&r);
    close(fd);
    unlink(lock);
    free(lock);
}

/* Two tunes of one folder at once: the second is refused while the first
 * holds the folder, and the first's table and report are what remains. */
static void concurrent_tunes_of_one_folder_do_not_interleave(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *lock = cli_join(dir, ".strata-tune.lock");
    fflush(NULL);
    const pid_t first = fork();
    assert_true(first >= 0);
    if (first == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 1);
        dup2(nul, 2);
        execl(cli_path(), "tune_decode", "--backend", "cpu", "-q", "tune", MODEL, "--ntok-mix", "1", "--quick",
              "--no-verify", "--out", dir, (char *)NULL);
        _exit(127);
    }
    const double t0 = cli_now();
    while (!cli_exists(lock) && cli_now() - t0 < 60) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(cli_exists(lock));
    cli_run r = cli(QUICK, "--backend", "cpu", "tune", "--shape", "mmvq q8_0 64 64", "--quick", "--no-verify", "--out", dir,
                    NULL);
    cli_expect_one_line(&r, 1, "another tune is writing to", "the second tune");
    cli_free(&r);
    int st = 0;
    waitpid(first, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(cli_count(dir, ".table"), 1);
    assert_int_equal(cli_count(dir, ".autotune.json"), 1);
    assert_int_equal(leftovers(dir), 0);
    free(lock);
}

/* ---- signals ------------------------------------------------------------------- */

typedef enum { AT_START, AT_SWEEP, AT_GATE } phase;

static const char *phase_name(phase p) { return p == AT_START ? "start" : p == AT_SWEEP ? "sweep" : "gate"; }

static bool has_candidate(const char *dir) { return cli_count(dir, ".candidate") > 0; }

/* Starts a tune of the model's expert shapes into DIR, whose table has a
 * row for one of the model's mmvq shapes: the merged table names a variant
 * the model's step uses, so the end-to-end gate runs (on a .candidate
 * file) every time. Sends SIG at phase AT, returns the wait status. */
static int tune_and_signal(const char *dir, int sig, phase at, double *when)
{
    char *lock = cli_join(dir, ".strata-tune.lock");
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        /* at AT_SWEEP the sweep is made long (64 rounds), so the signal
         * lands in it however fast this machine is */
        if (at == AT_SWEEP)
            execl(cli_path(), "tune_decode", "--backend", "cpu", "-q", "tune", MODEL, "--shapes", "expert", "--ntok-mix",
                  "1", "--rounds", "64", "--out", dir, (char *)NULL);
        else
            execl(cli_path(), "tune_decode", "--backend", "cpu", "-q", "tune", MODEL, "--shapes", "expert", "--ntok-mix",
                  "1", "--quick", "--out", dir, (char *)NULL);
        _exit(127);
    }
    const double t0 = cli_now();
    double lock_seen = -1;
    bool sent = false;
    int st = 0;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid) break;
        const bool locked = cli_exists(lock);
        if (locked && lock_seen < 0) lock_seen = cli_now();
        if (!sent && ((at == AT_START && locked) || (at == AT_SWEEP && locked && cli_now() - lock_seen > 0.2 &&
                                                     !has_candidate(dir)) ||
                      (at == AT_GATE && has_candidate(dir)))) {
            if (at == AT_GATE) { /* well into the gate */
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            kill(pid, sig);
            sent = true;
            *when = cli_now() - t0;
        }
        if (cli_now() - t0 > LONG) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("the tune did not end");
        }
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    if (!sent) fail_msg("signal %d at %s: the tune ended first (status %d)", sig, phase_name(at), st);
    free(lock);
    return st;
}

static void no_signal_leaves_a_candidate_or_temporary_file(void **state)
{
    (void)state;
    st_model *m = NULL;
    assert_int_equal(st_model_open(MODEL, &m), ST_OK);
    assert_true(st_model_mmvq_shape_count(m) > 0);
    const st_model_mmvq_shape *ms = st_model_mmvq_shape_at(m, 0);
    const st_mmvq_key k = {ms->type, ms->n_rows, ms->n_cols};
    st_model_close(m);
    enum { STOP, IGNORED, FAULT };
    const struct {
        int sig, kind;
        phase at;
    } cases[] = {
        {SIGHUP, STOP, AT_GATE},     {SIGHUP, STOP, AT_SWEEP},    {SIGTERM, STOP, AT_GATE},  {SIGINT, STOP, AT_START},
        {SIGQUIT, STOP, AT_GATE},    {SIGUSR1, STOP, AT_SWEEP},   {SIGALRM, STOP, AT_GATE},  {SIGPIPE, IGNORED, AT_GATE},
        {SIGSEGV, FAULT, AT_GATE},   {SIGABRT, FAULT, AT_SWEEP},
#ifdef SIGSTKFLT
        {SIGSTKFLT, STOP, AT_GATE},
#endif
        /* the real-time ones (issue 26: they ended the process uncleaned) */
        {SIGRTMIN, STOP, AT_START},  {SIGRTMIN + 3, STOP, AT_GATE}, {SIGRTMAX, STOP, AT_START},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *dir = cli_dir();
        char *table = cpu_table(dir, "mine.table", &k, 2);
        size_t n0 = 0;
        char *before = slurp(table, &n0);
        double when = 0;
        const int st = tune_and_signal(dir, cases[i].sig, cases[i].at, &when);
        print_message("%-8s at %-5s (%.2f s): %s %d\n", strsignal(cases[i].sig), phase_name(cases[i].at), when,
                      WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        if (cases[i].kind == STOP) {
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 128 + cases[i].sig)
                fail_msg("%s at %s: status %d, expected exit %d", strsignal(cases[i].sig), phase_name(cases[i].at), st,
                         128 + cases[i].sig);
        } else if (cases[i].kind == IGNORED) {
            /* runs to its end: installed (0), or nothing installed because
             * the gate could not decide (3) or measured the table slower (4);
             * 1 would be an error or different bytes */
            if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3 && WEXITSTATUS(st) != 4))
                fail_msg("%s at %s: status %d, expected exit 0, 3 or 4 (the tune runs to its end)",
                         strsignal(cases[i].sig), phase_name(cases[i].at), st);
        } else {
            /* ends the process: by the signal, or through the handler that
             * was there before (a sanitizer's reports the fault and exits) */
            const bool died = (WIFSIGNALED(st) && WTERMSIG(st) == cases[i].sig) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
            if (!died) fail_msg("%s: status %d, expected the process to end", strsignal(cases[i].sig), st);
        }
        const int left = leftovers(dir);
        if (left) {
            cli_print_dir(dir);
            fail_msg("%s at %s left %d files", strsignal(cases[i].sig), phase_name(cases[i].at), left);
        }
        if (cases[i].kind != IGNORED) { /* stopped: the old table, byte for byte */
            size_t n1 = 0;
            char *after = slurp(table, &n1);
            assert_true(n0 == n1 && !memcmp(before, after, n0));
            free(after);
        }
        assert_int_equal(cli_count(dir, ".table"), 1);
        free(before);
        free(table);
    }
    (void)no_hook;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(long_output_paths_are_never_cut),
        cmocka_unit_test(a_closed_output_pipe_does_not_fail_a_completed_install),
        cmocka_unit_test(the_reservation_follows_the_token_mix),
        cmocka_unit_test(a_re_tune_that_installs_nothing_keeps_the_installed_report),
        cmocka_unit_test(a_second_model_or_shape_set_merges_into_the_one_table),
        cmocka_unit_test(a_folder_the_loader_refuses_is_refused_before_the_sweep),
        cmocka_unit_test(out_that_is_a_file_is_refused_before_the_sweep),
        cmocka_unit_test(read_only_and_full_folders_are_refused_before_the_sweep),
        cmocka_unit_test(no_table_is_installed_without_its_report),
        cmocka_unit_test(install_rolls_back_the_table_when_the_report_fails),
        cmocka_unit_test(the_prefix_is_never_doubled),
        cmocka_unit_test(a_locked_folder_is_refused_at_once),
        cmocka_unit_test(concurrent_tunes_of_one_folder_do_not_interleave),
        cmocka_unit_test(no_signal_leaves_a_candidate_or_temporary_file),
    };
    return cmocka_run_group_tests(tests, NULL, cli_teardown);
}
