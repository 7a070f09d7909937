/* Non-blocking, regular-file-only, bounded reads (strata/files.h). */
#define _POSIX_C_SOURCE 200809L
#include "strata/files.h"
#include "strata/table.h"
#include "internal.h"

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

st_status st_read_file(const char *path, char **buf, size_t *len)
{
    if (!path || !buf || !len) return st_fail(ST_ERR_INVALID_ARG, "read_file: NULL argument");
    return st_file_read_all(path, ST_TABLE_MAX_BYTES, buf, len, NULL, NULL);
}
