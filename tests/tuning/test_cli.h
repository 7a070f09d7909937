/* Helpers of the tuning-layer tests that write folders and run the CLI: temporary folders removed
 * at the end, whole files, and running tune_decode with its output
 * captured. Static functions: each test executable has its own copy. */
#ifndef ST_TEST_CLI_H
#define ST_TEST_CLI_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLI STRATA_BIN_DIR "/tools/tune_decode"

/* each test uses some of these */
#define ST_TEST_HELPER static __attribute__((unused))

static char g_dirs[32][64];
static int g_ndirs;

ST_TEST_HELPER const char *make_dir(void)
{
    assert_true(g_ndirs < 32);
    char *d = g_dirs[g_ndirs++];
    snprintf(d, 64, "/tmp/strata-tuning-test.XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

ST_TEST_HELPER void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[1200];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

ST_TEST_HELPER int teardown_dirs(void **state)
{
    (void)state;
    for (int i = 0; i < g_ndirs; i++) remove_dir(g_dirs[i]);
    g_ndirs = 0;
    return 0;
}

ST_TEST_HELPER char *path_in(const char *dir, const char *name)
{
    static char buf[8][1200];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

ST_TEST_HELPER bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* The whole file (NUL-terminated); fails the test when it cannot be read. */
ST_TEST_HELPER char *slurp(const char *path, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    if (st_read_file(path, &buf, &n) != ST_OK) fail_msg("cannot read %s: %s", path, st_last_error());
    if (len) *len = n;
    return buf;
}

ST_TEST_HELPER void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* Runs the CLI with ARGV (NULL-terminated, argv[0] included); stdout into
 * *OUT, stderr into *ERR (may be NULL: then into *OUT too). Returns the
 * exit status (or 128 + signal). */
ST_TEST_HELPER int run_cli(char *const argv[], char **out, char **err)
{
    int fo[2], fe[2];
    assert_int_equal(pipe(fo), 0);
    assert_int_equal(pipe(fe), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fo[1], 1);
        dup2(err ? fe[1] : fo[1], 2);
        close(fo[0]), close(fo[1]), close(fe[0]), close(fe[1]);
        execv(CLI, argv);
        _exit(127);
    }
    close(fo[1]);
    close(fe[1]);
    char *bufs[2] = {NULL, NULL};
    const int fds[2] = {fo[0], fe[0]};
    for (int k = 0; k < 2; k++) { /* stderr is small: reading stdout first cannot block the child for long */
        size_t cap = 4096, n = 0;
        char *b = malloc(cap);
        assert_non_null(b);
        for (;;) {
            if (cap - n < 1024) {
                cap *= 2;
                b = realloc(b, cap);
                assert_non_null(b);
            }
            ssize_t r = read(fds[k], b + n, cap - n - 1);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            n += (size_t)r;
        }
        b[n] = '\0';
        close(fds[k]);
        bufs[k] = b;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) assert_int_equal(errno, EINTR);
    *out = bufs[0];
    if (err) *err = bufs[1];
    else free(bufs[1]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#endif
