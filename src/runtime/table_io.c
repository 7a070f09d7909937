/* Tables and files: reading, loading (a file, or the one matching table of
 * a directory) with its single log line, and the atomic write. */
#define _POSIX_C_SOURCE 200809L
#include "table_internal.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

long st_table_write_fail_after_bytes = -1;

/* ---- reading ------------------------------------------------------------- */

st_status st_read_file_err(const char *path, char **buf, size_t *len, int *err)
{
    int e = 0;
    if (err) *err = 0;
    if (!path || !buf || !len) return st_fail(ST_ERR_INVALID_ARG, "read_file: NULL argument");
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        e = errno;
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        e = EISDIR;
        goto fail;
    }
    /* The size is only a hint: the file may grow or be a pipe. */
    size_t cap = (S_ISREG(st.st_mode) && st.st_size > 0) ? (size_t)st.st_size + 1 : 4096;
    size_t n = 0;
    char *p = malloc(cap);
    if (!p) {
        e = ENOMEM;
        goto fail;
    }
    for (;;) {
        if (cap - n < 2) {
            if (cap > ((size_t)-1) / 2) {
                free(p);
                e = EFBIG;
                goto fail;
            }
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                e = ENOMEM;
                goto fail;
            }
            p = q;
            cap *= 2;
        }
        ssize_t r = read(fd, p + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            e = errno;
            free(p);
            goto fail;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    p[n] = '\0';
    *buf = p;
    *len = n;
    return ST_OK;
fail:
    if (fd >= 0) close(fd);
    if (err) *err = e;
    return st_fail(e == ENOMEM ? ST_ERR_NOMEM : ST_ERR_IO, "%s: cannot read: %s", path,
                   strerror(e));
}

st_status st_read_file(const char *path, char **buf, size_t *len)
{
    return st_read_file_err(path, buf, len, NULL);
}

/* ---- loading ------------------------------------------------------------- */

/* The one line of a load goes into MSG (never to a log sink here). */
static void say(char *msg, size_t n, const char *fmt, ...) ST_PRINTF(3, 4);
static void say(char *msg, size_t n, const char *fmt, ...)
{
    if (!msg || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
}

static st_status load_file(const char *path, const st_identity *id, const st_dispatch_config *cfg,
                           st_table **out, char *msg, size_t msglen)
{
    char *buf = NULL;
    size_t len = 0;
    int err = 0;
    st_status s = st_read_file_err(path, &buf, &len, &err);
    if (s != ST_OK) {
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", path, strerror(err ? err : EIO));
        return s;
    }
    s = st_table_parse(buf, len, path, id, cfg, out, msg, msglen);
    free(buf);
    return s;
}

static bool is_table_name(const char *name)
{
    static const char ext[] = ".table";
    size_t n = strlen(name), e = sizeof ext - 1;
    return name[0] != '.' && n > e && strcmp(name + n - e, ext) == 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    bool slash = d > 0 && dir[d - 1] == '/';
    char *p = malloc(d + n + 2);
    if (p) snprintf(p, d + n + 2, "%s%s%s", dir, slash ? "" : "/", name);
    return p;
}

/* The *.table regular files of DIR, sorted by name. */
static st_status list_tables(const char *dir, char ***names, size_t *count, int *err)
{
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        *err = errno;
        return ST_ERR_IO;
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    st_status s = ST_OK;
    struct dirent *e;
    while (s == ST_OK && (e = readdir(d)) != NULL) {
        if (!is_table_name(e->d_name)) continue;
        char *full = join(dir, e->d_name);
        struct stat st;
        bool regular = full && stat(full, &st) == 0 && S_ISREG(st.st_mode);
        free(full);
        if (!regular) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **q = realloc(v, cap * sizeof *v);
            if (!q) {
                s = ST_ERR_NOMEM;
                break;
            }
            v = q;
        }
        if (!(v[n] = strdup(e->d_name)))
            s = ST_ERR_NOMEM;
        else
            n++;
    }
    closedir(d);
    if (s != ST_OK) {
        for (size_t i = 0; i < n; i++) free(v[i]);
        free(v);
        *err = ENOMEM;
        return s;
    }
    if (n) qsort(v, n, sizeof *v, cmp_names);
    *names = v;
    *count = n;
    return ST_OK;
}

/* Whether the header and device line of the file at PATH match ID
 * (quietly). */
static bool header_matches(const char *path, const st_identity *id)
{
    char *buf = NULL;
    size_t len = 0;
    st_identity hdr;
    bool ok = st_read_file_err(path, &buf, &len, NULL) == ST_OK &&
              st_table_read_header(buf, len, &hdr) == ST_OK && st_identity_same_device(&hdr, id);
    free(buf);
    return ok;
}

static st_status load_dir(const char *dir, const st_identity *id, const st_dispatch_config *cfg,
                          st_table **out, char *msg, size_t msglen)
{
    char **names = NULL;
    size_t n = 0;
    int err = 0;
    st_status s = list_tables(dir, &names, &n, &err);
    if (s != ST_OK) {
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", dir, strerror(err ? err : EIO));
        return s;
    }
    size_t matches = 0, first = 0;
    char list[ST_TABLE_MSG_MAX / 2];
    size_t at = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char *full = join(dir, names[i]);
        bool m = full && header_matches(full, id);
        free(full);
        if (!m) continue;
        if (matches++ == 0) first = i;
        if (at < sizeof list) {
            int w = snprintf(list + at, sizeof list - at, "%s%s", at ? ", " : "", names[i]);
            if (w > 0) at += (size_t)w;
        }
    }
    if (matches == 1) {
        char *full = join(dir, names[first]);
        s = full ? load_file(full, id, cfg, out, msg, msglen) : ST_ERR_NOMEM;
        if (!full) say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", dir, strerror(ENOMEM));
        free(full);
    } else if (matches == 0) {
        char hdr[5 * ST_TOKEN_MAX + 32];
        const int w = st_identity_header(id, hdr, sizeof hdr);
        if (id->model[0] && w > 0 && (size_t)w < sizeof hdr)
            snprintf(hdr + w, sizeof hdr - (size_t)w, ", device %s", id->model);
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: no table matches this process (%s); %zu tables skipped", dir, hdr, n);
        s = st_fail(ST_ERR_NOT_FOUND, "%s: no table matches this process", dir);
    } else {
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: %zu tables match this process (%s): keep one", dir, matches, list);
        s = st_fail(ST_ERR_REFUSED, "%s: %zu tables match this process", dir, matches);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return s;
}

st_status st_table_load_msg(const char *path, const st_identity *id, const st_dispatch_config *cfg,
                            st_table **out, char *msg, size_t msglen)
{
    if (msg && msglen) msg[0] = '\0';
    if (out) *out = NULL;
    if (!path || !id || !out) {
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot load: invalid arguments", path ? path : "(null)");
        return st_fail(ST_ERR_INVALID_ARG, "table_load: NULL argument");
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", path, strerror(e));
        return st_fail(ST_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) return load_dir(path, id, cfg, out, msg, msglen);
    return load_file(path, id, cfg, out, msg, msglen);
}

st_status st_table_load(const char *path, const st_identity *id, const st_dispatch_config *cfg,
                        st_table **out)
{
    char msg[ST_TABLE_MSG_MAX];
    st_status s = st_table_load_msg(path, id, cfg, out, msg, sizeof msg);
    st_log("%s", msg);
    return s;
}

/* ---- the atomic write ---------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
    long limit = st_table_write_fail_after_bytes;
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done;
        if (limit >= 0) {
            if (done >= (size_t)limit) {
                errno = EIO;
                return -1;
            }
            if (chunk > (size_t)limit - done) chunk = (size_t)limit - done;
        }
        ssize_t w = write(fd, p + done, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

/* fsync of the directory holding PATH, so the rename itself is durable. */
static int sync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    int r = fsync(fd);
    /* Some file systems cannot sync a directory; the rename still stands. */
    if (r != 0 && (errno == EINVAL || errno == EROFS)) r = 0;
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

void (*st_file_write_before_rename)(const char *tmp) = NULL;

st_status st_file_write_atomic(const char *path, const char *text, size_t len)
{
    static atomic_uint counter;
    if (!path || !path[0] || (!text && len)) return st_fail(ST_ERR_INVALID_ARG, "write: NULL argument");
    size_t tn = strlen(path) + 64;
    char *tmp = malloc(tn);
    if (!tmp) return st_fail(ST_ERR_NOMEM, "write: out of memory");
    snprintf(tmp, tn, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    const char *step = "create";
    int r = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    bool created = fd >= 0; /* never unlink a file O_EXCL found in the way */
    if (fd < 0) goto fail;
    step = "write";
    if (write_all(fd, text, len) != 0) goto fail;
    step = "sync";
    if (fsync(fd) != 0) goto fail;
    step = "close";
    r = close(fd);
    fd = -1;
    if (r != 0) goto fail;
    if (st_file_write_before_rename) st_file_write_before_rename(tmp);
    step = "rename";
    if (rename(tmp, path) != 0) goto fail;
    free(tmp);
    /* PATH holds the new content now; a failed directory sync only means the
     * rename might not survive a crash. */
    if (sync_parent(path) != 0)
        return st_fail(ST_ERR_IO, "%s: written, but syncing its directory failed: %s", path,
                       strerror(errno));
    return ST_OK;
fail: {
    int e = errno;
    if (fd >= 0) close(fd);
    if (created) unlink(tmp);
    st_status s = st_fail(ST_ERR_IO, "%s: cannot %s %s: %s", path, step, tmp, strerror(e));
    free(tmp);
    return s;
}
}

st_status st_table_write_atomic(const st_table *t, const char *path)
{
    if (!t || !path || !path[0]) return st_fail(ST_ERR_INVALID_ARG, "table_write: NULL argument");
    char *text = NULL;
    size_t len = 0;
    ST_TRY(st_table_format(t, &text, &len));
    st_status s = st_file_write_atomic(path, text, len);
    free(text);
    return s;
}
