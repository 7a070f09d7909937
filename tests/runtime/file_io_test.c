/* file_io: the files the library reads are opened without blocking and
 * refused unless regular (a FIFO, a device: every reader, the table loader,
 * an engine's STRATA_DECODE_TUNING, GGUF models, reference vectors), reads
 * are bounded, a byte order mark is refused by name, and writes name the
 * file and the system's reason. A reader that blocks is killed by alarm(),
 * which fails the test instead of hanging CI. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/files.h"
#include "file_write.h"
#include "strata/tools/vectors.h"
#include "strata/decode.h"
#include "strata/tools/model.h"
#include "strata/table.h"
#include "strata/variants.h"
#include "table_internal.h"
#include "tmpfiles.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE 10 /* seconds before alarm() ends a blocked test */

static char g_dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/strata-file-io.XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(g_dir);
    return 0;
}

static const char *path_of(const char *name)
{
    static char p[8][512];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 512, "%s/%s", g_dir, name);
    return s;
}

static const char *fifo(const char *name)
{
    const char *p = path_of(name);
    unlink(p);
    assert_int_equal(mkfifo(p, 0644), 0);
    return p;
}

static const char *text_file(const char *name, const char *text, size_t n)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static st_identity cpu_identity(void)
{
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    st_identity id = *st_ctx_identity(c);
    st_ctx_destroy(c);
    return id;
}

static void read_file_refuses_a_fifo_without_blocking(void **state)
{
    (void)state;
    const char *p = fifo("pipe.table");
    alarm(DEADLINE);
    const double t0 = now_s();
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(st_read_file(p, &buf, &len), ST_ERR_IO);
    alarm(0);
    assert_null(buf);
    assert_true(now_s() - t0 < 2);
    assert_non_null(strstr(st_last_error(), "not a regular file (a FIFO)"));
    assert_non_null(strstr(st_last_error(), p));
}

static void read_file_refuses_devices_and_folders(void **state)
{
    (void)state;
    alarm(DEADLINE);
    char *buf = NULL, why[ST_FILE_WHY_MAX];
    size_t len = 0;
    /* /dev/zero never ends: read, it would take all the memory there is */
    assert_int_equal(st_file_read_all("/dev/zero", ST_TABLE_MAX_BYTES, &buf, &len, why, NULL), ST_ERR_IO);
    assert_string_equal(why, "not a regular file (a character device)");
    assert_int_equal(st_file_read_all("/dev/null", ST_TABLE_MAX_BYTES, &buf, &len, why, NULL), ST_ERR_IO);
    assert_string_equal(why, "not a regular file (a character device)");
    assert_int_equal(st_file_read_all(g_dir, ST_TABLE_MAX_BYTES, &buf, &len, why, NULL), ST_ERR_IO);
    assert_string_equal(why, "not a regular file (a directory)");
    assert_int_equal(st_file_read_all(path_of("missing.table"), ST_TABLE_MAX_BYTES, &buf, &len, why, NULL), ST_ERR_IO);
    assert_string_equal(why, strerror(ENOENT));
    alarm(0);
}

static void read_file_refuses_a_file_larger_than_the_limit(void **state)
{
    (void)state;
    const char *p = path_of("huge.table");
    const int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    /* sparse: costs no disk, and the refusal must come before any read */
    assert_int_equal(ftruncate(fd, (off_t)ST_TABLE_MAX_BYTES + 1), 0);
    close(fd);
    char *buf = NULL, why[ST_FILE_WHY_MAX];
    size_t len = 0;
    const double t0 = now_s();
    assert_int_equal(st_file_read_all(p, ST_TABLE_MAX_BYTES, &buf, &len, why, NULL), ST_ERR_IO);
    assert_true(now_s() - t0 < 1);
    char want[64];
    snprintf(want, sizeof want, "larger than the %zu-byte limit", ST_TABLE_MAX_BYTES);
    assert_non_null(strstr(why, want));
    /* a small one still reads, NUL-terminated */
    const char *q = text_file("small.table", "cpu 0 0 1\n", 10);
    assert_int_equal(st_read_file(q, &buf, &len), ST_OK);
    assert_int_equal(len, 10);
    assert_int_equal(buf[10], '\0');
    free(buf);
}

static void table_load_of_a_fifo_is_one_refusal_line(void **state)
{
    (void)state;
    const char *p = fifo("t.table");
    const st_identity id = cpu_identity();
    char msg[ST_TABLE_MSG_MAX];
    st_table *t = NULL;
    alarm(DEADLINE);
    assert_int_equal(st_table_load_msg(p, &id, NULL, &t, msg, sizeof msg), ST_ERR_IO);
    alarm(0);
    assert_null(t);
    char want[700];
    snprintf(want, sizeof want, "decode tuning: %s: cannot read: not a regular file (a FIFO)", p);
    assert_string_equal(msg, want);
}

typedef struct {
    int n;
    char line[1024];
} logcap;

static void cap(void *user, const char *line)
{
    logcap *c = user;
    if (!c->n++) snprintf(c->line, sizeof c->line, "%s", line);
}

/* An engine naming a FIFO in STRATA_DECODE_TUNING gets its refusal line and
 * the defaults, at once. */
static void engine_table_env_naming_a_fifo_does_not_hang(void **state)
{
    (void)state;
    const char *p = fifo("engine.table");
    setenv("STRATA_DECODE_TUNING", p, 1);
    st_ctx *c = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &c), ST_OK);
    logcap lc = {0, ""};
    st_set_log(cap, &lc);
    alarm(DEADLINE);
    const st_status s = st_ctx_load_table_env(c);
    alarm(0);
    st_set_log(NULL, NULL);
    unsetenv("STRATA_DECODE_TUNING");
    assert_int_not_equal(s, ST_OK);
    assert_null(st_ctx_table(c));
    assert_int_equal(lc.n, 1);
    assert_non_null(strstr(lc.line, "not a regular file (a FIFO)"));
    st_ctx_destroy(c);
}

/* A FIFO named *.table in a tables folder is skipped like any file that is
 * no table for this process; the real one is loaded. */
static void tables_folder_with_a_fifo_loads_the_real_table(void **state)
{
    (void)state;
    const st_identity id = cpu_identity();
    char hdr[4 * ST_TOKEN_MAX + 16], text[512];
    st_identity_header(&id, hdr, sizeof hdr);
    const int n = snprintf(text, sizeof text, "%s\nmmvq q8_0 64 64 2\n", hdr);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/tables", g_dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/a.table", sub);
    snprintf(b, sizeof b, "%s/b.table", sub);
    assert_int_equal(mkfifo(a, 0644), 0);
    FILE *f = fopen(b, "w");
    assert_non_null(f);
    fwrite(text, 1, (size_t)n, f);
    fclose(f);
    char msg[ST_TABLE_MSG_MAX];
    st_table *t = NULL;
    alarm(DEADLINE);
    const st_status s = st_table_load_msg(sub, &id, NULL, &t, msg, sizeof msg);
    alarm(0);
    if (s != ST_OK) fail_msg("%s", msg);
    assert_int_equal(st_table_count(t), 1);
    st_table_destroy(t);
    unlink(a);
    unlink(b);
    rmdir(sub);
}

/* A byte order mark (an editor's) is named, in a file and in a folder. */
static void table_with_a_byte_order_mark_is_refused_by_name(void **state)
{
    (void)state;
    const st_identity id = cpu_identity();
    char hdr[4 * ST_TOKEN_MAX + 16], text[512];
    st_identity_header(&id, hdr, sizeof hdr);
    const int n = snprintf(text, sizeof text, "\xef\xbb\xbf%s\nmmvq q8_0 64 64 2\n", hdr);
    char msg[ST_TABLE_MSG_MAX];
    st_table *t = NULL;
    assert_int_equal(st_table_parse(text, (size_t)n, "x.table", &id, NULL, &t, msg, sizeof msg), ST_ERR_PARSE);
    assert_null(t);
    assert_string_equal(msg, "decode tuning: x.table: line 1: starts with a UTF-8 byte order mark (bytes EF BB BF): "
                             "save the table without it");
    assert_int_equal(st_table_parse_any(text, (size_t)n, "x.table", &t, msg, sizeof msg), ST_ERR_PARSE);
    assert_non_null(strstr(msg, "byte order mark"));
    /* on the header line after comments too (found by fuzz_table: such a
     * table parsed, and its formatted text, header first, did not) */
    char later[600];
    const int m = snprintf(later, sizeof later, "# a comment\n\xef\xbb\xbf%s\n", hdr);
    assert_int_equal(st_table_parse_any(later, (size_t)m, "y.table", &t, msg, sizeof msg), ST_ERR_PARSE);
    assert_string_equal(msg, "decode tuning: y.table: line 2: starts with a UTF-8 byte order mark (bytes EF BB BF): "
                             "save the table without it");
    st_identity bom = id;
    snprintf(bom.arch, sizeof bom.arch, "\xef\xbb\xbf%.50s", id.arch);
    assert_int_equal(st_table_create(&bom, &t), ST_ERR_INVALID_ARG); /* it could not be read back */
    /* in a folder the table is still found as this process's, and refused
     * by name (not "no table matches") */
    char sub[600], file[700];
    snprintf(sub, sizeof sub, "%s/bom", g_dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(file, sizeof file, "%s/m.table", sub);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fwrite(text, 1, (size_t)n, f);
    fclose(f);
    assert_int_equal(st_table_load_msg(sub, &id, NULL, &t, msg, sizeof msg), ST_ERR_PARSE);
    assert_non_null(strstr(msg, "byte order mark"));
    unlink(file);
    rmdir(sub);
}

/* The parser's messages quote tokens with every byte that is not printable
 * ASCII as '?', so a table cannot put an escape sequence on the terminal. */
static void table_refusal_quotes_no_control_or_stray_bytes(void **state)
{
    (void)state;
    const st_identity id = cpu_identity();
    char text[128], msg[ST_TABLE_MSG_MAX];
    /* this build's space, so the refusal is the arch's and quotes the token */
    const int n = snprintf(text, sizeof text, "gfx\x1b[2J\x9b 1 2 %d\n", STRATA_SELECTION_SPACE);
    st_table *t = NULL;
    assert_int_not_equal(st_table_parse(text, (size_t)n, "x.table", &id, NULL, &t, msg, sizeof msg), ST_OK);
    assert_non_null(strstr(msg, "made for gfx?[2J?, this device is"));
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20 || *p >= 0x7f) fail_msg("the refusal holds byte 0x%02x: %s", *p, msg);
}

static void gguf_and_reference_vectors_refuse_a_fifo_without_blocking(void **state)
{
    (void)state;
    const char *g = fifo("model.gguf"), *v = fifo("vec.stqv");
    alarm(DEADLINE);
    st_model *m = NULL;
    assert_int_equal(st_model_open(g, &m), ST_ERR_IO);
    assert_null(m);
    assert_non_null(strstr(st_last_error(), "not a regular file (a FIFO)"));
    st_stqv *s = NULL;
    assert_int_equal(st_stqv_open(v, &s), ST_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(st_last_error(), "not a regular file (a FIFO)"));
    assert_int_equal(st_model_open("/dev/zero", &m), ST_ERR_IO);
    assert_int_equal(st_stqv_open("/dev/zero", &s), ST_ERR_IO);
    alarm(0);
}

/* A failed write names the file and the system's reason: here the file-size
 * limit (RLIMIT_FSIZE, SIGXFSZ ignored: EFBIG), in a child process. */
static void failed_write_names_the_file_and_the_reason(void **state)
{
    (void)state;
    const char *p = path_of("limited.table");
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {64, 64};
        setrlimit(RLIMIT_FSIZE, &rl);
        static char text[4096];
        memset(text, 'x', sizeof text);
        char *tmp = NULL;
        int slot = -1;
        const st_status s = st_file_write_temp(p, text, sizeof text, &tmp, &slot);
        dprintf(fds[1], "%d %s", (int)s, st_last_error());
        _exit(0);
    }
    close(fds[1]);
    char got[1024] = "";
    ssize_t n = read(fds[0], got, sizeof got - 1);
    got[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(atoi(got), ST_ERR_IO);
    assert_non_null(strstr(got, "cannot write"));
    assert_non_null(strstr(got, p));
    assert_non_null(strstr(got, strerror(EFBIG)));
    /* nothing left behind */
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, "limited.table")) fail_msg("left behind: %s", e->d_name);
    closedir(d);
}

static void tracked_temporary_files_are_removed_on_demand(void **state)
{
    (void)state;
    const char *a = text_file("a.tmp.1", "x", 1), *b = text_file("b.tmp.2", "y", 1);
    const int sa = st_tmpfile_track(a), sb = st_tmpfile_track(b);
    assert_true(sa >= 0 && sb >= 0 && sa != sb);
    st_tmpfile_untrack(sb);
    st_tmpfiles_remove_all();
    struct stat st;
    assert_int_not_equal(stat(a, &st), 0); /* tracked: removed */
    assert_int_equal(stat(b, &st), 0);     /* untracked: kept */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read_file_refuses_a_fifo_without_blocking),
        cmocka_unit_test(read_file_refuses_devices_and_folders),
        cmocka_unit_test(read_file_refuses_a_file_larger_than_the_limit),
        cmocka_unit_test(table_load_of_a_fifo_is_one_refusal_line),
        cmocka_unit_test(engine_table_env_naming_a_fifo_does_not_hang),
        cmocka_unit_test(tables_folder_with_a_fifo_loads_the_real_table),
        cmocka_unit_test(table_with_a_byte_order_mark_is_refused_by_name),
        cmocka_unit_test(table_refusal_quotes_no_control_or_stray_bytes),
        cmocka_unit_test(gguf_and_reference_vectors_refuse_a_fifo_without_blocking),
        cmocka_unit_test(failed_write_names_the_file_and_the_reason),
        cmocka_unit_test(tracked_temporary_files_are_removed_on_demand),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
