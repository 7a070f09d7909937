/* Shared by the table tests (table_header_test.c, table_rows_test.c,
 * table_load_test.c): this build's CPU identity and header, the refusal and
 * engagement checks that assert the loader's message word for word
 * (DESIGN.md section 4), and a capturing log sink. */
#ifndef STRATA_TABLE_TEST_UTIL_H
#define STRATA_TABLE_TEST_UTIL_H

#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/knobs.h"
#include "strata/table.h"
#include "strata/variants.h"
#include "table_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH "t.table"
#define MSG 8192

/* "cpu <runtime> <compiler> <space>" of this build. */
static char g_hdr[256];
static st_identity g_id;

/* ---- helpers -------------------------------------------------------------- */

typedef struct {
    int count;
    char last[MSG];
} capture;

static inline void capture_line(void *user, const char *line)
{
    capture *c = user;
    c->count++;
    snprintf(c->last, sizeof c->last, "%s", line);
}

/* HDR + "\n" + BODY in a static buffer. */
static inline const char *tbl(const char *body)
{
    static char buf[1 << 16];
    snprintf(buf, sizeof buf, "%s\n%s", g_hdr, body);
    return buf;
}

static inline st_status parse_cfg(const char *text, size_t len, const st_dispatch_config *cfg,
                           st_table **t, char *msg)
{
    st_dispatch_config def;
    if (!cfg) {
        st_dispatch_config_default(&def);
        cfg = &def;
    }
    return st_table_parse(text, len, PATH, &g_id, cfg, t, msg, MSG);
}

static int g_dummy;

/* Parses TEXT for this process; asserts the status WANT, no table, and the
 * message "decode tuning: t.table: " + the formatted tail, word for word. */
static inline void expect_refusal_n(const char *text, size_t len, const st_dispatch_config *cfg,
                             st_status want, const char *fmt, ...)
{
    char tail[MSG], expected[MSG + 64], msg[MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tail, sizeof tail, fmt, ap);
    va_end(ap);
    snprintf(expected, sizeof expected, "decode tuning: %s: %s", PATH, tail);
    st_table *t = (st_table *)&g_dummy;
    st_status s = parse_cfg(text, len, cfg, &t, msg);
    assert_string_equal(msg, expected);
    assert_int_equal(s, want);
    assert_null(t);
}

#define expect_refusal(text, want, ...) \
    expect_refusal_n(text, strlen(text), NULL, want, __VA_ARGS__)

static inline void expect_engages(const char *text, size_t shapes)
{
    char msg[MSG], expected[MSG];
    st_table *t = NULL;
    assert_int_equal(parse_cfg(text, strlen(text), NULL, &t, msg), ST_OK);
    assert_non_null(t);
    snprintf(expected, sizeof expected, "decode tuning: %zu shapes from %s (cpu, runtime %s)",
             shapes, PATH, g_id.runtime);
    assert_string_equal(msg, expected);
    assert_int_equal(st_table_count(t), shapes);
    st_table_destroy(t);
}

static inline int group_setup(void **state)
{
    (void)state;
    st_identity_cpu(&g_id);
    st_identity_header(&g_id, g_hdr, sizeof g_hdr);
    return 0;
}

#endif
