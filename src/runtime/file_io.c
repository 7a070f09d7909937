/* Non-blocking, regular-file-only, bounded reads: see file_io.h. */
#define _POSIX_C_SOURCE 200809L
#include "file_io.h"
#include "internal.h"
#include "tmpfiles.h"

#include <stdatomic.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

static st_status sys_fail(const char *path, int e, char *why, int *err)
{
    snprintf(why, ST_FILE_WHY_MAX, "%s", strerror(e));
    if (err) *err = e;
    return st_fail(e == ENOMEM ? ST_ERR_NOMEM : ST_ERR_IO, "%s: cannot read: %s", path, why);
}

st_status st_file_open_regular(const char *path, int *fd, uint64_t *size, char *why, int *err)
{
    char spare[ST_FILE_WHY_MAX];
    if (!why) why = spare;
    why[0] = '\0';
    if (err) *err = 0;
    *fd = -1;
    if (!path) return st_fail(ST_ERR_INVALID_ARG, "open: no path");
    /* O_NONBLOCK: opening a FIFO that has no writer (or a tty, a modem
     * device) would otherwise wait forever before fstat could refuse it. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0) return sys_fail(path, errno, why, err);
    struct stat st;
    if (fstat(f, &st) != 0) {
        const int e = errno;
        close(f);
        return sys_fail(path, e, why, err);
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        snprintf(why, ST_FILE_WHY_MAX, "not a regular file (%s)", kind(st.st_mode));
        return st_fail(ST_ERR_IO, "%s: cannot read: %s", path, why);
    }
    const int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    *size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    return ST_OK;
}

st_status st_file_read_all(const char *path, size_t max, char **buf, size_t *len, char *why, int *err)
{
    char spare[ST_FILE_WHY_MAX];
    if (!why) why = spare;
    *buf = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    ST_TRY(st_file_open_regular(path, &fd, &size, why, err));
    if (size > max) {
        close(fd);
        snprintf(why, ST_FILE_WHY_MAX, "larger than the %zu-byte limit (%llu bytes)", max, (unsigned long long)size);
        return st_fail(ST_ERR_IO, "%s: cannot read: %s", path, why);
    }
    /* The size is a hint: the file may change while it is read, so read
     * until the end, never past MAX + 1. */
    size_t cap = (size_t)size + 1 < 4096 ? 4096 : (size_t)size + 1, n = 0;
    char *p = malloc(cap);
    if (!p) {
        close(fd);
        return sys_fail(path, ENOMEM, why, err);
    }
    for (;;) {
        if (n > max) {
            free(p);
            close(fd);
            snprintf(why, ST_FILE_WHY_MAX, "larger than the %zu-byte limit (it grew while read)", max);
            return st_fail(ST_ERR_IO, "%s: cannot read: %s", path, why);
        }
        if (cap - n < 2) {
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                close(fd);
                return sys_fail(path, ENOMEM, why, err);
            }
            p = q;
            cap *= 2;
        }
        ssize_t r = read(fd, p + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            const int e = errno;
            free(p);
            close(fd);
            return sys_fail(path, e, why, err);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    p[n] = '\0';
    *buf = p;
    *len = n;
    return ST_OK;
}

/* ---- writing ---------------------------------------------------------------- */

long st_table_write_fail_after_bytes = -1;

static int write_all(int fd, const char *p, size_t n)
{
    const long limit = st_table_write_fail_after_bytes;
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

st_status st_file_write_temp(const char *path, const char *text, size_t len, char **tmp_out, int *slot)
{
    static atomic_uint counter;
    *tmp_out = NULL;
    *slot = -1;
    const size_t tn = strlen(path) + 64;
    char *tmp = malloc(tn);
    if (!tmp) return st_fail(ST_ERR_NOMEM, "%s: cannot write: out of memory", path);
    snprintf(tmp, tn, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    const char *step = "create";
    const int sl = st_tmpfile_track(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const bool created = fd >= 0; /* never unlink a file O_EXCL found in the way */
    if (fd < 0) goto fail;
    step = "write";
    if (write_all(fd, text, len) != 0) goto fail;
    step = "sync";
    if (fsync(fd) != 0) goto fail;
    step = "close";
    const int r = close(fd);
    fd = -1;
    if (r != 0) goto fail;
    *tmp_out = tmp;
    *slot = sl;
    return ST_OK;
fail: {
    const int e = errno;
    if (fd >= 0) close(fd);
    if (created) unlink(tmp);
    st_tmpfile_untrack(sl);
    st_status s = st_fail(ST_ERR_IO, "%s: cannot %s %s: %s", path, step, tmp, strerror(e));
    free(tmp);
    return s;
}
}

void (*st_file_write_before_rename)(const char *tmp) = NULL;

st_status st_file_commit(const char *path, const char *tmp, int slot, bool *renamed)
{
    if (renamed) *renamed = false;
    if (st_file_write_before_rename) st_file_write_before_rename(tmp);
    if (rename(tmp, path) != 0) {
        const int e = errno;
        unlink(tmp);
        st_tmpfile_untrack(slot);
        return st_fail(ST_ERR_IO, "%s: cannot rename %s: %s", path, tmp, strerror(e));
    }
    st_tmpfile_untrack(slot);
    if (renamed) *renamed = true;
    /* PATH holds the new bytes now; a failed directory sync only means the
     * rename might not survive a crash. */
    if (sync_parent(path) != 0)
        return st_fail(ST_ERR_IO, "%s: written, but syncing its directory failed: %s", path, strerror(errno));
    return ST_OK;
}

st_status st_file_write_atomic(const char *path, const char *text, size_t len)
{
    if (!path || !path[0] || (!text && len)) return st_fail(ST_ERR_INVALID_ARG, "write: NULL argument");
    char *tmp = NULL;
    int slot = -1;
    st_status s = st_file_write_temp(path, text ? text : "", len, &tmp, &slot);
    if (s == ST_OK) s = st_file_commit(path, tmp, slot, NULL);
    free(tmp);
    return s;
}
