/* The tune's output folder: checks, lock, paths and merge (see tune_out.h;
 * the install and its journal are in tune_journal.c). */
#define _POSIX_C_SOURCE 200809L
#include "tune_out.h"
#include "file_write.h"
#include "out_manifest.h"
#include "strata/files.h"
#include "tools_internal.h"
#include "strata/table.h"
#include "tmpfiles.h"
#include "strata/table_meta.h"
#include "strata/tools/tables.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_KEEP 48

char *st_tune_fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    const int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *p = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!p) return NULL;
    va_start(ap, f);
    vsnprintf(p, (size_t)n + 1, f, ap);
    va_end(ap);
    return p;
}

void st_tune_file_name(const char *model, char *out, size_t n)
{
    const size_t len = strlen(model);
    size_t j = 0;
    const size_t keep = len > NAME_KEEP + 17 ? NAME_KEEP : len;
    for (size_t i = 0; i < keep && j + 1 < n; i++) {
        const char c = model[i];
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.';
        out[j++] = ok ? c : '-';
    }
    out[j] = '\0';
    if (keep < len) { /* FNV-1a of the whole name keeps cut names apart */
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)model[i]) * 1099511628211ull;
        snprintf(out + j, n - j, "-%016llx", (unsigned long long)h);
    }
    if (!out[0]) snprintf(out, n, "model");
}

/* ---- the lock --------------------------------------------------------------- */

/* What a lock file of this tool holds: nothing (just made, or a run that
 * died before writing it), or "PID[ WHO]\n" (WHO: letters and spaces). */
static bool lock_text_ok(const char *t)
{
    if (!*t) return true;
    const char *p = t;
    while (*p >= '0' && *p <= '9') p++;
    if (p == t) return false;
    if (*p == ' ')
        for (p++; (*p >= 'a' && *p <= 'z') || *p == ' '; p++) {
        }
    return !strcmp(p, "\n") || !*p;
}

/* The exclusive lock of DIR at LOCK_PATH for WHO ("tune", "prune",
 * "settings"): the file holds "PID WHO", so a run refused names the kind
 * of run that holds it. */
static st_status lock_dir(const char *dir, const char *lock_path, const char *who, int *fd_out, int *slot_out)
{
    *fd_out = *slot_out = -1;
    for (int attempt = 0; attempt < 16; attempt++) {
        /* O_NONBLOCK: a FIFO planted there must not hang the open; it is
         * refused just below */
        const int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (fd < 0 && errno == ELOOP)
            return st_fail(ST_ERR_EXISTS, "%s: %s is a symbolic link, not a lock file this tool wrote: remove it to use %s",
                           who, lock_path, dir);
        if (fd < 0)
            return st_fail(ST_ERR_IO, "%s: cannot write in the output folder %s (lock file %s): %s", who, dir, lock_path,
                           strerror(errno));
        /* Only a regular file with one link and no more than a pid in it is
         * ours to lock, write and remove: never a FIFO or device, never a
         * hard link to a file elsewhere, never a file someone put there. */
        struct stat ls;
        char had[48] = "";
        const bool st_ok = fstat(fd, &ls) == 0;
        if (st_ok && S_ISREG(ls.st_mode) && ls.st_size <= 32) {
            const ssize_t r = pread(fd, had, sizeof had - 1, 0);
            had[r > 0 ? r : 0] = '\0';
        }
        if (!st_ok || !S_ISREG(ls.st_mode) || ls.st_nlink != 1 || ls.st_size > 32 || !lock_text_ok(had)) {
            const bool reg = S_ISREG(ls.st_mode);
            close(fd);
            return st_fail(ST_ERR_EXISTS,
                           "%s: %s is %s, not a lock file this tool wrote: it was left as it is; remove it to use %s", who,
                           lock_path,
                           !reg ? st_out_kind(ls.st_mode)
                           : ls.st_nlink != 1 ? "a file with another hard link"
                                              : "a file with more than a process id and its kind in it",
                           dir);
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int e = errno;
            char holder[48] = "";
            const ssize_t r = pread(fd, holder, sizeof holder - 1, 0);
            holder[r > 0 ? r : 0] = '\0';
            holder[strcspn(holder, "\n")] = '\0';
            close(fd);
            /* "PID WHO": the holder's kind names it (a lock file with a
             * pid only, or none, is a tune's) */
            char *sp = strchr(holder, ' ');
            const char *by = sp && !strcmp(sp + 1, "settings") ? "settings run"
                             : sp && !strcmp(sp + 1, "prune")  ? "table prune"
                             : sp && !strcmp(sp + 1, "table list") ? "table list"
                                                               : "tune";
            if (sp) *sp = '\0';
            if (e == EWOULDBLOCK)
                return st_fail(ST_ERR_EXISTS,
                               "%s: another %s is writing to %s (process %s holds %s): wait for it to end%s", who, by,
                               dir, holder[0] ? holder : "?", lock_path,
                               !strcmp(who, "tune")       ? ", or tune into another --out"
                               : !strcmp(who, "settings") ? ", or use another --out"
                                                          : "");
            return st_fail(ST_ERR_IO, "%s: cannot lock %s: %s", who, lock_path, strerror(e));
        }
        /* The holder before us removes the file as it ends: a lock on a file
         * that is no longer at the path guards nothing, so start again. */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lock_path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            /* who holds it ("PID WHO", at most 48 bytes), for the refusal
             * of a second run: best effort
             * (a full disk is the probe's to report) */
            char pid[48];
            const int n = snprintf(pid, sizeof pid, "%ld %.16s\n", (long)getpid(), who);
            if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid, (size_t)n, 0);
            *fd_out = fd;
            /* a fault that ends the process removes it too (tmpfiles.h) */
            *slot_out = st_tmpfile_track(lock_path);
            st_file_step();
            return ST_OK;
        }
        close(fd);
    }
    return st_fail(ST_ERR_IO, "%s: cannot lock %s: it keeps being replaced", who, lock_path);
}

static void unlock_dir(const char *lock_path, int fd, int slot)
{
    if (fd < 0) return;
    /* forgotten by the registry first: a signal between the two steps must
     * not remove the path again, which may be another run's lock by then */
    st_tmpfile_untrack(slot);
    unlink(lock_path); /* while held: see lock_dir */
    close(fd);
}

static st_status take_lock(st_tune_out *o) { return lock_dir(o->dir, o->lock_path, "tune", &o->lock_fd, &o->lock_slot); }

st_status st_folder_lock(const char *dir, const char *who, st_folder_lock_t *l)
{
    l->fd = l->slot = -1;
    l->path = st_tune_fmt("%s/" ST_TUNE_LOCK_NAME, dir);
    if (!l->path) return st_fail(ST_ERR_NOMEM, "%s: out of memory", who);
    const st_status s = lock_dir(dir, l->path, who, &l->fd, &l->slot);
    if (s != ST_OK) {
        free(l->path);
        l->path = NULL;
    }
    return s;
}

void st_folder_unlock(st_folder_lock_t *l)
{
    if (l->path) unlock_dir(l->path, l->fd, l->slot);
    free(l->path);
    l->path = NULL;
    l->fd = l->slot = -1;
}

/* ---- this identity's table in the folder ------------------------------------- */

/* The *.table regular files of the folder (the loader's own list,
 * st_table_dir_list) whose header is this identity's. */
static st_status find_ours(st_tune_out *o, const st_identity *id, char **found, int *count, char *names, size_t nn)
{
    *found = NULL;
    *count = 0;
    names[0] = '\0';
    char **list = NULL, why[ST_FILE_WHY_MAX];
    size_t n = 0;
    if (st_table_dir_list(o->dir, &list, &n, why) != ST_OK)
        return st_fail(ST_ERR_IO, "tune: cannot read the output folder %s: %s", o->dir, why);
    st_status s = ST_OK;
    for (size_t i = 0; i < n && s == ST_OK; i++) {
        char *full = st_tune_fmt("%s/%s", o->dir, list[i]);
        if (!full) {
            s = st_fail(ST_ERR_NOMEM, "tune: out of memory");
            break;
        }
        /* a file that cannot be read is skipped like the loader skips it */
        if (st_table_file_is_for(full, id)) {
            const size_t at = strlen(names);
            snprintf(names + at, nn - at, "%s%s", at ? ", " : "", list[i]);
            if (++*count == 1) {
                *found = full;
                full = NULL;
            }
        }
        free(full);
    }
    st_table_dir_list_free(list, n);
    if (s != ST_OK) {
        free(*found);
        *found = NULL;
    } else {
        st_clear_error();
    }
    return s;
}

/* Whether the regular file at PATH is a table, and for ID's device: 1 it
 * is, 0 it is a table for another device (its header into THEIRS[0..N)),
 * -1 it is no table (absent, not a regular file, unreadable, or does not
 * parse). BUILD: the device of this build (st_identity_same_device: the
 * four header tokens too), else the card alone (arch and device model: a
 * table of an older runtime or build on this card is this device's). */
static int table_device(const char *path, const st_identity *id, bool build, char *theirs, size_t n)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    st_table *t = NULL;
    const bool table = lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st_read_file(path, &buf, &len) == ST_OK &&
                       st_table_parse_any(buf, len, path, &t, NULL, 0) == ST_OK;
    free(buf);
    int r = -1;
    if (table) {
        const st_identity *ti = st_table_identity(t);
        r = build ? st_identity_same_device(ti, id) : !strcmp(ti->arch, id->arch) && !strcmp(ti->model, id->model);
    }
    if (r == 0) st_identity_header(st_table_identity(t), theirs, n);
    st_table_destroy(t);
    st_clear_error();
    return r;
}

/* Refuses to replace a file at PATH that is not a table for ID (unless FORCE). */
static st_status check_new_path(const char *path, const st_identity *id, bool force)
{
    struct stat st;
    if (lstat(path, &st) != 0) return ST_OK;
    if (!S_ISREG(st.st_mode)) /* --force replaces a file, never one of these */
        return st_fail(ST_ERR_EXISTS, "%s is %s: not replaced (only a regular file is written over); move it away", path,
                       st_out_kind(st.st_mode));
    if (force) return ST_OK;
    char theirs[4 * ST_TOKEN_MAX + 16], ours[4 * ST_TOKEN_MAX + 16];
    const int dev = table_device(path, id, true, theirs, sizeof theirs);
    if (dev < 0) return st_fail(ST_ERR_EXISTS, "%s exists and is not a table this tool wrote; remove it or use --force", path);
    st_identity_header(id, ours, sizeof ours);
    if (dev == 0)
        return st_fail(ST_ERR_EXISTS, "%s holds a table for '%s', this process is '%s': use another --out or --force", path,
                       theirs, ours);
    return ST_OK;
}

static st_status use_existing(st_tune_out *o, char *path, bool force)
{
    char why[ST_FILE_WHY_MAX] = "", msg[ST_TABLE_MSG_MAX] = "";
    if (st_file_read_all(path, ST_TABLE_MAX_BYTES, &o->existing_text, &o->existing_len, why, NULL) != ST_OK) {
        st_status s = st_fail(ST_ERR_IO, "tune: cannot read %s: %s", path, why);
        free(path);
        return s;
    }
    o->table_path = path;
    st_status s = st_table_parse_any(o->existing_text, o->existing_len, path, &o->existing, msg, sizeof msg);
    if (s == ST_OK || force) {
        if (s != ST_OK) st_log("tune: --force: replacing %s, which does not parse (%s)", path, msg);
        return ST_OK;
    }
    return st_fail(ST_ERR_PARSE,
                   "tune: %s has this process's header but does not parse (%s): fix or remove it, or use --force to "
                   "replace it",
                   path, msg);
}

/* The report set at O's names (report, page, manifest: named after the
 * model, not the device) is replaced by this run: refused when its
 * manifest lists a table that is still in the folder and is for another
 * device than ID (a table tuned on another card or backend keeps its
 * report); a table of this device (superseded by a new runtime or build)
 * or one gone leaves the set to this run, as before. */
static st_status report_set_not_others(const st_tune_out *o, const st_identity *id)
{
    st_manifest m;
    if (!st_manifest_read(o->manifest_path, &m))
        return ST_OK; /* no manifest there (or not ours: replaced only if the paths' checks allowed it) */
    const char *mine = o->table_path ? st_path_base(o->table_path) : "";
    st_status s = ST_OK;
    for (int k = 0; k < m.n && s == ST_OK; k++) {
        if (m.e[k].role != ST_MF_TABLE || !strcmp(m.e[k].name, mine)) continue;
        char *p = st_tune_fmt("%s/%s", o->dir, m.e[k].name), theirs[4 * ST_TOKEN_MAX + 16];
        if (p && table_device(p, id, false, theirs, sizeof theirs) == 0)
            s = st_fail(ST_ERR_EXISTS,
                        "tune: %s, its page and its manifest describe %s, a table for '%s' (another device) that is "
                        "still in %s: this run would replace them; tune into another --out",
                        o->report_path, m.e[k].name, theirs, o->dir);
        free(p);
    }
    return s;
}

/* What the install adds beside the folder's files at its peak, beyond the
 * run's own reports: the index (its new copy is written beside the old
 * one, or is new), the larger of what it takes now and what the folder's
 * tables make it (a table of 6000 rows, 135 KB, made a 424 KB index where
 * none stood, 2026-12-06), and the merged table and the gate's candidate
 * beside the table the run merges into (about its size each). Measured
 * here, under the lock, before the sweep. */
static size_t folder_bytes(const st_tune_out *o, const st_identity *id)
{
    size_t b = 2 * o->existing_len, now = 0;
    struct stat st;
    if (o->index_path && stat(o->index_path, &st) == 0 && S_ISREG(st.st_mode)) now = (size_t)st.st_size;
    st_tables_index *ix = NULL;
    char *text = NULL;
    size_t len = 0;
    if (st_tables_index_build(o->dir, id, NULL, &ix) != ST_OK || st_tables_index_format(ix, &text, &len) != ST_OK) len = 0;
    b += len > now ? len : now;
    st_clear_error(); /* a folder the index cannot describe is refused later, by its own step */
    free(text);
    st_tables_index_free(ix);
    return b;
}

/* ---- open / close ------------------------------------------------------------ */

st_status st_tune_out_open(st_tune_out *o, const char *dir, const char *name, int report_device,
                           const st_identity *id, bool force, size_t probe_bytes)
{
    return st_tune_out_open_input(o, dir, name, report_device, id, force, probe_bytes, NULL);
}

st_status st_tune_out_open_input(st_tune_out *o, const char *dir, const char *name, int report_device,
                                 const st_identity *id, bool force, size_t probe_bytes, const char *input)
{
    memset(o, 0, sizeof *o);
    o->lock_fd = -1;
    o->lock_slot = -1;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    char arch[ST_TOKEN_MAX + 24], rt[ST_TOKEN_MAX + 24], model[ST_TOKEN_MAX + 24] = "";
    st_tune_file_name(id->arch, arch, sizeof arch);
    st_tune_file_name(id->runtime, rt, sizeof rt);
    /* the device model in the name: two SKUs of one arch never share a file */
    if (id->model[0]) {
        model[0] = '-';
        st_tune_file_name(id->model, model + 1, sizeof model - 1);
    }
    char *fresh = NULL;
    st_status s = ST_OK;
    o->dir = st_tune_fmt("%.*s", (int)dl, dir);
    /* "strata-" once: a model whose own name starts with it (our tests'
     * tiny model, "strata-tune-tiny-moe-tests") keeps its name as it is */
    const char *pre = strncmp(name, "strata-", 7) ? "strata-" : "";
    if (o->dir) {
        fresh = st_tune_fmt("%s/%s%s-%s%s-%s.table", o->dir, pre, name, arch, model, rt);
        char dev[24] = "";
        if (report_device >= 0) snprintf(dev, sizeof dev, ".dev%d", report_device);
        o->report_path = st_tune_fmt("%s/%s%s%s.autotune.json", o->dir, pre, name, dev);
        o->html_path = st_tune_fmt("%s/%s%s%s.autotune.html", o->dir, pre, name, dev);
        o->refused_path = st_tune_fmt("%s/%s%s%s.not-installed.autotune.json", o->dir, pre, name, dev);
        o->index_path = st_tune_fmt("%s/%s", o->dir, ST_TABLES_INDEX_NAME);
        o->manifest_path = o->report_path ? st_manifest_path_for(o->report_path) : NULL;
        o->journal_path = st_tune_fmt("%s/" ST_TUNE_JOURNAL_NAME, o->dir);
        o->lock_path = st_tune_fmt("%s/" ST_TUNE_LOCK_NAME, o->dir);
    }
    if (!o->dir || !fresh || !o->report_path || !o->html_path || !o->refused_path || !o->index_path || !o->manifest_path || !o->journal_path || !o->lock_path)
        s = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    /* room for the temporary names beside them, too */
    const size_t longest = fresh && o->refused_path ? (strlen(fresh) > strlen(o->refused_path) ? strlen(fresh)
                                                                                                : strlen(o->refused_path))
                                                    : 0;
    if (s == ST_OK && longest + 40 >= ST_TUNE_PATH_MAX)
        s = st_fail(ST_ERR_INVALID_ARG,
                    "tune: the output paths would be %zu bytes, more than the %d a path may have (ST_TUNE_PATH_MAX): use "
                    "a shorter --out than %s",
                    longest + 40, ST_TUNE_PATH_MAX, o->dir);
    /* the input is never one of the paths the run writes or removes,
     * checked before the folder changes (the lock) */
    if (s == ST_OK && input) {
        char *cand = st_tune_fmt("%s.candidate", fresh);
        const char *mine[] = {fresh, o->report_path, o->html_path, o->refused_path, o->index_path, o->manifest_path,
                              o->journal_path, o->lock_path, cand};
        if (!cand) s = st_fail(ST_ERR_NOMEM, "tune: out of memory");
        for (size_t i = 0; i < sizeof mine / sizeof mine[0] && s == ST_OK; i++) s = st_out_not_input(mine[i], input);
        free(cand);
        if (s == ST_OK) {
            char *rh = st_tune_fmt("%.*s.html", (int)strlen(o->refused_path) - 5, o->refused_path);
            char *rm = st_manifest_path_for(o->refused_path);
            s = rh && rm ? st_out_not_input(rh, input) : st_fail(ST_ERR_NOMEM, "tune: out of memory");
            if (s == ST_OK) s = st_out_not_input(rm, input);
            free(rh);
            free(rm);
        }
        if (s != ST_OK) s = st_fail_prefixed(s, "tune");
    }
    if (s == ST_OK) s = st_out_dir_make(o->dir, "tune");
    if (s == ST_OK) s = take_lock(o);
    if (s == ST_OK) s = st_tune_out_recover("tune", o->dir, id, input, NULL);
    char *found = NULL, names[1024];
    int count = 0;
    if (s == ST_OK) s = find_ours(o, id, &found, &count, names, sizeof names);
    if (s == ST_OK && count > 1) {
        char hdr[4 * ST_TOKEN_MAX + 16];
        st_identity_header(id, hdr, sizeof hdr);
        s = st_fail(ST_ERR_EXISTS,
                    "tune: %s holds %d tables for this process (%s: %s), which the loader refuses: keep one "
                    "(tune_decode table list %s --prune removes superseded ones), or tune into another --out",
                    o->dir, count, hdr, names, o->dir);
        free(found);
        found = NULL;
    }
    if (s == ST_OK && found && !st_out_name_ok(strrchr(found, '/') + 1)) {
        /* the run would merge into it and then could not name it in its
         * manifest: refused now, before the sweep */
        s = st_fail(ST_ERR_INVALID_ARG,
                    "tune: %s, the table for this process in %s, has a name this tool does not write (a control byte, or "
                    "longer than 255 bytes): rename it, or tune into another --out",
                    found, o->dir);
        free(found);
        found = NULL;
    }
    if (s == ST_OK && found && input) {
        s = st_out_not_input(found, input);
        if (s != ST_OK) {
            s = st_fail_prefixed(s, "tune");
            free(found);
            found = NULL;
        }
    }
    if (s == ST_OK && found) {
        s = use_existing(o, found, force);
        found = NULL;
    } else if (s == ST_OK) {
        s = check_new_path(fresh, id, force);
        if (s == ST_OK) {
            o->table_path = fresh;
            fresh = NULL;
        }
    }
    free(fresh);
    /* the room the outputs take, reserved now that the table merged into is
     * known: PROBE_BYTES (the caller's: the reports, this run's entries)
     * and what the folder adds (folder_bytes) */
    if (s == ST_OK) s = st_out_probe(o->dir, "tune", probe_bytes + folder_bytes(o, id));
    /* every path the run will write, checked now rather than after the sweep */
    char *refused_html = o->refused_path ? st_tune_fmt("%.*s.html", (int)strlen(o->refused_path) - 5, o->refused_path) : NULL;
    if (s == ST_OK && !refused_html) s = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    char *refused_mf = o->refused_path ? st_manifest_path_for(o->refused_path) : NULL;
    if (s == ST_OK && !refused_mf) s = st_fail(ST_ERR_NOMEM, "tune: out of memory");
    const char *paths[] = {o->table_path, o->report_path, o->html_path,   o->index_path,
                           o->refused_path, refused_html, o->manifest_path, refused_mf};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && s == ST_OK; i++) s = st_out_target_check(paths[i]);
    /* the report and page (installed, or not installed) never another run's
     * set (a settings run's files); the table and the index are shared by
     * every tune of the folder */
    const char *own[] = {o->manifest_path, o->manifest_path, refused_mf, refused_mf};
    const char *mine[] = {o->report_path, o->html_path, o->refused_path, refused_html};
    for (size_t i = 0; i < 4 && s == ST_OK; i++)
        if (st_manifest_not_others(mine[i], own[i]) != ST_OK) s = st_fail_prefixed(ST_ERR_EXISTS, "tune");
    if (s == ST_OK) s = report_set_not_others(o, id);
    free(refused_html);
    free(refused_mf);
    if (s == ST_OK) {
        /* the gate's candidate beside the table the run writes (an existing
         * table of another name has its own): never the input, and after
         * the settling above (which removes a candidate a dead run left)
         * anything standing there is not ours */
        char *cand = st_tune_fmt("%s.candidate", o->table_path);
        struct stat cs;
        s = cand ? st_out_target_check(cand) : st_fail(ST_ERR_NOMEM, "tune: out of memory");
        if (s == ST_OK && input && st_out_not_input(cand, input) != ST_OK) s = st_fail_prefixed(ST_ERR_INVALID_ARG, "tune");
        if (s == ST_OK && lstat(cand, &cs) == 0)
            s = st_fail(ST_ERR_EXISTS,
                        "tune: %s exists and is not a gate candidate this tool left (not a table for this process): it "
                        "was left as it is; move it away to tune into %s",
                        cand, o->dir);
        free(cand);
    }
    if (s != ST_OK) st_tune_out_close(o);
    return s;
}

void st_tune_out_close(st_tune_out *o)
{
    if (o->lock_path) unlock_dir(o->lock_path, o->lock_fd, o->lock_slot);
    free(o->dir);
    free(o->table_path);
    free(o->report_path);
    free(o->html_path);
    free(o->refused_path);
    free(o->index_path);
    free(o->manifest_path);
    free(o->journal_path);
    free(o->lock_path);
    st_table_destroy(o->existing);
    free(o->existing_text);
    memset(o, 0, sizeof *o);
    o->lock_fd = -1;
    o->lock_slot = -1;
}

/* ---- merge -------------------------------------------------------------------- */

static bool tuned_mmvq(const st_tune_shape_result *r, int n, const st_mmvq_key *k)
{
    for (int i = 0; i < n; i++) {
        const st_tune_shape *s = &r[i].shape;
        if (s->kind == ST_SHAPE_MMVQ && s->type == k->type && s->rows == k->n_rows && s->cols == k->n_cols) return true;
    }
    return false;
}

static bool tuned_expert(const st_tune_shape_result *r, int n, const st_expert_key *k)
{
    for (int i = 0; i < n; i++) {
        const st_tune_shape *s = &r[i].shape;
        if (s->kind == ST_SHAPE_EXPERT && s->type == k->gu_type && s->down_type == k->down_type &&
            s->n_embd == k->n_embd && s->n_ff == k->n_ff && s->n_tokens == k->n_tokens)
            return true;
    }
    return false;
}

/* Whether the tuned-default shape I of E is one this run tuned again. */
static bool retuned_default(const st_table *e, size_t i, const st_tune_shape_result *r, int n)
{
    bool expert = false;
    st_mmvq_key mk;
    st_expert_key ek;
    st_table_tuned_default_at(e, i, &expert, &mk, &ek);
    return expert ? tuned_expert(r, n, &ek) : tuned_mmvq(r, n, &mk);
}

st_status st_tune_out_merge(const st_tune_out *o, st_table *t, const st_tune_shape_result *r, int n)
{
    const st_table *e = o->existing;
    if (!e) return ST_OK;
    st_status s = ST_OK;
    size_t kept = 0;
    for (size_t i = 0; i < st_table_mmvq_count(e) && s == ST_OK; i++) {
        st_mmvq_key k;
        int rows;
        st_table_mmvq_at(e, i, &k, &rows);
        if (!tuned_mmvq(r, n, &k)) s = st_table_add_mmvq(t, &k, rows), kept++;
    }
    for (size_t i = 0; i < st_table_expert_count(e) && s == ST_OK; i++) {
        st_expert_key k;
        int gu, dn;
        st_table_expert_at(e, i, &k, &gu, &dn);
        if (!tuned_expert(r, n, &k)) s = st_table_add_expert(t, &k, gu, dn), kept++;
    }
    /* this run's tuned defaults replace those of the shapes it tuned again;
     * the others stay */
    for (size_t i = 0; i < st_table_tuned_default_count(e) && s == ST_OK; i++) {
        if (retuned_default(e, i, r, n)) continue;
        bool expert = false;
        st_mmvq_key mk;
        st_expert_key ek;
        st_table_tuned_default_at(e, i, &expert, &mk, &ek);
        s = expert ? st_table_add_tuned_default_expert(t, &ek) : st_table_add_tuned_default_mmvq(t, &mk);
        kept++;
    }
    /* comments: this run's provenance and token counts replace the earlier
     * campaign's (one line keeps who made the rows that stay); free text
     * and earlier merge notes stay */
    const size_t nc = st_table_comment_count(e);
    for (size_t i = 0; i < nc && s == ST_OK; i++) {
        const char *c = st_table_comment_at(e, i);
        const st_comment_kind k = st_table_comment_kind(c);
        if (k == ST_COMMENT_OTHER || k == ST_COMMENT_MERGED) s = st_table_add_comment(t, c);
    }
    st_provenance old;
    st_provenance_from_table(e, &old);
    if (s == ST_OK && kept && (old.date[0] || old.model[0])) s = st_table_add_merged_note(t, &old);
    return s;
}
