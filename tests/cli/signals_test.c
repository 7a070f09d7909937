/* Every signal tune_decode handles (tools/tune_decode/td_signals.c: the
 * stop signals, the real-time ones, the ignored and the fault signals) and
 * SIGKILL, raised at every instant of a tune: the lock, the settling of
 * the folder, the probe, each shape of the sweep, the gate's candidate and
 * each token count of the gate, every write, link and rename of the
 * install (issue 26). A hook raises the signal at step N
 * (st_file_kill_at_step / st_file_kill_signal, file_write.h), so no timing
 * is involved and no full tune runs per instant: the child runs the tune as
 * the CLI does (td_signals_begin around st_tune_run, the stop flag polled
 * by the library) on one small shape, with the default slowed so a variant
 * wins and the gate runs.
 *
 * After each run the folder holds the old set (table, report, page,
 * manifest) or the new one, never a mix: a caught or ignored signal leaves
 * no temporary file, candidate, journal, link, probe or lock at all; SIGKILL
 * and the fault signals leave what the next run of the folder settles
 * (checked after it). The exit status says which: 128+N stopped (the old
 * set), 0 installed (the new set), 3 or 4 the gate installed nothing; a
 * stop signal that lands before the install's commit point (its journal,
 * st_file_commit_step) always stops the run. */
#include "cli_util.h"

#include <sys/resource.h>

#include "commands.h"
#include "file_write.h"
#include "out_manifest.h"
#include "strata/tools/tuner.h"
#include "tune_out.h"

/* the CPU context's test hook (src/runtime/ctx_internal.h) */
void st_ctx_test_slow_default(st_ctx *c, double extra);

#define SHAPE "mmvq q8_0 256 256"
#define TABLE "mine.table"
#define JSON "strata-shapes.autotune.json"
#define HTML "strata-shapes.autotune.html"
#define MANIFEST "strata-shapes.autotune.manifest"

static char *slurp(const char *path)
{
    char *b = NULL;
    size_t n = 0;
    if (st_read_file(path, &b, &n) != ST_OK) return NULL;
    return b;
}

static char *g_old_table;

/* The old set: this identity's table with a row for the shape, its report,
 * page and manifest. */
static void old_set(const char *dir)
{
    cli_rm_tree(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    if (!g_old_table) {
        const st_identity id = cpu_identity();
        st_table *t = NULL;
        assert_int_equal(st_table_create(&id, &t), ST_OK);
        assert_int_equal(st_table_add_comment(t, "the old campaign"), ST_OK);
        const st_mmvq_key k = {ST_Q8_0, 256, 256};
        assert_int_equal(st_table_add_mmvq(t, &k, 1), ST_OK);
        size_t len = 0;
        assert_int_equal(st_table_format(t, &g_old_table, &len), ST_OK);
        st_table_destroy(t);
    }
    free(cli_write(dir, TABLE, g_old_table, strlen(g_old_table)));
    free(cli_write(dir, JSON, "old json", 8));
    free(cli_write(dir, HTML, "old html", 8));
    const char *names[3] = {TABLE, JSON, HTML};
    const st_mf_role roles[3] = {ST_MF_TABLE, ST_MF_REPORT, ST_MF_PAGE};
    char *p = cli_join(dir, MANIFEST);
    assert_int_equal(st_manifest_write_files(dir, p, names, roles, 3), ST_OK);
    free(p);
}

/* "old" or "new": the whole old set, or the whole new one with its
 * manifest listing its bytes; anything else fails. */
static const char *which_set(const char *dir, const char *what)
{
    const char *names[3] = {TABLE, JSON, HTML};
    const st_mf_role roles[3] = {ST_MF_TABLE, ST_MF_REPORT, ST_MF_PAGE};
    const char *olds[3] = {g_old_table, "old json", "old html"};
    char *mp = cli_join(dir, MANIFEST), *mt = slurp(mp);
    st_manifest m;
    const bool mok = mt && st_manifest_parse(mt, strlen(mt), &m) == ST_OK;
    int n_old = 0, n_new = 0;
    for (int i = 0; i < 3; i++) {
        char *p = cli_join(dir, names[i]), *v = slurp(p), hex[ST_SHA256_HEX] = "";
        if (v) st_sha256_buf(v, strlen(v), hex);
        const bool listed = mok && st_manifests_prove(&m, 1, roles[i], names[i], hex) == 0;
        n_old += v && !strcmp(v, olds[i]) && listed;
        n_new += v && strcmp(v, olds[i]) && listed;
        free(p);
        free(v);
    }
    free(mp);
    free(mt);
    if (n_old == 3) return "old";
    if (n_new == 3) return "new";
    cli_print_dir(dir);
    fail_msg("%s: a mixed set (%d old, %d new files listed by the manifest)", what, n_old, n_new);
    return NULL;
}

/* What a run may leave that is not an output: LEVEL 0 nothing at all; 1
 * (after SIGKILL or a fault) the journal and the links to the old files,
 * which the next run settles. */
static void no_litter(const char *dir, int level, const char *what)
{
    const char *parts[] = {".tmp.", ".candidate", ".strata-tune-probe", ".strata-tune.lock", ".strata-tune.journal",
                           ".old."};
    const size_t n = sizeof parts / sizeof parts[0] - (level ? 2 : 0);
    for (size_t i = 0; i < n; i++)
        if (cli_count(dir, parts[i]) != 0) {
            cli_print_dir(dir);
            fail_msg("%s: '%s' left in the folder", what, parts[i]);
        }
}

/* Runs the tune in a child that raises SIG at step STEP (-1: none); returns
 * its wait status and, when it exits, the steps it took in *STEPS. GATE:
 * the default slowed so a variant wins and the gate runs on a candidate
 * (else --no-verify: the install follows the sweep at once). */
static long g_commit_step; /* the last run's commit point (st_file_commit_step), -1 when none */

static int tune_child(const char *dir, long step, int sig, bool gate, long *steps)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        const struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        /* a process's own fault handling, as tune_decode starts with (not
         * cmocka's, which would carry on with the test in this child) */
        static const int faults[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};
        for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) signal(faults[i], SIG_DFL);
        st_ctx *c = NULL;
        if (st_ctx_create(ST_BACKEND_CPU, 0, &c) != ST_OK) _exit(10);
        if (gate) st_ctx_test_slow_default(c, 4.0); /* a variant wins: the gate runs on a candidate */
        static volatile int stop;
        static const char *const shapes[] = {SHAPE};
        static const int mix[] = {1};
        st_tune_options o;
        st_tune_options_default(&o);
        o.out_dir = dir;
        o.shapes = shapes;
        o.n_shapes = 1;
        o.ntok_mix = mix;
        o.n_ntok_mix = 1;
        o.do_expert = false;
        o.quick = true;
        o.quiet = true;
        o.rounds = 6;
        o.gate_budget_s = 0.2;
        o.no_verify = !gate;
        o.stop = &stop;
        st_tune_result r;
        st_tune_result_init(&r);
        td_signals_begin(&stop);
        st_file_steps = 0;
        st_file_kill_signal = sig;
        st_file_kill_at_step = step;
        const st_status s = st_tune_run(c, &o, &r);
        st_file_kill_at_step = -1;
        td_signals_end();
        const int caught = td_signals_caught();
        const long taken[2] = {st_file_steps, st_file_commit_step};
        (void)!write(fd[1], taken, sizeof taken);
        if (s != ST_OK && s != ST_ERR_INTERRUPTED && s != ST_ERR_UNDECIDED && s != ST_ERR_REFUSED)
            fprintf(stderr, "tune: %s\n", st_last_error());
        st_tune_result_clear(&r);
        st_ctx_destroy(c);
        _exit(s == ST_ERR_INTERRUPTED ? 128 + (caught ? caught : 99) : s == ST_OK ? 0 : s == ST_ERR_UNDECIDED ? 3
                                                                                  : s == ST_ERR_REFUSED    ? 4
                                                                                                           : 1);
    }
    close(fd[1]);
    long taken[2] = {-1, -1};
    if (read(fd[0], taken, sizeof taken) != (ssize_t)sizeof taken) taken[0] = taken[1] = -1;
    close(fd[0]);
    g_commit_step = taken[1];
    int st = 0;
    waitpid(pid, &st, 0);
    if (steps) *steps = taken[0];
    return st;
}

/* The next run of the folder: open under the lock (settles it), close. */
static void next_run(const char *dir)
{
    const st_identity id = cpu_identity();
    st_tune_out out;
    if (st_tune_out_open(&out, dir, "shapes", -1, &id, false, 4096) != ST_OK) fail_msg("the next run: %s", st_last_error());
    st_tune_out_close(&out);
}

typedef struct {
    int sig;
    td_sig_kind kind; /* SIGKILL counts as a fault: nothing runs after it */
} sig_case;

/* One run stopped by C at STEP; checks the folder; returns whether the
 * signal landed (the run took that many steps). */
static bool one(const char *dir, const sig_case *c, long step, bool gate, int *olds, int *news)
{
    char what[96];
    snprintf(what, sizeof what, "%s at step %ld", strsignal(c->sig), step);
    old_set(dir);
    long taken = 0;
    const double t0 = cli_now();
    const int st = tune_child(dir, step, c->sig, gate, &taken);
    if (getenv("SIGNALS_TEST_VERBOSE"))
        print_message("%-24s step %3ld: status 0x%x, %ld steps, %.2f s\n", strsignal(c->sig), step, st, taken, cli_now() - t0);
    const bool exited = WIFEXITED(st), by_sig = WIFSIGNALED(st) && WTERMSIG(st) == c->sig;
    const int code = exited ? WEXITSTATUS(st) : -1;
    if (exited && taken >= 0 && taken < step) return false; /* the run ended before that step */
    const char *set = NULL;
    if (c->kind == TD_SIG_FAULT) {
        /* ends the process (by the signal, or a sanitizer's report and exit) */
        if (!by_sig && !(exited && code != 0 && code != 3 && code != 4 && code < 128))
            fail_msg("%s: status %d, expected the process to end", what, st);
        if (c->sig != SIGKILL) no_litter(dir, 1, what); /* the handler removed its temporary files and the lock */
        next_run(dir);
        set = which_set(dir, what);
        no_litter(dir, 0, what);
    } else {
        if (!exited) fail_msg("%s: ended by signal %d, expected an exit", what, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        no_litter(dir, 0, what); /* cleaned up, without a next run */
        set = which_set(dir, what);
        const bool stopped = code == 128 + c->sig;
        if (c->kind == TD_SIG_IGNORED && stopped) fail_msg("%s: an ignored signal stopped the run", what);
        if (!stopped && code != 0 && code != 3 && code != 4) fail_msg("%s: exit %d", what, code);
        /* the exit status says what happened to the files */
        if ((stopped || code == 3 || code == 4) != !strcmp(set, "old"))
            fail_msg("%s: exit %d but the folder holds the %s set", what, code, set);
        /* a stop that lands before the install's commit point stops the run
         * (nothing installed, 128+N); only one after it lets the install
         * complete */
        if (c->kind == TD_SIG_STOP && !stopped && (g_commit_step < 0 || step <= g_commit_step))
            fail_msg("%s: the stop landed before the commit point (step %ld) but the run went on (exit %d)", what,
                     g_commit_step, code);
    }
    *olds += !strcmp(set, "old");
    *news += !strcmp(set, "new");
    return true;
}

static void every_signal_at_every_instant_leaves_the_old_or_the_new_set(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    sig_case cases[96];
    int sigs[96];
    td_sig_kind kinds[96];
    const size_t nh = td_signals_all(sigs, kinds, 95);
    size_t n = 0;
    for (size_t i = 0; i < nh; i++) cases[n++] = (sig_case){sigs[i], kinds[i]};
    cases[n++] = (sig_case){SIGKILL, TD_SIG_FAULT};
    /* the run's steps, uninterrupted: with --no-verify (the lock, the
     * probe, the shape, then the install's writes, links, journal and
     * renames) and with the gate (its candidate and token counts between) */
    long total = 0, total_gate = 0;
    for (int g = 0; g < 2; g++) {
        old_set(dir);
        const int st = tune_child(dir, -1, SIGKILL, g, g ? &total_gate : &total);
        if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3 && WEXITSTATUS(st) != 4))
            fail_msg("the uninterrupted tune%s: status %d", g ? " with the gate" : "", st);
    }
    if (total < 20 || total_gate < 12) fail_msg("the tune took %ld steps, %ld with the gate", total, total_gate);
    print_message("a tune of one shape takes %ld steps (%ld with the gate); %zu signals\n", total, total_gate, n);
    int olds = 0, news = 0, runs = 0;
    int *landed = calloc(n, sizeof *landed);
    /* every instant, each with another signal */
    for (long k = 1; k <= total; k++) {
        const size_t i = (size_t)k % n;
        landed[i] += one(dir, &cases[i], k, false, &olds, &news);
        runs++;
    }
    /* every signal in the install too, and in the open or the sweep when
     * the rotation above gave it no instant */
    for (size_t i = 0; i < n; i++)
        for (int j = landed[i] ? 1 : 0; j < 2; j++) {
            const long k = j ? 5 + ((long)i * 7) % (total - 4) : 1 + (long)i % 4;
            landed[i] += one(dir, &cases[i], k, false, &olds, &news);
            runs++;
        }
    /* the gate's instants (its candidate written, its first token counts),
     * each with another signal that stops or ends the run (an ignored one
     * would wait for the whole gate) */
    for (long k = 5, i = 0; k <= 12 && k <= total_gate; k++, i++) {
        while (cases[i % n].kind == TD_SIG_IGNORED) i++;
        one(dir, &cases[i % n], k, true, &olds, &news);
        runs++;
    }
    for (size_t i = 0; i < n; i++)
        if (landed[i] < 2) fail_msg("%s landed at %d instants only", strsignal(cases[i].sig), landed[i]);
    print_message("%d runs: %d left the old set, %d the new\n", runs, olds, news);
    assert_true(olds > 0 && news > 0);
    free(landed);
    free(g_old_table);
    g_old_table = NULL;
}

/* Outside a tune (report -o, the --html pages, table list's index, prune's
 * lock): with td_signals_guard (main), every stop signal removes the live
 * temporary file and the folder's lock, then ends the process as that
 * signal does. */
static void a_stop_signal_outside_a_tune_leaves_no_litter(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    int sigs[96];
    td_sig_kind kinds[96];
    const size_t nh = td_signals_all(sigs, kinds, 95);
    int tried = 0;
    for (size_t i = 0; i < nh; i++) {
        if (kinds[i] != TD_SIG_STOP) continue;
        const pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            const struct rlimit no_core = {0, 0}; /* SIGQUIT, SIGXCPU: no core file */
            setrlimit(RLIMIT_CORE, &no_core);
            td_signals_guard();
            st_folder_lock_t l;
            char *path = cli_join(dir, "page.html"), *tmp = NULL;
            int slot = -1;
            if (st_folder_lock(dir, "prune", &l) != ST_OK || st_file_write_temp(path, "page", 4, &tmp, &slot) != ST_OK)
                _exit(10);
            raise(sigs[i]);
            _exit(11); /* not ended by the signal */
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != sigs[i])
            fail_msg("%s: the process was not ended by the signal (status %d)", strsignal(sigs[i]), st);
        if (cli_count(dir, NULL) != 0) {
            cli_print_dir(dir);
            fail_msg("%s: litter was left", strsignal(sigs[i]));
        }
        tried++;
    }
    print_message("%d stop signals outside a tune: the process ended by each, nothing left\n", tried);
    assert_true(tried >= 40);
}

/* The bits of signal SIG in the hex mask of /proc/PID/status's FIELD. */
static bool proc_mask_has(pid_t pid, const char *field, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    unsigned long long m = 0;
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field)) && line[strlen(field)] == ':') {
            m = strtoull(line + strlen(field) + 1, NULL, 16);
            found = true;
        }
    fclose(f);
    return found && (m >> (sig - 1)) & 1;
}

/* tune_decode itself (main) installs the guard for every command, and keeps
 * a signal it was started with ignored (nohup: SIGHUP): a long `bench`
 * (no tune's stop flag) catches SIGTERM, SIGIO and the real-time signals,
 * ignores SIGHUP, and SIGTERM ends it as SIGTERM does, leaving nothing. */
static void tune_decode_guards_every_command_and_keeps_nohup(void **state)
{
    (void)state;
    const char *dir = cli_dir();
    char *page = cli_join(dir, "p.html");
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGHUP, SIG_IGN);
        const int nul = open("/dev/null", O_RDWR);
        dup2(nul, 1);
        dup2(nul, 2);
        execl(cli_path(), "tune_decode", "--backend", "cpu", "bench", "--no-suite", "--shape", "mmvq q8_0 4096 14336",
              "--html", page, (char *)NULL);
        _exit(127);
    }
    bool ready = false;
    for (int i = 0; i < 500 && !ready; i++) { /* until main ran: the bench takes minutes then */
        ready = proc_mask_has(pid, "SigCgt", SIGTERM);
        if (!ready) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    const bool io = proc_mask_has(pid, "SigCgt", SIGIO), rt = proc_mask_has(pid, "SigCgt", SIGRTMIN + 3),
               hup_ign = proc_mask_has(pid, "SigIgn", SIGHUP), hup_cgt = proc_mask_has(pid, "SigCgt", SIGHUP);
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!ready) fail_msg("tune_decode does not catch SIGTERM outside a tune");
    if (!io || !rt) fail_msg("tune_decode does not catch SIGIO (%d) or SIGRTMIN+3 (%d)", io, rt);
    if (!hup_ign || hup_cgt) fail_msg("SIGHUP, ignored at the start (nohup), was not kept ignored");
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM) fail_msg("SIGTERM did not end the process as SIGTERM (status %d)", st);
    if (cli_count(dir, NULL) != 0) {
        cli_print_dir(dir);
        fail_msg("litter was left");
    }
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(a_stop_signal_outside_a_tune_leaves_no_litter, cli_teardown),
        cmocka_unit_test_teardown(tune_decode_guards_every_command_and_keeps_nohup, cli_teardown),
        cmocka_unit_test_teardown(every_signal_at_every_instant_leaves_the_old_or_the_new_set, cli_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
