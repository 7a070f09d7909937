/* The install of a tune's outputs as one set, and the completion or roll
 * back of one a killed run left (see tune_out.h): the journal, the links
 * to the old files, and the sweep of what dead runs left in a locked
 * folder. */
#define _POSIX_C_SOURCE 200809L
#include "file_write.h"
#include "out_manifest.h"
#include "strata/files.h"
#include "strata/tools/tables.h"
#include "tmpfiles.h"
#include "tools_internal.h"
#include "tune_out.h"
#include "sha256.h"
#include "strata/table.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JOURNAL_HEAD "strata-tune journal 1 "
#define JOURNAL_MAX_BYTES (64 << 10)
#define JOURNAL_MAX_ITEMS 4

/* ---- the journal and the litter of dead runs ------------------------------------ */

/* One output of an install: basenames in the journal, full paths here. */
typedef struct {
    char *target, *tmp, *old; /* old: NULL when nothing stood at the target */
    int slot;
    char sha[ST_SHA256_HEX]; /* of the new bytes: what a roll back may remove, what a completion may rename */
} item;

static void sync_dir(const char *dir)
{
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The names an install may move: the table, the report's JSON and page,
 * the run's manifest. */
static bool output_name(const char *name)
{
    return st_out_name_ok(name) && (st_ends_with(name, ".table") || st_ends_with(name, ".json") || st_ends_with(name, ".html") ||
                                    st_ends_with(name, ST_MANIFEST_EXT));
}

static bool regular(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The SHA-256 of the regular file at PATH ("" when it is not one or
 * cannot be read). */
static void sha_of(const char *path, char hex[ST_SHA256_HEX])
{
    hex[0] = '\0';
    char *buf = NULL;
    size_t len = 0;
    if (regular(path) && st_read_file(path, &buf, &len) == ST_OK) st_sha256_buf(buf, len, hex);
    st_clear_error();
    free(buf);
}

/* The file a settling must never move or remove (the run's input model,
 * under whatever name or link it stands in the folder): its device and
 * inode, or none. */
typedef struct {
    dev_t dev;
    ino_t ino;
    bool set;
} keep_file;

static void keep_init(keep_file *k, const char *path)
{
    struct stat st;
    k->set = path && stat(path, &st) == 0;
    k->dev = k->set ? st.st_dev : 0;
    k->ino = k->set ? st.st_ino : 0;
}

static bool is_kept(const keep_file *k, const char *path)
{
    struct stat st;
    return k && k->set && path && lstat(path, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino;
}

/* What stands at PATH: nothing or a regular file (else false). */
static bool absent_or_regular(const char *path)
{
    struct stat st;
    return lstat(path, &st) != 0 ? errno == ENOENT : S_ISREG(st.st_mode);
}

static char *journal_text(const item *it, int n, bool back)
{
    size_t cap = 64;
    for (int i = 0; i < n; i++)
        cap += strlen(st_path_base(it[i].tmp)) + strlen(st_path_base(it[i].target)) + (it[i].old ? strlen(st_path_base(it[i].old)) : 1) +
               ST_SHA256_HEX + 5;
    char *t = malloc(cap);
    if (!t) return NULL;
    size_t at = (size_t)snprintf(t, cap, JOURNAL_HEAD "%s\n", back ? "back" : "forward");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(t + at, cap - at, "%s\t%s\t%s\t%s\n", st_path_base(it[i].tmp), st_path_base(it[i].target),
                               it[i].old ? st_path_base(it[i].old) : "-", it[i].sha);
    return t;
}

/* Forward: every temporary file still there is renamed into place, then
 * the old files' links go. Back: every temporary file still there goes,
 * and every target that was renamed over gets its old file back (or is
 * removed when nothing stood there). Both can be repeated after a kill
 * at any step: each step looks at what is on disk. */
static int play(const item *it, int n, bool back)
{
    int moved = 0;
    for (int i = 0; i < n; i++) {
        const bool tmp_there = regular(it[i].tmp);
        if (!back) {
            st_file_step();
            if (tmp_there && absent_or_regular(it[i].target) && rename(it[i].tmp, it[i].target) == 0) moved++;
            continue;
        }
        st_file_step();
        if (tmp_there) {
            if (unlink(it[i].tmp) == 0) moved++;
        } else if (it[i].old) {
            if (regular(it[i].old) && rename(it[i].old, it[i].target) == 0) moved++;
        } else {
            /* nothing stood there before: the target goes only when it holds
             * this run's new bytes (never a file the journal does not prove
             * it wrote) */
            char hex[ST_SHA256_HEX];
            sha_of(it[i].target, hex);
            if (hex[0] && !strcmp(hex, it[i].sha) && unlink(it[i].target) == 0) moved++;
        }
    }
    for (int i = 0; i < n; i++)
        if (it[i].old) {
            st_file_step();
            if (unlink(it[i].old) == 0) moved++; /* a link to the same file a rename left */
        }
    return moved;
}

static void items_free(item *it, int n)
{
    for (int i = 0; i < n; i++) {
        free(it[i].target);
        free(it[i].tmp);
        free(it[i].old);
    }
}

/* Whether a forward journal can be completed: every output either still
 * has its temporary file or was renamed already (its old file's link is
 * no longer the target). A rename that failed removed its temporary file;
 * a kill before the journal turned to "back" then leaves an output that
 * can only be rolled back. */
static bool can_complete(const item *it, int n)
{
    for (int i = 0; i < n; i++) {
        if (regular(it[i].tmp)) continue;
        struct stat t, o;
        const bool target = lstat(it[i].target, &t) == 0;
        if (!it[i].old) {
            if (!target) return false;
        } else if (lstat(it[i].old, &o) == 0 && target && t.st_dev == o.st_dev && t.st_ino == o.st_ino) {
            return false;
        }
    }
    return true;
}

/* "<prefix>.<tag><pid>[.<n>]" of a dead run: its pid, else -1. */
static long dead_run_pid(const char *name, const char *tag, bool counter)
{
    const long pid = st_out_name_pid(name, tag, counter);
    return st_pid_dead(pid, true) ? pid : -1; /* under the lock: this pid's names are an earlier process's */
}

/* The manifests of DIR (read once per settling). */
typedef struct {
    st_manifest *ms;
    char **names;
    int n;
} manifests;

static void manifests_load(const char *dir, manifests *m)
{
    memset(m, 0, sizeof *m);
    if (st_manifests_read(dir, &m->ms, &m->names, &m->n) != ST_OK) memset(m, 0, sizeof *m);
    st_clear_error();
}

static bool listed(const manifests *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        for (int k = 0; k < m->ms[i].n; k++)
            if (!strcmp(m->ms[i].e[k].name, name)) return true;
    return false;
}

/* Whether NAME is an output this tool makes in DIR: tables.json, the
 * journal, a name it gives new outputs ("strata-..." ending in .table,
 * .json, .html or .manifest), a name a manifest of the folder lists, or
 * a *.table that is a table for ID (a tune updates it in place). */
static bool our_output(const char *dir, const st_identity *id, const manifests *m, const char *name)
{
    if (!st_out_name_ok(name)) return false;
    if (!strcmp(name, ST_TABLES_INDEX_NAME) || !strcmp(name, ST_TUNE_JOURNAL_NAME)) return true;
    if (!output_name(name)) return false;
    if (!strncmp(name, "strata-", 7) || listed(m, name)) return true;
    if (!id || !st_ends_with(name, ".table")) return false;
    char *p = st_tune_fmt("%s/%s", dir, name);
    const bool mine = p && regular(p) && st_table_file_is_for(p, id);
    st_clear_error();
    free(p);
    return mine;
}

/* Parses the journal TEXT of DIR into IT[0..*N) and checks that it
 * describes an install of this tool, so settling it cannot remove or
 * replace a file that is not that install's: every temporary file and
 * link is named after its target and carries the pid of one run, which is
 * dead; every target is an output of that run (its manifest, in the
 * journal too, lists it); every target and temporary file is a regular
 * file or absent; a temporary file to rename in has the bytes the journal
 * records. Anything else: one line, and nothing in DIR changes. */
static st_status journal_parse(const char *who, const char *dir, const char *path, char *text, item *it, int *n, bool *back)
{
    *n = 0;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    if (!line || strncmp(line, JOURNAL_HEAD, strlen(JOURNAL_HEAD)) ||
        (strcmp(line + strlen(JOURNAL_HEAD), "forward") && strcmp(line + strlen(JOURNAL_HEAD), "back")))
        return st_fail(ST_ERR_PARSE, "%s: %s is not a journal this tool wrote (its first line): remove it to use %s",
                       who, path, dir);
    *back = !strcmp(line + strlen(JOURNAL_HEAD), "back");
    int ln = 1;
    long run = -1;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        ln++;
        char *f[4] = {line, NULL, NULL, NULL};
        for (int k = 1; k < 4; k++) {
            f[k] = f[k - 1] ? strchr(f[k - 1], '\t') : NULL;
            if (f[k]) *f[k]++ = '\0';
        }
        const size_t tl = f[1] ? strlen(f[1]) : 0;
        bool ok = *n < JOURNAL_MAX_ITEMS && f[1] && f[2] && f[3] && !strchr(f[3], '\t') &&
                  strlen(f[3]) == ST_SHA256_HEX - 1 && output_name(f[1]) && st_out_name_ok(f[0]) &&
                  !strncmp(f[0], f[1], tl) && !strncmp(f[0] + tl, ".tmp.", 5) &&
                  (!strcmp(f[2], "-") ||
                   (st_out_name_ok(f[2]) && !strncmp(f[2], f[1], tl) && !strncmp(f[2] + tl, ".old.", 5)));
        for (const char *h = f[3]; ok && *h; h++) ok = (*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f');
        /* one run's names, and that run is gone */
        const long pid = ok ? st_out_name_pid(f[0] + tl, ".tmp.", true) : -1;
        if (ok) ok = pid > 0 && (run < 0 || pid == run) && (!strcmp(f[2], "-") || st_out_name_pid(f[2] + tl, ".old.", false) == pid);
        if (ok && run < 0) ok = st_pid_dead(pid, true);
        if (ok) run = pid;
        for (int k = 0; ok && k < *n; k++) ok = strcmp(st_path_base(it[k].target), f[1]) != 0;
        if (!ok)
            return st_fail(ST_ERR_PARSE,
                           "%s: %s is not a journal this tool wrote (line %d), or its run is still alive: it was left "
                           "as it is, and so was %s; remove it to use %s",
                           who, path, ln, dir, dir);
        item *x = &it[(*n)++];
        memset(x, 0, sizeof *x);
        x->slot = -1;
        x->tmp = st_tune_fmt("%s/%s", dir, f[0]);
        x->target = st_tune_fmt("%s/%s", dir, f[1]);
        x->old = strcmp(f[2], "-") ? st_tune_fmt("%s/%s", dir, f[2]) : NULL;
        snprintf(x->sha, sizeof x->sha, "%s", f[3]);
        if (!x->tmp || !x->target || (strcmp(f[2], "-") && !x->old)) return st_fail(ST_ERR_NOMEM, "%s: out of memory", who);
    }
    return ST_OK;
}

/* The rest of the checks (journal_parse): the files on disk, and the
 * targets are outputs of this tool (our_output). */
static st_status journal_check(const char *who, const char *dir, const st_identity *id, const keep_file *keep, const char *path,
                               const item *it, int n)
{
    manifests m;
    manifests_load(dir, &m);
    st_status s = ST_OK;
    for (int i = 0; i < n && s == ST_OK; i++) {
        const char *why = NULL;
        if (is_kept(keep, it[i].target) || is_kept(keep, it[i].tmp) || is_kept(keep, it[i].old))
            why = "it names the input model";
        else if (!absent_or_regular(it[i].target)) why = "its target is not a regular file";
        else if (!absent_or_regular(it[i].tmp) || (it[i].old && !absent_or_regular(it[i].old)))
            why = "a temporary file or link is not a regular file";
        else if (!our_output(dir, id, &m, st_path_base(it[i].target))) why = "its target is not an output of this tool";
        else if (regular(it[i].tmp)) {
            char hex[ST_SHA256_HEX];
            sha_of(it[i].tmp, hex);
            if (strcmp(hex, it[i].sha)) why = "a temporary file does not hold the bytes the journal records";
        } else if (!it[i].old && regular(it[i].target)) {
            /* renamed in (nothing stood there before): it holds the run's bytes */
            char hex[ST_SHA256_HEX];
            sha_of(it[i].target, hex);
            if (strcmp(hex, it[i].sha)) why = "it holds bytes the journal does not record";
        }
        if (why)
            s = st_fail(ST_ERR_PARSE, "%s: %s does not describe an install of this tool (%s: %s): it was left as "
                        "it is, and so was its folder; remove it to use that folder",
                        who, path, st_path_base(it[i].target), why);
    }
    st_manifests_free(m.ms, m.names, m.n);
    return s;
}

/* Whether NAME in the locked folder DIR is what a dead run left: a probe
 * of a dead pid; a temporary file or link of a dead pid beside one of our
 * outputs (our_output); the gate's candidate beside one, holding a table
 * for ID. Never a file of another name, whatever its pattern. */
static bool litter(const char *dir, const st_identity *id, const manifests *m, const char *name)
{
    if (!strncmp(name, ST_TUNE_PROBE_PREFIX, strlen(ST_TUNE_PROBE_PREFIX))) /* the probe, or its link ".1" */
        return dead_run_pid(name, "-probe.", false) > 0 || dead_run_pid(name, "-probe.", true) > 0;
    char stem[512];
    const char *t = strstr(name, ".tmp.");
    const char *o = strstr(name, ".old.");
    if (t) /* the last one: "x.tmp.1.2" */
        while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
    if (o)
        while (strstr(o + 1, ".old.")) o = strstr(o + 1, ".old.");
    const char *cut = t ? t : o;
    if (!cut) {
        if (!st_ends_with(name, ".table.candidate") || !id) return false;
        /* the gate's candidate (no pid; only a tune makes one, under the
         * lock we hold): beside our table, and a table for this identity */
        const size_t l = strlen(name) - strlen(".candidate");
        if (l >= sizeof stem) return false;
        memcpy(stem, name, l);
        stem[l] = '\0';
        if (!our_output(dir, id, m, stem)) return false;
        char *p = st_tune_fmt("%s/%s", dir, name);
        const bool mine = p && regular(p) && st_table_file_is_for(p, id);
        st_clear_error();
        free(p);
        return mine;
    }
    if ((size_t)(cut - name) >= sizeof stem) return false;
    memcpy(stem, name, (size_t)(cut - name));
    stem[cut - name] = '\0';
    if (t ? dead_run_pid(name, ".tmp.", true) <= 0 : dead_run_pid(name, ".old.", false) <= 0) return false;
    if (st_ends_with(stem, ".table.candidate")) stem[strlen(stem) - strlen(".candidate")] = '\0';
    return our_output(dir, id, m, stem);
}

static int sweep(const char *dir, const st_identity *id, const keep_file *keep)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    manifests m;
    manifests_load(dir, &m);
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!litter(dir, id, &m, e->d_name)) continue;
        char *p = st_tune_fmt("%s/%s", dir, e->d_name);
        if (p && regular(p) && !is_kept(keep, p) && unlink(p) == 0) removed++;
        free(p);
    }
    closedir(d);
    st_manifests_free(m.ms, m.names, m.n);
    return removed;
}

st_status st_tune_out_recover(const char *who, const char *dir, const st_identity *id, const char *keep, int *done)
{
    if (!who) who = "tune";
    keep_file kf;
    keep_init(&kf, keep);
    if (done) *done = 0;
    char *path = st_tune_fmt("%s/" ST_TUNE_JOURNAL_NAME, dir), *text = NULL;
    if (!path) return st_fail(ST_ERR_NOMEM, "%s: out of memory", who);
    size_t len = 0;
    int err = 0;
    char why[ST_FILE_WHY_MAX] = "";
    st_status s = ST_OK;
    int moved = 0;
    struct stat js;
    if (lstat(path, &js) == 0 && !S_ISREG(js.st_mode)) {
        /* not a journal this tool wrote (a link, even one to nothing, is
         * neither read through nor replaced nor removed) */
        s = st_fail(ST_ERR_EXISTS, "%s: %s is %s, not a journal this tool wrote: it was left as it is, and so was %s; "
                    "remove it to use %s", who, path, st_out_kind(js.st_mode), dir, dir);
    } else if (st_file_read_all(path, JOURNAL_MAX_BYTES, &text, &len, why, &err) != ST_OK) {
        st_clear_error();
        if (err != ENOENT) s = st_fail(ST_ERR_IO, "%s: cannot read %s: %s", who, path, why);
    } else {
        item it[JOURNAL_MAX_ITEMS];
        int n = 0;
        bool back = false;
        s = journal_parse(who, dir, path, text, it, &n, &back);
        if (s == ST_OK) s = journal_check(who, dir, id, &kf, path, it, n);
        if (s == ST_OK) {
            if (!back && !can_complete(it, n)) back = true;
            moved = play(it, n, back);
            st_file_step();
            if (unlink(path) != 0) s = st_fail(ST_ERR_IO, "%s: cannot remove %s: %s", who, path, strerror(errno));
            sync_dir(dir);
            st_log("%s: %s: %s the install an interrupted run left (%d files)", who, dir, back ? "rolled back" : "completed",
                   moved);
            if (s == ST_OK && id) { /* the index follows the tables it lists */
                st_tables_index *ix = NULL;
                st_index_state before;
                bool wrote = false;
                s = st_tables_index_update(dir, id, NULL, true, &ix, &before, &wrote);
                st_tables_index_free(ix);
            }
        }
        items_free(it, n);
    }
    free(text);
    free(path);
    if (s == ST_OK) {
        const int swept = sweep(dir, id, &kf);
        if (swept) st_log("%s: %s: removed %d temporary files interrupted runs left", who, dir, swept);
        moved += swept;
    }
    if (done) *done = moved;
    return s;
}

/* ---- install ------------------------------------------------------------------ */

static void drop_temps(item *it, int n)
{
    for (int i = 0; i < n; i++)
        if (it[i].tmp) {
            unlink(it[i].tmp);
            st_tmpfile_untrack(it[i].slot);
        }
}

static void drop_links(item *it, int n)
{
    for (int i = 0; i < n; i++)
        if (it[i].old) unlink(it[i].old);
}

/* A hard link to what stands at the target now, for a roll back. */
static st_status keep_old(item *x)
{
    x->old = st_tune_fmt("%s.old.%ld", x->target, (long)getpid());
    if (!x->old) return st_fail(ST_ERR_NOMEM, "out of memory");
    unlink(x->old); /* one a previous install of this process left: never, but a link must not fail on it */
    st_file_step();
    if (link(x->target, x->old) == 0) return ST_OK;
    const int e = errno;
    free(x->old);
    x->old = NULL;
    if (e == ENOENT) return ST_OK; /* nothing there: a roll back removes the new file */
    return st_fail(ST_ERR_IO, "%s: cannot keep the old file for a roll back (a hard link): %s", x->target, strerror(e));
}

/* The journaled install of N files (TARGET[k] gets TEXT[k], in ROLE[k])
 * and the run's manifest of them (at MANIFEST, listing the index too when
 * INDEX names it) in DIR, under DIR's lock: all written to temporary files
 * first (a full disk stops there), links to the old files kept, the
 * journal written (the commit point; a stop before it installs nothing),
 * the renames, then FINISH (may be NULL: a step that belongs to the set,
 * e.g. the index): when it fails, the set is rolled back. The one home of
 * installing a set. */
static st_status journal_install(const char *dir, const char *journal_path, const char *manifest, const char *index,
                                 int n_files, const char *const *files, const st_mf_role *role,
                                 const char *const *texts, const size_t *lens, const volatile int *stop,
                                 st_status (*finish)(void *), void *arg, const char *what)
{
    /* the run's manifest: every file it leaves, with the bytes it wrote */
    st_manifest mf;
    memset(&mf, 0, sizeof mf);
    char *mf_text = NULL;
    size_t mf_len = 0;
    st_status s = n_files > 0 && n_files < JOURNAL_MAX_ITEMS ? ST_OK
                                                             : st_fail(ST_ERR_INVALID_ARG, "install: %d files", n_files);
    for (int k = 0; k < n_files && s == ST_OK; k++) s = st_manifest_add(&mf, role[k], st_path_base(files[k]), texts[k], lens[k]);
    if (s == ST_OK && index) s = st_manifest_add(&mf, ST_MF_INDEX, st_path_base(index), NULL, 0);
    /* the earlier tables the manifest replaced proved, still here as they were */
    if (s == ST_OK) st_manifest_carry_tables(&mf, dir, manifest);
    if (s == ST_OK) s = st_manifest_format(&mf, &mf_text, &mf_len);
    if (s != ST_OK) return s;
    const char *target[JOURNAL_MAX_ITEMS], *text[JOURNAL_MAX_ITEMS];
    size_t len[JOURNAL_MAX_ITEMS];
    for (int k = 0; k < n_files; k++) {
        target[k] = files[k];
        text[k] = texts[k];
        len[k] = lens[k];
    }
    target[n_files] = manifest;
    text[n_files] = mf_text;
    len[n_files] = mf_len;
    const int n = n_files + 1;
    item it[JOURNAL_MAX_ITEMS];
    memset(it, 0, sizeof it);
    int m = 0;
    for (int k = 0; k < n && s == ST_OK; k++) {
        it[m].target = strdup(target[k]);
        it[m].slot = -1;
        st_sha256_buf(text[k], len[k], it[m].sha);
        if (!it[m++].target) s = st_fail(ST_ERR_NOMEM, "install: out of memory");
    }
    /* all written first: a full disk stops the install before anything moves */
    for (int k = 0; k < m && s == ST_OK; k++) s = st_file_write_temp(it[k].target, text[k], len[k], &it[k].tmp, &it[k].slot);
    free(mf_text);
    for (int i = 0; i < m && s == ST_OK; i++) s = keep_old(&it[i]);
    /* the commit point is the journal: a stop (SIGINT, SIGTERM, ...) that
     * arrived before it installs nothing */
    st_file_step();
    if (s == ST_OK && stop && *stop) s = st_fail(ST_ERR_INTERRUPTED, "interrupted before the install's commit point");
    if (s == ST_OK) st_file_commit_step = st_file_steps;
    char *jt = s == ST_OK ? journal_text(it, m, false) : NULL;
    if (s == ST_OK && !jt) s = st_fail(ST_ERR_NOMEM, "install: out of memory");
    if (s == ST_OK) s = st_file_write_atomic(journal_path, jt, strlen(jt));
    free(jt);
    if (s != ST_OK) { /* nothing moved; a journal renamed in whose folder sync failed goes too (the
                       * settling under the lock left none before this run's; a regular file
                       * only: anything else standing there was never written over) */
        struct stat js;
        if (lstat(journal_path, &js) == 0 && S_ISREG(js.st_mode)) unlink(journal_path);
        char why[4096];
        snprintf(why, sizeof why, "%s", st_last_error());
        drop_temps(it, m);
        drop_links(it, m);
        items_free(it, m);
        return st_fail(s, "%s; %s", why, what);
    }
    /* The journal stands: from here a kill leaves the new set (the next run
     * completes the renames). */
    for (int i = 0; i < m && s == ST_OK; i++) {
        bool renamed = false;
        s = st_file_commit(it[i].target, it[i].tmp, it[i].slot, &renamed);
        it[i].slot = -1;
        if (s != ST_OK && renamed) s = ST_OK; /* only the folder's sync failed: the file is in place */
    }
    const bool finish_failed = s == ST_OK && finish && (s = finish(arg)) != ST_OK;
    if (s != ST_OK) {
        char why[4096];
        snprintf(why, sizeof why, "%s", st_last_error());
        /* the journal turns: a kill from here leaves the old set */
        char *back = journal_text(it, m, true);
        if (back) (void)st_file_write_atomic(journal_path, back, strlen(back));
        free(back);
        play(it, m, true);
        st_file_step();
        /* a step that failed after its file was in place (the index renamed
         * in, its folder's sync failed) follows the old set again: best
         * effort, the old set is what stands */
        if (finish_failed) (void)finish(arg);
        unlink(journal_path);
        sync_dir(dir);
        items_free(it, m);
        st_clear_error();
        return st_fail(s, "%s; %s (the old files are back)", why, what);
    }
    play(it, m, false); /* the links go */
    st_file_step();
    unlink(journal_path);
    sync_dir(dir);
    items_free(it, m);
    return s;
}

typedef struct {
    const char *dir;
    const st_identity *id;
    const st_dispatch_config *cfg;
} index_step;

/* The index follows the tables it lists, and is part of the set: when it
 * cannot be written (a full disk) the set is rolled back, so "not
 * installed" is true; the journal stays until it is written. */
static st_status write_index(void *arg)
{
    const index_step *x = arg;
    st_tables_index *ix = NULL;
    st_index_state before;
    bool wrote = false;
    const st_status s = st_tables_index_update(x->dir, x->id, x->cfg, true, &ix, &before, &wrote);
    st_tables_index_free(ix);
    return s;
}

st_status st_tune_out_install(st_tune_out *o, const st_identity *id, const st_dispatch_config *cfg,
                              const char *table_text, size_t table_len,
                              const char *report_text, size_t report_len, const char *html, size_t html_len)
{
    const char *target[3] = {o->report_path, o->html_path, o->table_path};
    const char *text[3] = {report_text, html, table_text};
    const size_t len[3] = {report_len, html_len, table_len};
    const st_mf_role role[3] = {ST_MF_REPORT, ST_MF_PAGE, ST_MF_TABLE};
    /* without a page: the report and the table */
    const int skip = html ? -1 : 1;
    const char *t2[3];
    const char *x2[3];
    size_t l2[3];
    st_mf_role r2[3];
    int n = 0;
    for (int k = 0; k < 3; k++)
        if (k != skip) {
            t2[n] = target[k];
            x2[n] = text[k];
            l2[n] = len[k];
            r2[n++] = role[k];
        }
    index_step ixs = {o->dir, id, cfg};
    return journal_install(o->dir, o->journal_path, o->manifest_path, o->index_path, n, t2, r2, x2, l2, o->stop,
                           write_index, &ixs, "the table was not installed");
}

st_status st_out_install_set(const char *dir, const char *manifest, int n, const char *const *paths,
                             const st_mf_role *roles, const char *const *texts, const size_t *lens,
                             const volatile int *stop)
{
    char *journal = st_tune_fmt("%s/" ST_TUNE_JOURNAL_NAME, dir);
    if (!journal) return st_fail(ST_ERR_NOMEM, "install: out of memory");
    const st_status s = journal_install(dir, journal, manifest, NULL, n, paths, roles, texts, lens, stop, NULL, NULL,
                                        "nothing was installed");
    free(journal);
    return s;
}
