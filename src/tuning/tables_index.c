#define _POSIX_C_SOURCE 200809L
/* tables.json (strata/tools/tables.h): built from a folder's tables, written and
 * read back, compared with the folder, and pruned of superseded tables. */
#include "strata/tools/tables.h"
#include "tools_internal.h"
#include "file_write.h"
#include "out_manifest.h"
#include "tune_out.h"
#include "strata/files.h"
#include "strata/table.h"
#include "strata/tools/text.h"
#include "report_json.h"
#include "sha256.h"

_Static_assert(ST_TABLES_HASH_HEX == ST_SHA256_HEX, "an index entry holds a SHA-256 in hex");

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const STATUS_TEXT[] = {
#define ST_TSTATUS_TEXT_(e, text) text,
    ST_TABLE_STATUSES(ST_TSTATUS_TEXT_)
#undef ST_TSTATUS_TEXT_
};
enum { N_STATUS = sizeof STATUS_TEXT / sizeof STATUS_TEXT[0] };

const char *st_table_status_text(st_table_status s) { return (unsigned)s < N_STATUS ? STATUS_TEXT[s] : "?"; }

bool st_table_status_from_text(const char *text, st_table_status *s)
{
    for (int k = 0; k < (int)N_STATUS; k++)
        if (!strcmp(text, STATUS_TEXT[k])) {
            *s = (st_table_status)k;
            return true;
        }
    return false;
}

const char *st_index_state_text(st_index_state s)
{
    switch (s) {
    case ST_INDEX_UP_TO_DATE: return "up to date";
    case ST_INDEX_MISSING: return "missing";
    case ST_INDEX_DAMAGED: return "damaged";
    case ST_INDEX_STALE: return "stale (the tables changed)";
    }
    return "?";
}

void st_tables_index_free(st_tables_index *ix)
{
    if (!ix) return;
    for (int i = 0; i < ix->n; i++) free(ix->e[i].shapes);
    free(ix->e);
    free(ix);
}

/* Bounded copy (truncates; always NUL-terminated). */
static void copy(char *dst, size_t n, const char *src)
{
    size_t l = strlen(src);
    if (l >= n) l = n - 1;
    memcpy(dst, src, l);
    dst[l] = '\0';
}

static char *join(const char *dir, const char *name)
{
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    return p;
}

/* The *.table regular files of DIR, sorted: the loader's own choice of
 * files (st_table_dir_list). */
static st_status scan(const char *dir, char ***out, int *n_out)
{
    size_t n = 0;
    *n_out = 0;
    ST_TRY(st_table_dir_list(dir, out, &n, NULL));
    if (n > (size_t)INT32_MAX) {
        st_table_dir_list_free(*out, n);
        *out = NULL;
        return st_fail(ST_ERR_NOMEM, "%s: too many tables", dir);
    }
    *n_out = (int)n;
    return ST_OK;
}

static bool add_shape(st_tables_entry *e, int *cap, const char *key, const char *choice)
{
    if (e->n_shapes == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        st_index_shape *p = realloc(e->shapes, sizeof *p * (size_t)*cap);
        if (!p) return false;
        e->shapes = p;
    }
    st_index_shape *s = &e->shapes[e->n_shapes++];
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->choice, sizeof s->choice, "%s", choice);
    return true;
}

static st_status table_shapes(const st_table *t, st_tables_entry *e)
{
    int cap = 0;
    char key[96], choice[16];
    for (size_t i = 0; i < st_table_expert_count(t); i++) {
        st_expert_key k;
        int gu = 0, dn = 0;
        st_table_expert_at(t, i, &k, &gu, &dn);
        st_expert_key_text(&k, key, sizeof key);
        st_expert_choice_name(gu, dn, choice, sizeof choice);
        if (!add_shape(e, &cap, key, choice)) return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    }
    for (size_t i = 0; i < st_table_mmvq_count(t); i++) {
        st_mmvq_key k;
        int rows = 0;
        st_table_mmvq_at(t, i, &k, &rows);
        st_mmvq_key_text(&k, key, sizeof key);
        st_mmvq_choice_name(rows, choice, sizeof choice);
        if (!add_shape(e, &cap, key, choice)) return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    }
    e->n_rows = e->n_shapes;
    for (size_t i = 0; i < st_table_tuned_default_count(t); i++) {
        bool expert = false;
        st_mmvq_key mk;
        st_expert_key ek;
        st_table_tuned_default_at(t, i, &expert, &mk, &ek);
        if (expert) st_expert_key_text(&ek, key, sizeof key);
        else st_mmvq_key_text(&mk, key, sizeof key);
        st_mmvq_choice_name(0, choice, sizeof choice);
        if (!add_shape(e, &cap, key, choice)) return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    }
    return ST_OK;
}

/* Whether the report JSON at PATH describes table FILE; names the table it
 * describes otherwise. */
static void report_status(const char *dir, const char *file, st_index_report *r)
{
    if (!st_out_name_ok(r->file)) { /* "../x", "a/b": never looked at (file_write.h) */
        snprintf(r->status, sizeof r->status, "not a file of this folder");
        return;
    }
    char *path = join(dir, r->file), *buf = NULL;
    size_t len = 0;
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        snprintf(r->status, sizeof r->status, "missing");
        free(path);
        return;
    }
    snprintf(r->status, sizeof r->status, "present");
    const size_t l = strlen(r->file);
    if (l > 5 && !strcmp(r->file + l - 5, ".json") && st_read_file(path, &buf, &len) == ST_OK) {
        cJSON *j = cJSON_ParseWithLength(buf, len);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "table"), "path");
        if (cJSON_IsString(t) && t->valuestring) {
            const char *b = strrchr(t->valuestring, '/');
            b = b ? b + 1 : t->valuestring;
            if (strcmp(b, file)) snprintf(r->status, sizeof r->status, "describes %s", b);
        }
        cJSON_Delete(j);
    }
    free(buf);
    free(path);
}

static st_status build_entry(const char *dir, const char *name, const st_identity *id, const st_dispatch_config *cfg,
                             st_tables_entry *e, bool *loads)
{
    memset(e, 0, sizeof *e);
    snprintf(e->file, sizeof e->file, "%s", name);
    char *path = join(dir, name), *buf = NULL;
    if (!path) return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    size_t len = 0;
    char why[ST_FILE_WHY_MAX] = "";
    st_status s = st_file_read_all(path, ST_TABLE_MAX_BYTES, &buf, &len, why, NULL);
    *loads = false;
    if (s != ST_OK) {
        e->status = ST_TSTATUS_REFUSED;
        snprintf(e->status_line, sizeof e->status_line, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", path,
                 why[0] ? why : strerror(EIO));
        free(path);
        return ST_OK;
    }
    st_sha256_buf(buf, len, e->sha256);
    e->bytes = (double)len;
    st_table *t = NULL;
    char msg[ST_TABLE_MSG_MAX];
    e->readable = st_table_parse_any(buf, len, path, &t, msg, sizeof msg) == ST_OK;
    if (e->readable) {
        e->id = *st_table_identity(t);
        st_provenance_from_table(t, &e->prov);
        s = table_shapes(t, e);
    } else {
        st_table_read_header(buf, len, &e->id); /* the tokens, when the header itself is fine */
    }
    st_table_destroy(t);
    free(buf);
    copy(e->id.device_name, sizeof e->id.device_name, e->prov.device);
    copy(e->id.driver, sizeof e->id.driver, e->prov.driver);
    t = NULL;
    *loads = st_table_load_msg(path, id, cfg, &t, msg, sizeof msg) == ST_OK && t;
    st_table_destroy(t);
    copy(e->status_line, sizeof e->status_line, msg);
    e->status = *loads ? ST_TSTATUS_ENGAGES : ST_TSTATUS_REFUSED;
    char rep[ST_PROVENANCE_VALUE_MAX];
    snprintf(rep, sizeof rep, "%s", e->prov.report);
    char *save = NULL;
    for (char *tok = strtok_r(rep, " ,", &save); tok && e->n_reports < 2; tok = strtok_r(NULL, " ,", &save)) {
        st_index_report *r = &e->reports[e->n_reports++];
        snprintf(r->file, sizeof r->file, "%s", tok);
        report_status(dir, name, r);
    }
    /* the page is rendered from the JSON of the same name: it describes what the JSON does */
    for (int k = 0; k < e->n_reports; k++)
        for (int j = 0; j < e->n_reports; j++) {
            const size_t lk = strlen(e->reports[k].file), lj = strlen(e->reports[j].file);
            if (lk > 5 && lj > 5 && !strcmp(e->reports[k].file + lk - 5, ".html") && !strcmp(e->reports[j].file + lj - 5, ".json") &&
                lk == lj && !strncmp(e->reports[k].file, e->reports[j].file, lk - 5) &&
                !strcmp(e->reports[k].status, "present") && !strncmp(e->reports[j].status, "describes ", 10))
                copy(e->reports[k].status, sizeof e->reports[k].status, e->reports[j].status);
        }
    free(path);
    return s;
}

static bool same_model(const st_tables_entry *a, const st_tables_entry *b)
{
    if (a->prov.model_sha256[0] && b->prov.model_sha256[0]) return !strcmp(a->prov.model_sha256, b->prov.model_sha256);
    return a->prov.model[0] && !strcmp(a->prov.model, b->prov.model);
}

/* Marks the superseded entries (see strata/tools/tables.h). */
static void supersede(st_tables_index *ix)
{
    for (int i = 0; i < ix->n; i++) {
        st_tables_entry *a = &ix->e[i];
        if (a->status == ST_TSTATUS_ENGAGES || !a->readable || !a->prov.date[0]) continue;
        const st_tables_entry *best = NULL;
        for (int j = 0; j < ix->n; j++) {
            const st_tables_entry *b = &ix->e[j];
            if (i == j || !b->readable || !b->prov.date[0] || strcmp(a->id.arch, b->id.arch) ||
                strcmp(a->prov.device, b->prov.device))
                continue;
            if (!same_model(a, b) && !st_identity_matches(&a->id, &b->id)) continue;
            const int c = strcmp(b->prov.date, a->prov.date);
            /* newer; at an equal date only the one that engages wins (no cycle) */
            if (c < 0 || (c == 0 && b->status != ST_TSTATUS_ENGAGES)) continue;
            if (!best || b->status == ST_TSTATUS_ENGAGES || strcmp(b->prov.date, best->prov.date) > 0) best = b;
        }
        if (best) {
            a->status = ST_TSTATUS_SUPERSEDED;
            snprintf(a->superseded_by, sizeof a->superseded_by, "%s", best->file);
        }
    }
}

st_status st_tables_index_build(const char *dir, const st_identity *id, const st_dispatch_config *cfg, st_tables_index **out)
{
    *out = NULL;
    char **names = NULL;
    int n = 0;
    ST_TRY(scan(dir, &names, &n));
    st_tables_index *ix = calloc(1, sizeof *ix);
    bool *loads = calloc((size_t)n + 1, sizeof *loads);
    if (ix) ix->e = calloc((size_t)n + 1, sizeof *ix->e);
    st_status s = ix && ix->e && loads ? ST_OK : st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    for (int i = 0; i < n && s == ST_OK; i++) {
        s = build_entry(dir, names[i], id, cfg, &ix->e[i], &loads[i]);
        ix->n = i + 1;
    }
    if (s == ST_OK) {
        st_utc_now(ix->date, sizeof ix->date);
        snprintf(ix->tool, sizeof ix->tool, "tune_decode %s", st_version());
        snprintf(ix->source_commit, sizeof ix->source_commit, "%s", st_source_commit());
        st_identity_header(id, ix->writer, sizeof ix->writer);
        snprintf(ix->writer_device, sizeof ix->writer_device, "%s", id->device_name);
        /* the folder as the loader sees it decides which one engages: with
         * two tables of this identity neither does */
        st_table *t = NULL;
        char msg[ST_TABLE_MSG_MAX];
        const bool dir_ok = st_table_load_msg(dir, id, cfg, &t, msg, sizeof msg) == ST_OK && t;
        st_table_destroy(t);
        copy(ix->dir_line, sizeof ix->dir_line, msg);
        for (int i = 0; i < ix->n; i++) {
            st_tables_entry *e = &ix->e[i];
            if (!loads[i]) continue;
            if (dir_ok && st_identity_matches(&e->id, id)) {
                snprintf(ix->engages, sizeof ix->engages, "%s", e->file);
            } else {
                e->status = ST_TSTATUS_REFUSED;
                copy(e->status_line, sizeof e->status_line, msg);
            }
        }
        supersede(ix);
    }
    free(loads);
    st_table_dir_list_free(names, (size_t)n);
    if (s != ST_OK) {
        st_tables_index_free(ix);
        return s;
    }
    *out = ix;
    return ST_OK;
}

/* ---- the file ------------------------------------------------------------- */

st_status st_tables_index_read(const char *dir, st_tables_index **out, st_index_state *state)
{
    *out = NULL;
    char *path = join(dir, ST_TABLES_INDEX_NAME), *buf = NULL;
    if (!path) return st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    size_t len = 0;
    int err = 0;
    st_status s = st_file_read_all(path, ST_TABLE_MAX_BYTES, &buf, &len, NULL, &err);
    free(path);
    if (s != ST_OK) {
        *state = err == ENOENT ? ST_INDEX_MISSING : ST_INDEX_DAMAGED;
        return ST_OK;
    }
    st_tables_index *ix = NULL;
    s = st_tables_index_parse(buf, len, &ix);
    free(buf);
    if (s != ST_OK) {
        *state = ST_INDEX_DAMAGED;
        return ST_OK;
    }
    /* up to date: the same table files, with the same bytes */
    char **names = NULL;
    int n = 0;
    s = scan(dir, &names, &n);
    if (s != ST_OK) {
        st_tables_index_free(ix);
        return s;
    }
    bool same = n == ix->n;
    for (int i = 0; same && i < n; i++) {
        const st_tables_entry *e = NULL;
        /* the index holds each name as it was written (st_text_utf8_dup: a
         * name that is not UTF-8 escaped), so compare it so, or such a name
         * never matches and the index is rewritten on every listing */
        char *u = st_text_utf8_dup(names[i]);
        for (int k = 0; k < ix->n; k++)
            if (!strcmp(ix->e[k].file, u ? u : names[i])) e = &ix->e[k];
        free(u);
        char *p = join(dir, names[i]), *tb = NULL;
        size_t tl = 0;
        char hex[ST_SHA256_HEX] = "";
        if (p && st_read_file(p, &tb, &tl) == ST_OK) st_sha256_buf(tb, tl, hex);
        free(tb);
        free(p);
        same = e && !strcmp(e->sha256, hex);
    }
    st_table_dir_list_free(names, (size_t)n);
    *state = same ? ST_INDEX_UP_TO_DATE : ST_INDEX_STALE;
    *out = ix;
    return ST_OK;
}

st_status st_tables_index_write(const char *dir, const st_tables_index *ix)
{
    char *text = NULL, *path = join(dir, ST_TABLES_INDEX_NAME);
    size_t len = 0;
    st_status s = path ? st_tables_index_format(ix, &text, &len) : st_fail(ST_ERR_NOMEM, "tables index: out of memory");
    if (s == ST_OK) s = st_file_write_atomic(path, text, len);
    free(text);
    free(path);
    return s;
}

st_status st_tables_index_write_locked(const char *dir, const st_identity *id, const st_dispatch_config *cfg,
                                       st_tables_index **ix)
{
    st_folder_lock_t l;
    ST_TRY(st_folder_lock(dir, "table list", &l));
    st_tables_index *now = NULL;
    st_status s = st_tables_index_build(dir, id, cfg, &now);
    if (s == ST_OK) s = st_tables_index_write(dir, now);
    st_folder_unlock(&l);
    if (now) {
        st_tables_index_free(*ix);
        *ix = now;
    }
    return s;
}

st_status st_tables_index_update(const char *dir, const st_identity *id, const st_dispatch_config *cfg, bool write,
                                 st_tables_index **out, st_index_state *before, bool *wrote)
{
    *out = NULL;
    *wrote = false;
    st_tables_index *old = NULL;
    ST_TRY(st_tables_index_read(dir, &old, before));
    st_tables_index_free(old);
    st_tables_index *ix = NULL;
    ST_TRY(st_tables_index_build(dir, id, cfg, &ix));
    st_status s = ST_OK;
    if (write || *before != ST_INDEX_UP_TO_DATE) {
        s = st_tables_index_write(dir, ix);
        *wrote = s == ST_OK;
    }
    *out = ix;
    return s;
}

/* ---- pruning -------------------------------------------------------------- */

static void note(st_prune_note fn, void *user, const char *fmt, const char *a, const char *b)
{
    char line[1200];
    snprintf(line, sizeof line, fmt, a, b);
    if (fn) fn(user, line);
}

/* A regular file in DIR (a link, a folder, a FIFO is never removed). */
static bool regular_in(const char *dir, const char *name)
{
    char *p = join(dir, name);
    struct stat st;
    const bool ok = p && lstat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* Whether the table file NAME is one prune may remove: a plain name of a
 * *.table regular file in the folder that is not the table that engages. */
static bool table_prunable(const char *dir, const st_tables_index *ix, const char *name)
{
    return st_out_name_ok(name) && st_ends_with(name, ".table") && strcmp(name, ix->engages) && regular_in(dir, name);
}

/* Whether the report NAME of the superseded table E is proven to be E's and
 * only E's: a plain name ending in .json or .html (so never a table, the
 * lock, tables.json or a path out of the folder), a regular file, no other
 * entry of the index names it or is named by it, and the JSON (for a page:
 * the JSON of the same name, which E names too) says it describes E. */
static bool report_proven(const char *dir, const st_tables_index *ix, const st_tables_entry *e, const char *name)
{
    const bool html = st_ends_with(name, ".html");
    if (!st_out_name_ok(name) || !(html || st_ends_with(name, ".json")) || !strcmp(name, ST_TABLES_INDEX_NAME) ||
        !regular_in(dir, name))
        return false;
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *o = &ix->e[i];
        if (o == e) continue;
        if (!strcmp(o->file, name)) return false;
        for (int k = 0; k < o->n_reports; k++)
            if (!strcmp(o->reports[k].file, name)) return false;
    }
    char json[ST_INDEX_NAME_MAX + 8];
    const size_t l = strlen(name);
    snprintf(json, sizeof json, "%.*s%s", (int)(html ? l - 5 : l), name, html ? ".json" : "");
    if (html) {
        bool named = false;
        for (int k = 0; k < e->n_reports; k++) named |= !strcmp(e->reports[k].file, json);
        if (!named || !regular_in(dir, json)) return false;
    }
    char *path = join(dir, json), *buf = NULL;
    size_t len = 0;
    bool mine = false;
    if (path && st_read_file(path, &buf, &len) == ST_OK) {
        cJSON *j = cJSON_ParseWithLength(buf, len);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "table"), "path");
        if (cJSON_IsString(t) && t->valuestring) {
            const char *b = strrchr(t->valuestring, '/');
            mine = !strcmp(b ? b + 1 : t->valuestring, e->file);
        }
        cJSON_Delete(j);
    }
    st_clear_error();
    free(buf);
    free(path);
    return mine;
}

static const st_tables_entry *entry_named(const st_tables_index *ix, const char *file)
{
    for (int i = 0; i < ix->n; i++)
        if (!strcmp(ix->e[i].file, file)) return &ix->e[i];
    return NULL;
}

/* Whether manifest M still proves a file of DIR (an entry whose file has
 * the bytes it lists): one that proves nothing any more goes with the
 * files it listed. */
static bool manifest_live(const char *dir, const st_manifest *m)
{
    for (int k = 0; k < m->n; k++) {
        if (m->e[k].role == ST_MF_INDEX) continue;
        char hex[ST_SHA256_HEX];
        st_manifest_file_sha(dir, m->e[k].name, hex);
        if (hex[0] && !strcmp(hex, m->e[k].sha256)) return true;
    }
    return false;
}

/* Prune proper, under the folder's lock, after the folder was settled. */
static st_status prune_locked(const char *dir, const st_identity *id, const st_dispatch_config *cfg,
                              const st_tables_index *ix, st_prune_note fn, void *user, int *n_removed)
{
    /* the folder as it is now (settling may have completed an install):
     * what engages now is never removed, whatever IX said */
    st_tables_index *now = NULL;
    /* Engagement is judged as this build engages without dispatch knobs: a
     * knob (STRATA_EXPERT_V2=1, ...) stops every table from engaging for
     * as long as it is set, which must not make this build's own table
     * "superseded" and removable (issue 26). */
    st_dispatch_config clean;
    st_dispatch_config_default(&clean);
    ST_TRY(st_tables_index_build(dir, id, &clean, &now));
    const int knob = cfg ? st_dispatch_config_first_active(cfg) : -1;
    st_manifest *ms = NULL;
    char **mnames = NULL;
    int nm = 0;
    st_status s = st_manifests_read(dir, &ms, &mnames, &nm);
    bool *touched = s == ST_OK ? calloc((size_t)nm + 1, sizeof *touched) : NULL;
    if (s == ST_OK && !touched) s = st_fail(ST_ERR_NOMEM, "prune: out of memory");
    for (int i = 0; i < ix->n && s == ST_OK; i++) {
        const st_tables_entry *e = &ix->e[i];
        if (e->status != ST_TSTATUS_SUPERSEDED) continue;
        const st_tables_entry *n = entry_named(now, e->file);
        if (knob >= 0 && n && n->status == ST_TSTATUS_ENGAGES) {
            note(fn, user, "kept %s: it engages in this build without dispatch knobs (%s is set)", e->file,
                 st_knob_label((st_knob)knob));
            continue;
        }
        if (!table_prunable(dir, ix, e->file) || !table_prunable(dir, now, e->file)) {
            note(fn, user, "kept %s: not a *.table file of this folder that prune may remove%s", e->file, "");
            continue;
        }
        if (!n || n->status != ST_TSTATUS_SUPERSEDED || strcmp(n->sha256, e->sha256)) {
            note(fn, user, "kept %s: it changed since it was listed%s", e->file, "");
            continue;
        }
        const int m = st_manifests_prove(ms, nm, ST_MF_TABLE, e->file, e->sha256);
        if (m < 0) {
            note(fn, user, "kept %s: no manifest of this folder lists it with its bytes (not proven to be a table a "
                 "tune installed here)%s", e->file, "");
            continue;
        }
        /* which reports are E's, decided before anything of E is removed */
        bool proven[2] = {false, false};
        for (int k = 0; k < e->n_reports && k < 2; k++) {
            const char *rf = e->reports[k].file;
            char hex[ST_SHA256_HEX] = "";
            if (!strcmp(e->reports[k].status, "present") && report_proven(dir, now, n, rf)) st_manifest_file_sha(dir, rf, hex);
            const st_mf_role role = st_ends_with(rf, ".html") ? ST_MF_PAGE : ST_MF_REPORT;
            const int rm = hex[0] ? st_manifests_prove(ms, nm, role, rf, hex) : -1;
            proven[k] = rm >= 0;
            if (rm >= 0) touched[rm] = true;
        }
        char hex[ST_SHA256_HEX];
        st_manifest_file_sha(dir, e->file, hex);
        if (strcmp(hex, e->sha256)) { /* changed since it was listed: not what the user saw */
            note(fn, user, "kept %s: it changed since it was listed%s", e->file, "");
            continue;
        }
        char *p = join(dir, e->file);
        if (!p || unlink(p) != 0) {
            s = st_fail(ST_ERR_IO, "%s/%s: cannot remove: %s", dir, e->file, p ? strerror(errno) : "out of memory");
            free(p);
            break;
        }
        free(p);
        touched[m] = true;
        (*n_removed)++;
        note(fn, user, "removed %s (superseded by %s)", e->file, e->superseded_by);
        for (int k = 0; k < e->n_reports && k < 2; k++) {
            if (!proven[k]) { /* missing, another table's now, or not proven ours: kept */
                if (!strcmp(e->reports[k].status, "present") && strcmp(e->reports[k].file, e->file))
                    note(fn, user, "kept %s: not proven to be the report of %s", e->reports[k].file, e->file);
                continue;
            }
            char *rp = join(dir, e->reports[k].file);
            if (rp && unlink(rp) == 0) note(fn, user, "removed %s (the report of %s)", e->reports[k].file, e->file);
            free(rp);
        }
    }
    /* a manifest whose files are all gone or changed proves nothing: it goes too */
    for (int i = 0; i < nm && s == ST_OK; i++) {
        if (!touched[i] || manifest_live(dir, &ms[i]) || !regular_in(dir, mnames[i])) continue;
        char *p = join(dir, mnames[i]);
        if (p && unlink(p) == 0) note(fn, user, "removed %s (the manifest of the files removed)%s", mnames[i], "");
        free(p);
    }
    free(touched);
    st_manifests_free(ms, mnames, nm);
    st_tables_index_free(now);
    if (s != ST_OK) return s;
    st_tables_index *fresh = NULL;
    ST_TRY(st_tables_index_build(dir, id, cfg, &fresh));
    s = st_tables_index_write(dir, fresh);
    st_tables_index_free(fresh);
    return s;
}

st_status st_tables_prune(const char *dir, const st_identity *id, const st_dispatch_config *cfg, const st_tables_index *ix,
                          st_prune_note fn, void *user, int *n_removed)
{
    *n_removed = 0;
    /* under the folder's lock, as a tune writes it: settled first (an
     * interrupted install completed or rolled back, the litter of dead
     * runs removed), so prune never judges half of an install */
    st_folder_lock_t lk;
    ST_TRY(st_folder_lock(dir, "prune", &lk));
    int settled = 0;
    st_status s = st_tune_out_recover("table list", dir, id, NULL, &settled);
    if (s == ST_OK) s = prune_locked(dir, id, cfg, ix, fn, user, n_removed);
    st_folder_unlock(&lk);
    return s;
}
