/* Shared by the tests that drive tune_decode as a user does: runs of the
 * CLI with a deadline (a hang fails the test instead of stopping CI),
 * stdout and stderr apart, temporary folders, FIFOs, and a small GGUF
 * writer for models built to break something. */
#ifndef ST_CLI_UTIL_H
#define ST_CLI_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gguf.h"
#include "randgen.h"
#include "strata/decode.h"
#include "strata/formats.h"
#include "strata/limits.h"
#include "strata/table.h"
#include "strata/tools/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Not every test uses every helper. */
#define CLI_FN static __attribute__((unused))

/* TD_CLI in the environment runs another tune_decode (an older build, to
 * see a test fail before its fix). */
CLI_FN const char *cli_path(void)
{
    const char *p = getenv("TD_CLI");
    return p && *p ? p : STRATA_BIN_DIR "/tools/tune_decode";
}

typedef struct {
    int status;    /* wait status; -1 when it ran past the deadline (killed) */
    char *out, *err;
    double seconds;
} cli_run;

/* Every signal back to its default action when the test starts: a test
 * run as a background job of a script inherits SIGINT and SIGQUIT
 * ignored, which tune_decode keeps ignored (as nohup wants), and the tests
 * that stop runs with them would then wait in vain. */
__attribute__((constructor)) static void cli_default_signals(void)
{
    for (int s = 1; s < 65; s++) {
        struct sigaction old;
        if (s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &old) == 0 && old.sa_handler == SIG_IGN) signal(s, SIG_DFL);
    }
}

CLI_FN double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

CLI_FN char *cli_slurp_fd(int fd)
{
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    assert_non_null(b);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (cap - n < 1024) {
            cap *= 2;
            b = realloc(b, cap);
            assert_non_null(b);
        }
        ssize_t r = read(fd, b + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    b[n] = '\0';
    return b;
}

/* Hook run in the child before exec (limits, environment); may be NULL. */
typedef void (*cli_child_fn)(void *user);

/* Runs tune_decode with ARGV (NULL-terminated, without argv[0]) and a
 * deadline of TIMEOUT seconds. stdin is /dev/null. */
CLI_FN cli_run cli_exec(char *const *argv, double timeout, cli_child_fn hook, void *user)
{
    char *av[64];
    int n = 0;
    av[n++] = "tune_decode";
    while (argv[n - 1] && n < 63) {
        av[n] = argv[n - 1];
        n++;
    }
    av[n] = NULL;
    char on[] = "/tmp/strata-cli-out.XXXXXX", en[] = "/tmp/strata-cli-err.XXXXXX";
    const int fo = mkstemp(on), fe = mkstemp(en);
    assert_true(fo >= 0 && fe >= 0);
    unlink(on);
    unlink(en);
    fflush(NULL);
    const double t0 = cli_now();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        dup2(nul, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        if (hook) hook(user);
        execv(cli_path(), av);
        _exit(127);
    }
    cli_run r = {0, NULL, NULL, 0};
    for (;;) {
        int st = 0;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            r.status = st;
            break;
        }
        if (cli_now() - t0 > timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            r.status = -1;
            break;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    r.seconds = cli_now() - t0;
    r.out = cli_slurp_fd(fo);
    r.err = cli_slurp_fd(fe);
    close(fo);
    close(fe);
    return r;
}

CLI_FN cli_run cli(double timeout, ...)
{
    char *argv[64];
    int n = 0;
    va_list ap;
    va_start(ap, timeout);
    while (n < 63 && (argv[n] = va_arg(ap, char *)) != NULL) n++;
    va_end(ap);
    argv[n] = NULL;
    return cli_exec(argv, timeout, NULL, NULL);
}

CLI_FN void cli_free(cli_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

CLI_FN int cli_lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The run ended by itself with exit code CODE (not killed, no signal). */
CLI_FN void cli_expect_exit(const cli_run *r, int code, const char *what)
{
    if (r->status == -1) fail_msg("%s: still running after its deadline (a hang)\nstderr: %s", what, r->err);
    if (!WIFEXITED(r->status))
        fail_msg("%s: ended by signal %d\nstdout: %s\nstderr: %s", what, WIFSIGNALED(r->status) ? WTERMSIG(r->status) : -1,
                 r->out, r->err);
    if (WEXITSTATUS(r->status) != code)
        fail_msg("%s: exit status %d, expected %d\nstdout: %s\nstderr: %s", what, WEXITSTATUS(r->status), code, r->out,
                 r->err);
}

/* Exit CODE, and stderr is exactly one line that holds WANT. */
CLI_FN void cli_expect_one_line(const cli_run *r, int code, const char *want, const char *what)
{
    cli_expect_exit(r, code, what);
    if (cli_lines(r->err) != 1 || !strstr(r->err, want))
        fail_msg("%s: expected one line on stderr holding '%s', got:\n%s", what, want, r->err);
}

/* A usage error (exit 2) whose first stderr line holds WANT. */
CLI_FN void cli_expect_usage(const cli_run *r, const char *want, const char *what)
{
    cli_expect_exit(r, 2, what);
    const char *nl = strchr(r->err, '\n');
    if (!strstr(r->err, want) || (nl && strstr(r->err, want) > nl))
        fail_msg("%s: expected the usage error '%s', got:\n%s", what, want, r->err);
}

/* This process's identity on the CPU backend. */
CLI_FN st_identity cpu_identity(void)
{
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    st_identity id = *st_ctx_identity(c);
    st_ctx_destroy(c);
    return id;
}

/* ---- folders and files -------------------------------------------------------- */

static char g_cli_dirs[32][64];
static int g_cli_ndirs;

CLI_FN void cli_rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *p = malloc(strlen(path) + strlen(e->d_name) + 2);
            sprintf(p, "%s/%s", path, e->d_name);
            cli_rm_tree(p);
            free(p);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

CLI_FN const char *cli_dir(void)
{
    assert_true(g_cli_ndirs < 32);
    char *d = g_cli_dirs[g_cli_ndirs++];
    snprintf(d, 64, "/tmp/strata-cli-test.XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static char g_cli_mounts[8][64];
static int g_cli_nmounts;

/* Mounts a tmpfs of BYTES (read-only when RO) at DIR (one of cli_dir's);
 * false when this process may not (not root, or no mount in this
 * container). Unmounted by cli_teardown, or by cli_umount. */
CLI_FN bool cli_tmpfs(const char *dir, size_t bytes, bool ro)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%zu", bytes);
    if (g_cli_nmounts >= 8 || mount("tmpfs", dir, "tmpfs", ro ? MS_RDONLY : 0, opts) != 0) return false;
    snprintf(g_cli_mounts[g_cli_nmounts++], 64, "%s", dir);
    return true;
}

CLI_FN void cli_umount(const char *dir)
{
    for (int i = 0; i < g_cli_nmounts; i++)
        if (!strcmp(g_cli_mounts[i], dir) && umount(dir) == 0) g_cli_mounts[i][0] = '\0';
}

CLI_FN int cli_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < g_cli_nmounts; i++)
        if (g_cli_mounts[i][0]) umount(g_cli_mounts[i]);
    g_cli_nmounts = 0;
    for (int i = 0; i < g_cli_ndirs; i++) {
        chmod(g_cli_dirs[i], 0755);
        cli_rm_tree(g_cli_dirs[i]);
    }
    g_cli_ndirs = 0;
    return 0;
}

/* DIR/NAME (a static buffer per call site is the caller's business). */
CLI_FN char *cli_join(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    assert_non_null(p);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

CLI_FN char *cli_write(const char *dir, const char *name, const void *data, size_t n)
{
    char *p = cli_join(dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return p;
}

CLI_FN char *cli_fifo(const char *dir, const char *name)
{
    char *p = cli_join(dir, name);
    assert_int_equal(mkfifo(p, 0644), 0);
    return p;
}

/* Prints DIR's entries, one a line (what a failing folder test left). */
CLI_FN void cli_print_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) print_message("  %s\n", e->d_name);
    if (d) closedir(d);
}

CLI_FN bool cli_exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Entries of DIR (not . and ..) whose name contains PART (NULL: all). */
CLI_FN int cli_count(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!part || strstr(e->d_name, part)) n++;
    }
    closedir(d);
    return n;
}

/* Whether S is well-formed UTF-8. */
CLI_FN bool is_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p >= 0xc2 && *p <= 0xdf) ? 2 : (*p >= 0xe0 && *p <= 0xef) ? 3 : (*p >= 0xf0 && *p <= 0xf4) ? 4 : 0;
        if (!n) return false;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xc0) != 0x80) return false;
        if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f))) return false;
        if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))) return false;
        p += n;
    }
    return true;
}

/* Whether S could act on a terminal: not UTF-8 (a raw C1 byte, a stray
 * lead byte), a C0 control other than newline and tab, DEL, or a C1 control
 * written as UTF-8. */
CLI_FN bool has_control(const char *s)
{
    if (!is_utf8(s)) return true;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f) return true;
        if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) return true;
    }
    return false;
}

/* ---- a GGUF writer ------------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} gbuf;

CLI_FN void g_bytes(gbuf *w, const void *src, size_t n)
{
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 64;
        w->p = realloc(w->p, w->cap);
        assert_non_null(w->p);
    }
    if (n) memcpy(w->p + w->n, src, n);
    w->n += n;
}

CLI_FN void g_le(gbuf *w, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
    g_bytes(w, b, (size_t)n);
}

CLI_FN void g_str(gbuf *w, const char *s)
{
    g_le(w, strlen(s), 8);
    g_bytes(w, s, strlen(s));
}

typedef struct {
    const char *name;
    uint64_t ne[3]; /* ne[2] = 1 for a matrix */
    st_qtype type;
} g_tensor;

typedef struct {
    const char *arch, *name;
    int64_t expert_count, expert_used; /* -1: absent */
    const g_tensor *t;
    int n_t;
} g_model;

/* A GGUF v3 file of M with valid random blocks (st_random_blocks) as data. */
CLI_FN char *cli_gguf(const char *dir, const char *file, const g_model *m)
{
    gbuf w = {0}, kv = {0};
    uint64_t n_kv = 0;
    char key[128];
    g_str(&kv, "general.architecture");
    g_le(&kv, ST_GGUF_STRING, 4);
    g_str(&kv, m->arch);
    n_kv++;
    if (m->name) {
        g_str(&kv, "general.name");
        g_le(&kv, ST_GGUF_STRING, 4);
        g_str(&kv, m->name);
        n_kv++;
    }
    if (m->expert_count >= 0) {
        snprintf(key, sizeof key, "%s.expert_count", m->arch);
        g_str(&kv, key);
        g_le(&kv, ST_GGUF_UINT32, 4);
        g_le(&kv, (uint64_t)m->expert_count, 4);
        n_kv++;
    }
    if (m->expert_used >= 0) {
        snprintf(key, sizeof key, "%s.expert_used_count", m->arch);
        g_str(&kv, key);
        g_le(&kv, ST_GGUF_UINT32, 4);
        g_le(&kv, (uint64_t)m->expert_used, 4);
        n_kv++;
    }
    g_bytes(&w, "GGUF", 4);
    g_le(&w, 3, 4);
    g_le(&w, (uint64_t)m->n_t, 8);
    g_le(&w, n_kv, 8);
    g_bytes(&w, kv.p, kv.n);
    uint64_t off = 0, sizes[16];
    assert_true(m->n_t <= 16);
    for (int i = 0; i < m->n_t; i++) {
        const g_tensor *t = &m->t[i];
        const uint32_t dims = t->ne[2] > 1 ? 3 : 2;
        g_str(&w, t->name);
        g_le(&w, dims, 4);
        for (uint32_t d = 0; d < dims; d++) g_le(&w, t->ne[d], 8);
        g_le(&w, (uint64_t)t->type, 4);
        g_le(&w, off, 8);
        sizes[i] = (uint64_t)st_qtype_row_bytes(t->type, (int64_t)t->ne[0]) * t->ne[1] * (t->ne[2] ? t->ne[2] : 1);
        off = (off + sizes[i] + 31) / 32 * 32;
    }
    while (w.n % 32) g_bytes(&w, "\0", 1);
    st_rng rng;
    st_rng_seed(&rng, 7);
    for (int i = 0; i < m->n_t; i++) {
        const g_tensor *t = &m->t[i];
        uint8_t *data = calloc(1, (size_t)sizes[i] + 32);
        assert_non_null(data);
        st_random_blocks(&rng, t->type, (int64_t)(t->ne[1] * (t->ne[2] ? t->ne[2] : 1)), (int64_t)t->ne[0], data);
        g_bytes(&w, data, (size_t)((sizes[i] + 31) / 32 * 32));
        free(data);
    }
    char *p = cli_write(dir, file, w.p, w.n);
    free(w.p);
    free(kv.p);
    return p;
}

#endif
