#define _POSIX_C_SOURCE 200809L
/* Provenance comment lines of a table (provenance.h). */
#include "provenance.h"
#include "internal.h"
#include "st_source_commit.h"
#include "table_internal.h"

#include <stdio.h>
#include <string.h>

const char *st_source_commit(void) { return ST_SOURCE_COMMIT; }

static const char *const KEYS[] = {
#define ST_PROV_KEY_(f, key, what) key,
    ST_PROVENANCE_FIELDS(ST_PROV_KEY_)
#undef ST_PROV_KEY_
};

const char *st_provenance_key(int i) { return i >= 0 && i < ST_PROVENANCE_COUNT ? KEYS[i] : ""; }

static char *field(st_provenance *p, int i)
{
    char *const f[] = {
#define ST_PROV_PTR_(fl, key, what) p->fl,
        ST_PROVENANCE_FIELDS(ST_PROV_PTR_)
#undef ST_PROV_PTR_
    };
    return f[i];
}

const char *st_provenance_value(const st_provenance *p, int i)
{
    return i >= 0 && i < ST_PROVENANCE_COUNT ? field((st_provenance *)p, i) : "";
}

/* The field whose "key: " starts C, or -1. */
static int key_of(const char *c)
{
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++) {
        const size_t n = strlen(KEYS[i]);
        if (!strncmp(c, KEYS[i], n) && c[n] == ':' && c[n + 1] == ' ') return i;
    }
    return -1;
}

static const char LEGACY_MADE[] = "made by tune_decode ";

bool st_provenance_is_comment(const char *c) { return key_of(c) >= 0 || !strncmp(c, LEGACY_MADE, strlen(LEGACY_MADE)); }

static void copy_n(char *dst, const char *src, size_t n)
{
    if (n >= ST_PROVENANCE_VALUE_MAX) n = ST_PROVENANCE_VALUE_MAX - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* "made by tune_decode V on DATE, device D, driver R" (before 0.2.x). */
static void legacy_made(const char *c, st_provenance *p)
{
    const char *v = c + strlen(LEGACY_MADE), *on = strstr(v, " on "), *dev = strstr(v, ", device "),
               *drv = strstr(v, ", driver ");
    if (!on || !dev || !drv || !(on < dev && dev < drv)) return;
    if (!p->tool[0]) snprintf(p->tool, sizeof p->tool, "tune_decode %.*s", (int)(on - v), v);
    if (!p->date[0]) copy_n(p->date, on + 4, (size_t)(dev - on - 4));
    if (!p->device[0]) copy_n(p->device, dev + 9, (size_t)(drv - dev - 9));
    if (!p->driver[0]) copy_n(p->driver, drv + 9, strlen(drv + 9));
}

void st_provenance_from_table(const st_table *t, st_provenance *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < st_table_comment_count(t); i++) {
        const char *c = st_table_comment_at(t, i);
        const int k = key_of(c);
        if (k < 0) {
            if (!strncmp(c, LEGACY_MADE, strlen(LEGACY_MADE))) legacy_made(c, p);
            continue;
        }
        const char *v = c + strlen(KEYS[k]) + 2;
        char *f = field(p, k);
        if (f[0]) continue; /* the first line of a key counts */
        const char *thr = strstr(v, "; threshold ");
        if (!strcmp(KEYS[k], "report") && thr) {
            /* the old form "report: DIR/NAME.json; threshold T%": keep the file name */
            const char *slash = v;
            for (const char *q = v; q < thr; q++)
                if (*q == '/') slash = q + 1;
            copy_n(f, slash, (size_t)(thr - slash));
            if (!p->threshold[0]) copy_n(p->threshold, thr + 12, strlen(thr + 12));
        } else {
            copy_n(f, v, strlen(v));
        }
    }
}

st_status st_provenance_to_table(st_table *t, const st_provenance *p)
{
    char line[ST_PROVENANCE_VALUE_MAX + 32];
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++) {
        const char *v = st_provenance_value(p, i);
        if (!v[0]) continue;
        snprintf(line, sizeof line, "%s: %s", KEYS[i], v);
        ST_TRY(st_table_add_comment(t, line));
    }
    return ST_OK;
}
