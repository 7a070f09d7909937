/* The manifest of a run in a tables folder: see out_manifest.h. */
#define _POSIX_C_SOURCE 200809L
#include "out_manifest.h"
#include "file_write.h"
#include "report_json.h"
#include "strata/files.h"
#include "strata/identity.h"
#include "tools_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const ROLE[] = {"table", "report", "page", "index", "profile"};
enum { N_ROLES = sizeof ROLE / sizeof ROLE[0] };

st_status st_manifest_add(st_manifest *m, st_mf_role role, const char *name, const char *text, size_t len)
{
    if (m->n >= ST_MANIFEST_MAX_ENTRIES || !st_out_name_ok(name) || (unsigned)role >= N_ROLES)
        return st_fail(ST_ERR_INVALID_ARG, "manifest: cannot list '%s'", name ? name : "(null)");
    st_mf_entry *e = &m->e[m->n++];
    memset(e, 0, sizeof *e);
    e->role = role;
    snprintf(e->name, sizeof e->name, "%s", name);
    if (role != ST_MF_INDEX) st_sha256_buf(text ? text : "", text ? len : 0, e->sha256);
    return ST_OK;
}

st_status st_manifest_format(const st_manifest *m, char **text, size_t *len)
{
    char date[32];
    st_utc_now(date, sizeof date);
    size_t cap = 128 + (size_t)m->n * (sizeof m->e[0].name + ST_SHA256_HEX + 16);
    char *t = malloc(cap);
    if (!t) return st_fail(ST_ERR_NOMEM, "manifest: out of memory");
    size_t at = (size_t)snprintf(t, cap, ST_MANIFEST_HEAD "\n# run: %s tune_decode %s\n", date, st_version());
    for (int i = 0; i < m->n; i++)
        at += (size_t)snprintf(t + at, cap - at, "%s\t%s\t%s\n", ROLE[m->e[i].role],
                               m->e[i].sha256[0] ? m->e[i].sha256 : "-", m->e[i].name);
    *text = t;
    *len = at;
    return ST_OK;
}

static bool hex64(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) return false;
    return n == ST_SHA256_HEX - 1;
}

st_status st_manifest_parse(const char *text, size_t len, st_manifest *m)
{
    memset(m, 0, sizeof *m);
    if (len > ST_MANIFEST_MAX_BYTES || memchr(text, '\0', len))
        return st_fail(ST_ERR_PARSE, "manifest: not a manifest this tool wrote (size or a NUL byte)");
    const char *p = text, *end = text + len;
    int ln = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return st_fail(ST_ERR_PARSE, "manifest: line %d does not end", ln + 1);
        const size_t l = (size_t)(nl - p);
        ln++;
        char line[512];
        if (l >= sizeof line) return st_fail(ST_ERR_PARSE, "manifest: line %d is too long", ln);
        memcpy(line, p, l);
        line[l] = '\0';
        p = nl + 1;
        if (ln == 1) {
            if (strcmp(line, ST_MANIFEST_HEAD)) return st_fail(ST_ERR_PARSE, "manifest: not a manifest this tool wrote");
            continue;
        }
        if (line[0] == '#') continue;
        char *f1 = strchr(line, '\t'), *f2 = f1 ? strchr(f1 + 1, '\t') : NULL;
        if (!f1 || !f2) return st_fail(ST_ERR_PARSE, "manifest: line %d: expected role, hash and name", ln);
        *f1++ = '\0';
        *f2++ = '\0';
        int role = -1;
        for (int r = 0; r < N_ROLES; r++)
            if (!strcmp(line, ROLE[r])) role = r;
        const bool hash_ok = role == ST_MF_INDEX ? !strcmp(f1, "-") : hex64(f1);
        if (role < 0 || !hash_ok || !st_out_name_ok(f2) || m->n >= ST_MANIFEST_MAX_ENTRIES)
            return st_fail(ST_ERR_PARSE, "manifest: line %d is not an entry this tool writes", ln);
        st_mf_entry *e = &m->e[m->n++];
        e->role = (st_mf_role)role;
        snprintf(e->name, sizeof e->name, "%s", f2);
        snprintf(e->sha256, sizeof e->sha256, "%s", role == ST_MF_INDEX ? "" : f1);
    }
    if (ln == 0) return st_fail(ST_ERR_PARSE, "manifest: empty");
    return ST_OK;
}

char *st_manifest_path_for(const char *report_path)
{
    const size_t l = strlen(report_path);
    if (l < 5 || strcmp(report_path + l - 5, ".json")) return NULL;
    char *p = malloc(l - 5 + sizeof ST_MANIFEST_EXT);
    if (p) snprintf(p, l - 5 + sizeof ST_MANIFEST_EXT, "%.*s" ST_MANIFEST_EXT, (int)(l - 5), report_path);
    return p;
}

void st_manifests_free(st_manifest *ms, char **names, int n)
{
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(ms);
}

st_status st_manifest_not_others(const char *path, const char *own)
{
    const char *name = st_path_base(path), *own_name = own ? st_path_base(own) : "";
    char *dir = st_path_dir(path);
    if (!dir) return st_fail(ST_ERR_NOMEM, "manifest: out of memory");
    st_manifest *ms = NULL;
    char **names = NULL;
    int n = 0;
    st_status s = ST_OK;
    if (st_manifests_read(dir, &ms, &names, &n) == ST_OK) {
        for (int i = 0; i < n && s == ST_OK; i++) {
            if (!strcmp(names[i], own_name)) continue;
            for (int k = 0; k < ms[i].n && s == ST_OK; k++)
                if (!strcmp(ms[i].e[k].name, name))
                    s = st_fail(ST_ERR_EXISTS,
                                "%s belongs to another run's set (the manifest %s lists it): not replaced; name another "
                                "file",
                                path, names[i]);
        }
        st_manifests_free(ms, names, n);
    }
    if (s == ST_OK) st_clear_error();
    free(dir);
    return s;
}

st_status st_manifests_read(const char *dir, st_manifest **out, char ***names_out, int *n_out)
{
    *out = NULL;
    *names_out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return st_fail(ST_ERR_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    st_manifest *ms = NULL;
    char **names = NULL;
    int n = 0, cap = 0;
    st_status s = ST_OK;
    struct dirent *e;
    while (s == ST_OK && (e = readdir(d)) != NULL) {
        const size_t l = strlen(e->d_name), x = strlen(ST_MANIFEST_EXT);
        if (l <= x || strcmp(e->d_name + l - x, ST_MANIFEST_EXT) || !st_out_name_ok(e->d_name)) continue;
        char *path = malloc(strlen(dir) + l + 2);
        if (!path) {
            s = st_fail(ST_ERR_NOMEM, "manifest: out of memory");
            break;
        }
        sprintf(path, "%s/%s", dir, e->d_name);
        st_manifest m;
        const bool ok = st_manifest_read(path, &m);
        free(path);
        if (!ok) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            st_manifest *a = realloc(ms, sizeof *a * (size_t)cap);
            char **b = a ? realloc(names, sizeof *b * (size_t)cap) : NULL;
            if (a) ms = a;
            if (b) names = b;
            if (!a || !b) {
                s = st_fail(ST_ERR_NOMEM, "manifest: out of memory");
                break;
            }
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) {
            s = st_fail(ST_ERR_NOMEM, "manifest: out of memory");
            break;
        }
        ms[n++] = m;
    }
    closedir(d);
    st_clear_error();
    if (s != ST_OK) {
        st_manifests_free(ms, names, n);
        return s;
    }
    *out = ms;
    *names_out = names;
    *n_out = n;
    return ST_OK;
}

int st_manifests_prove(const st_manifest *ms, int n, st_mf_role role, const char *name, const char *sha256)
{
    if (!sha256 || !sha256[0]) return -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < ms[i].n; k++) {
            const st_mf_entry *e = &ms[i].e[k];
            if (e->role == role && !strcmp(e->name, name) && !strcmp(e->sha256, sha256)) return i;
        }
    return -1;
}

bool st_manifest_read(const char *path, st_manifest *m)
{
    char *text = NULL;
    size_t len = 0;
    struct stat st;
    /* a regular file: a link is never followed */
    const bool ok = lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                    st_file_read_all(path, ST_MANIFEST_MAX_BYTES, &text, &len, NULL, NULL) == ST_OK &&
                    st_manifest_parse(text, len, m) == ST_OK;
    free(text);
    st_clear_error();
    return ok;
}

void st_manifest_file_sha(const char *dir, const char *name, char hex[ST_SHA256_HEX])
{
    hex[0] = '\0';
    char *p = malloc(strlen(dir) + strlen(name) + 2), *buf = NULL;
    size_t len = 0;
    struct stat st;
    if (p) sprintf(p, "%s/%s", dir, name);
    if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st_read_file(p, &buf, &len) == ST_OK) st_sha256_buf(buf, len, hex);
    st_clear_error();
    free(buf);
    free(p);
}

void st_manifest_carry_tables(st_manifest *m, const char *dir, const char *path)
{
    st_manifest old;
    const bool ok = st_manifest_read(path, &old);
    for (int k = 0; ok && k < old.n && m->n < ST_MANIFEST_MAX_ENTRIES; k++) {
        const st_mf_entry *e = &old.e[k];
        bool listed = false;
        for (int i = 0; i < m->n; i++) listed |= !strcmp(m->e[i].name, e->name);
        if (e->role != ST_MF_TABLE || listed) continue;
        char hex[ST_SHA256_HEX];
        st_manifest_file_sha(dir, e->name, hex);
        if (strcmp(hex, e->sha256)) continue; /* gone, or changed since: not ours to prove */
        m->e[m->n++] = *e;
    }
    st_clear_error();
}

st_status st_manifest_write_files(const char *dir, const char *path, const char *const *names, const st_mf_role *roles,
                                  int n)
{
    st_manifest m;
    memset(&m, 0, sizeof m);
    st_status s = ST_OK;
    for (int i = 0; i < n && s == ST_OK; i++) {
        char *p = malloc(strlen(dir) + strlen(names[i]) + 2), *buf = NULL;
        if (!p) return st_fail(ST_ERR_NOMEM, "manifest: out of memory");
        sprintf(p, "%s/%s", dir, names[i]);
        size_t len = 0;
        if (roles[i] != ST_MF_INDEX) s = st_read_file(p, &buf, &len);
        if (s == ST_OK) s = st_manifest_add(&m, roles[i], names[i], buf, len);
        free(buf);
        free(p);
    }
    char *text = NULL;
    size_t len = 0;
    if (s == ST_OK) s = st_manifest_format(&m, &text, &len);
    if (s == ST_OK) s = st_file_write_atomic(path, text, len);
    free(text);
    return s;
}
