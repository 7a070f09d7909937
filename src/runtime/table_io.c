/* Loading a table: a file, or the one matching table of a directory, with
 * its single log line. */
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
    char *buf = NULL, why[ST_FILE_WHY_MAX] = "";
    size_t len = 0;
    st_status s = st_file_read_all(path, ST_TABLE_MAX_BYTES, &buf, &len, why, NULL);
    if (s != ST_OK) {
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", path, why[0] ? why : st_status_str(s));
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

st_status st_table_dir_list(const char *dir, char ***names, size_t *count, char *why)
{
    char spare[ST_FILE_WHY_MAX];
    if (!why) why = spare;
    why[0] = '\0';
    if (!dir || !names || !count) return st_fail(ST_ERR_INVALID_ARG, "table folder: NULL argument");
    *names = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        const int e = errno;
        snprintf(why, ST_FILE_WHY_MAX, "%s", strerror(e));
        return st_fail(e == ENOMEM ? ST_ERR_NOMEM : ST_ERR_IO, "%s: cannot read: %s", dir, why);
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
        st_table_dir_list_free(v, n);
        snprintf(why, ST_FILE_WHY_MAX, "%s", strerror(ENOMEM));
        return st_fail(s, "%s: cannot read: %s", dir, why);
    }
    if (n) qsort(v, n, sizeof *v, cmp_names);
    *names = v;
    *count = n;
    return ST_OK;
}

void st_table_dir_list_free(char **names, size_t n)
{
    for (size_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

bool st_table_file_is_for(const char *path, const st_identity *id)
{
    if (!path || !id) return false;
    char *buf = NULL;
    size_t len = 0;
    st_identity hdr;
    bool ok = st_file_read_all(path, ST_TABLE_MAX_BYTES, &buf, &len, NULL, NULL) == ST_OK &&
              st_table_read_header(buf, len, &hdr) == ST_OK && st_identity_same_device(&hdr, id);
    free(buf);
    return ok;
}

static st_status load_dir(const char *dir, const st_identity *id, const st_dispatch_config *cfg,
                          st_table **out, char *msg, size_t msglen)
{
    char **names = NULL;
    size_t n = 0;
    char why[ST_FILE_WHY_MAX];
    st_status s = st_table_dir_list(dir, &names, &n, why);
    if (s != ST_OK) {
        say(msg, msglen, ST_TABLE_MSG_PREFIX "%s: cannot read: %s", dir, why);
        return s;
    }
    size_t matches = 0, first = 0;
    char list[ST_TABLE_MSG_MAX / 2];
    size_t at = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char *full = join(dir, names[i]);
        bool m = full && st_table_file_is_for(full, id);
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
    st_table_dir_list_free(names, n);
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
