#include "strata/status.h"
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

/* room for a message that names a long path or two */
static _Thread_local char g_last_error[8192];

const char *st_status_str(st_status s)
{
    switch (s) {
#define ST_STATUS_STR_(name, text) case name: return text;
        ST_STATUS_LIST(ST_STATUS_STR_)
#undef ST_STATUS_STR_
    default: return "unknown status";
    }
}

const char *st_status_name(st_status s)
{
    switch (s) {
#define ST_STATUS_NAME_(name, text) case name: return #name;
        ST_STATUS_LIST(ST_STATUS_NAME_)
#undef ST_STATUS_NAME_
    default: return "ST_UNKNOWN";
    }
}

const char *st_last_error(void) { return g_last_error; }

st_status st_fail(st_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    return s;
}

void st_clear_error(void) { g_last_error[0] = '\0'; }

static void default_log(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

static st_log_fn g_log_fn = default_log;
static void *g_log_user;

void st_set_log(st_log_fn fn, void *user)
{
    g_log_fn = fn ? fn : default_log;
    g_log_user = fn ? user : NULL;
}

void st_log(const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    g_log_fn(g_log_user, line);
}
