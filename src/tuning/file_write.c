/* Writing the files the tools make (tables, reports, indexes): a
 * temporary file beside the target, fsync, rename, fsync of the folder, so
 * a reader sees the old bytes or all the new ones, never a part; every
 * temporary file is tracked (tmpfiles.h) so a dying process can remove it.
 * The one home of that rule in the tools library. */
#define _POSIX_C_SOURCE 200809L
#include "file_write.h"
#include "out_manifest.h"
#include "strata/tools/tables.h"
#include "tune_out.h"
#include "tmpfiles.h"
#include "tools_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

long st_table_write_fail_after_bytes = -1;
long st_file_kill_at_step = -1;
int st_file_kill_signal = SIGKILL;
long st_file_steps;
long st_file_commit_step = -1;
const char *st_file_fail_rename_of;

void st_file_step(void)
{
    if (++st_file_steps == st_file_kill_at_step) raise(st_file_kill_signal);
}

bool st_out_name_ok(const char *name)
{
    if (!name || !name[0] || !strcmp(name, ".") || !strcmp(name, "..")) return false;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++, n++)
        if (*p == '/' || *p < 0x20 || *p == 0x7f) return false;
    return n < 256;
}

const char *st_out_kind(mode_t m)
{
    return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link" : "not a regular file";
}

st_status st_out_target_check(const char *path)
{
    /* its temporary file and roll-back link ("NAME.tmp.<pid>.<n>",
     * "NAME.old.<pid>") must fit where it does: checked before a run */
    if (strlen(st_path_base(path)) + 24 > 255 || strlen(path) + 24 >= 4096)
        return st_fail(ST_ERR_INVALID_ARG, "%s: the name is too long for its temporary file (a name may have 255 bytes, a "
                                           "path 4095): name a shorter one",
                       path);
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return ST_OK;
        return st_fail(ST_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    if (S_ISREG(st.st_mode)) return ST_OK;
    return st_fail(ST_ERR_EXISTS, "%s is %s: not replaced (only a regular file is written over)", path,
                   st_out_kind(st.st_mode));
}

/* The inputs this process named (every INPUT st_out_not_input was given,
 * before any write): the dead-temporary sweep never removes one, whatever
 * its name (a model or a report named like a temporary file of an output,
 * "page.html.tmp.<dead pid>.<n>", stays an input). */
enum { KEEP_MAX = 32 };
static struct {
    dev_t dev;
    ino_t ino;
} g_keep[KEEP_MAX];
static int g_n_keep;
static pthread_mutex_t g_keep_mu = PTHREAD_MUTEX_INITIALIZER;

/* Whether ST's file is kept (the caller holds the lock). */
static bool kept_locked(const struct stat *st)
{
    for (int i = 0; i < g_n_keep; i++)
        if (g_keep[i].dev == st->st_dev && g_keep[i].ino == st->st_ino) return true;
    return false;
}

static void keep_input(const struct stat *st)
{
    pthread_mutex_lock(&g_keep_mu);
    if (!kept_locked(st) && g_n_keep < KEEP_MAX) {
        g_keep[g_n_keep].dev = st->st_dev;
        g_keep[g_n_keep++].ino = st->st_ino;
    }
    pthread_mutex_unlock(&g_keep_mu);
}

static bool kept_input(const struct stat *st)
{
    pthread_mutex_lock(&g_keep_mu);
    const bool known = kept_locked(st);
    pthread_mutex_unlock(&g_keep_mu);
    return known;
}

st_status st_out_not_input(const char *out, const char *input)
{
    struct stat a, b;
    const bool in = stat(input, &b) == 0;
    if (in) keep_input(&b);
    if (in && stat(out, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        return st_fail(ST_ERR_INVALID_ARG, "%s is the input %s: the output would replace it; name another file", out,
                       input);
    return ST_OK;
}

st_status st_out_dir_make(const char *dir, const char *who)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return st_fail(ST_ERR_IO, "%s: cannot create the output folder %s: %s", who, dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0) return st_fail(ST_ERR_IO, "%s: cannot use the output folder %s: %s", who, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return st_fail(ST_ERR_IO, "%s: the output folder %s is %s, not a folder", who, dir,
                       S_ISREG(st.st_mode) ? "a file" : st_out_kind(st.st_mode));
    return ST_OK;
}

st_status st_out_probe(const char *dir, const char *who, size_t bytes)
{
    const size_t pn = strlen(dir) + sizeof ST_TUNE_PROBE_PREFIX + 24;
    char *path = malloc(pn);
    if (!path) return st_fail(ST_ERR_NOMEM, "%s: out of memory", who);
    snprintf(path, pn, "%s/" ST_TUNE_PROBE_PREFIX "%ld", dir, (long)getpid());
    /* bytes no file system compresses or shares (zeros would take no room
     * on a compressing one, btrfs or ZFS, and prove nothing): a
     * pseudo-random stream, new for every chunk */
    static uint64_t buf[8192];
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    const int slot = st_tmpfile_track(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int e = fd < 0 ? errno : 0;
    st_file_step();
    for (size_t done = 0, left = 0, at = 0; !e && done < bytes;) {
        if (!left) {
            for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                buf[i] = x;
            }
            left = sizeof buf;
            at = 0;
        }
        const size_t chunk = bytes - done < left ? bytes - done : left;
        const ssize_t w = write(fd, (const char *)buf + at, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) e = errno;
        else {
            done += (size_t)w;
            at += (size_t)w;
            left -= (size_t)w;
        }
    }
    if (!e && fsync(fd) != 0) e = errno;
    if (fd >= 0 && close(fd) != 0 && !e) e = errno;
    /* an install keeps the old files by hard links for its roll back: a
     * file system without them (vfat, exFAT, some network mounts) is said
     * now, not after the run */
    int le = 0;
    char *lpath = !e ? malloc(pn + 2) : NULL;
    if (lpath) {
        snprintf(lpath, pn + 2, "%s.1", path);
        const int lslot = st_tmpfile_track(lpath);
        if (link(path, lpath) != 0) le = errno;
        else unlink(lpath);
        st_tmpfile_untrack(lslot);
        free(lpath);
    }
    if (fd >= 0) unlink(path);
    st_tmpfile_untrack(slot);
    st_file_step();
    st_status s = ST_OK;
    /* room is bytes and files: an install makes up to 16 at its peak
     * (temporary files, links, the journal, the index's copy) */
    struct statvfs v;
    const bool few_files = !e && statvfs(dir, &v) == 0 && v.f_files > 0 && v.f_favail < 16;
    if (e)
        s = st_fail(ST_ERR_IO, "%s: cannot write the outputs in %s (a probe of %zu bytes, %s): %s", who, dir, bytes, path,
                    strerror(e));
    else if (few_files)
        s = st_fail(ST_ERR_IO, "%s: cannot write the outputs in %s: its file system has room for %lu more files, and an "
                               "install makes up to 16",
                    who, dir, (unsigned long)v.f_favail);
    else if (le)
        s = st_fail(ST_ERR_IO,
                    "%s: cannot make a hard link in %s (%s): the install keeps the old files by hard links for its roll "
                    "back; use a folder on another file system",
                    who, dir, strerror(le));
    free(path);
    return s;
}

size_t st_out_blocks(const char *dir, size_t bytes)
{
    struct statvfs v;
    size_t b = statvfs(dir, &v) == 0 && v.f_frsize > 0 ? (size_t)v.f_frsize : 4096;
    if (b > ((size_t)1 << 24)) b = (size_t)1 << 24; /* a file system that claims more: still a bound */
    return (bytes + b - 1) / b * b;
}

st_status st_out_not_tool_file(const char *path)
{
    const char *b = st_path_base(path);
    if (!strcmp(b, ST_TUNE_LOCK_NAME) || !strcmp(b, ST_TUNE_JOURNAL_NAME) || !strcmp(b, ST_TABLES_INDEX_NAME) ||
        st_ends_with(b, ".table") || st_ends_with(b, ".table.candidate") || st_ends_with(b, ST_MANIFEST_EXT))
        return st_fail(ST_ERR_INVALID_ARG,
                       "%s: a name the tuner keeps for a tables folder (its lock, journal, index, tables, candidates "
                       "and manifests): name another file",
                       path);
    return ST_OK;
}

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

/* "<prefix><tag><pid>[.<n>]": the pid (the last TAG in NAME), or -1 when
 * NAME is not of that form. */
long st_out_name_pid(const char *name, const char *tag, bool counter)
{
    const char *at = strstr(name, tag);
    if (!at) return -1;
    while (strstr(at + 1, tag)) at = strstr(at + 1, tag);
    const char *p = at + strlen(tag);
    char *end = NULL;
    errno = 0;
    const long pid = strtol(p, &end, 10);
    if (end == p || errno || pid <= 0 || *p < '0' || *p > '9') return -1;
    if (counter) {
        if (*end != '.' || !end[1]) return -1;
        for (p = end + 1; *p; p++)
            if (*p < '0' || *p > '9') return -1;
    } else if (*end) {
        return -1;
    }
    return pid;
}

bool st_pid_dead(long pid, bool own_is_dead)
{
    if (pid <= 0) return false;
    if (pid == (long)getpid()) return own_is_dead;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

const char *st_path_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

char *st_path_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    return !slash ? strdup(".") : slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
}

/* Removes the temporary files of PATH ("PATH.tmp.<pid>.<n>", regular
 * files) that a killed process left: of a pid that is gone, never this
 * process's or a live one's, never an input of this process (keep_input).
 * A user-named page (`--html P`, `report -o P`) lives in a folder no
 * settling run sweeps: its next write does. */
static void sweep_dead_temps(const char *path)
{
    const char *name = st_path_base(path);
    char *dir = st_path_dir(path);
    if (!dir) return;
    DIR *d = opendir(dir);
    const size_t nl = strlen(name);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, name, nl) || strncmp(e->d_name + nl, ".tmp.", 5)) continue;
        const long pid = st_out_name_pid(e->d_name + nl, ".tmp.", true);
        if (!st_pid_dead(pid, false)) continue;
        const size_t fl = strlen(dir) + strlen(e->d_name) + 2;
        char *full = malloc(fl);
        struct stat st;
        if (full) {
            snprintf(full, fl, "%s/%s", dir, e->d_name);
            if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && !kept_input(&st)) unlink(full);
        }
        free(full);
    }
    if (d) closedir(d);
    free(dir);
}

st_status st_file_write_temp(const char *path, const char *text, size_t len, char **tmp_out, int *slot)
{
    static atomic_uint counter;
    *tmp_out = NULL;
    *slot = -1;
    ST_TRY(st_out_target_check(path));
    sweep_dead_temps(path);
    const size_t tn = strlen(path) + 64;
    char *tmp = malloc(tn);
    if (!tmp) return st_fail(ST_ERR_NOMEM, "%s: cannot write: out of memory", path);
    snprintf(tmp, tn, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    const char *step = "create";
    const int sl = st_tmpfile_track(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const bool created = fd >= 0; /* never unlink a file O_EXCL found in the way */
    if (fd < 0) goto fail;
    st_file_step();
    step = "write";
    if (write_all(fd, text, len) != 0) goto fail;
    step = "sync";
    if (fsync(fd) != 0) goto fail;
    step = "close";
    const int r = close(fd);
    fd = -1;
    if (r != 0) goto fail;
    st_file_step();
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
    st_status ok = st_out_target_check(path); /* what stands there may have changed since the write */
    st_file_step();
    const char *f = st_file_fail_rename_of;
    const size_t pl = strlen(path), fl = f ? strlen(f) : 0;
    const bool fake = f && pl >= fl && !strcmp(path + pl - fl, f);
    if (fake) errno = EIO;
    if (ok != ST_OK || fake || rename(tmp, path) != 0) {
        if (ok != ST_OK) {
            unlink(tmp);
            st_tmpfile_untrack(slot);
            return ok;
        }
        const int e = errno;
        unlink(tmp);
        st_tmpfile_untrack(slot);
        return st_fail(ST_ERR_IO, "%s: cannot rename %s: %s", path, tmp, strerror(e));
    }
    st_tmpfile_untrack(slot);
    st_file_step();
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

st_status st_file_write_set(int n, const char *const *paths, const char *const *texts, const size_t *lens)
{
    if (n < 1 || n > ST_FILE_SET_MAX || !paths || !texts || !lens)
        return st_fail(ST_ERR_INVALID_ARG, "write: 1 to %d files in a set", ST_FILE_SET_MAX);
    char *tmp[ST_FILE_SET_MAX] = {NULL};
    int slot[ST_FILE_SET_MAX];
    st_status s = ST_OK;
    for (int i = 0; i < n && s == ST_OK; i++) s = st_file_write_temp(paths[i], texts[i], lens[i], &tmp[i], &slot[i]);
    for (int i = 0; i < n && s == ST_OK; i++) {
        s = st_file_commit(paths[i], tmp[i], slot[i], NULL);
        free(tmp[i]);
        tmp[i] = NULL;
    }
    for (int i = 0; i < n; i++)
        if (tmp[i]) { /* not renamed in: removed */
            unlink(tmp[i]);
            st_tmpfile_untrack(slot[i]);
            free(tmp[i]);
        }
    return s;
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
