/* What tune_decode prints: every line that can carry bytes from a file or
 * the command line (names, comments, paths, the library's messages) goes
 * through st_text_show, every JSON string through st_text_utf8_dup
 * (include/strata/tools/text.h), so a hostile table or model cannot drive the
 * terminal and --json output is always valid UTF-8. */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vline(FILE *f, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    const int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *raw = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!raw) {
        fputs("tune_decode: out of memory\n", f);
        return;
    }
    vsnprintf(raw, (size_t)n + 1, fmt, ap);
    char *shown = st_text_show_dup(raw);
    fputs(shown ? shown : "tune_decode: out of memory", f);
    fputc('\n', f);
    free(shown);
    free(raw);
}

void td_print(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stdout, fmt, ap);
    va_end(ap);
}

void td_eprint(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

static char g_prefix[64];

void td_log_prefix(const char *prefix) { snprintf(g_prefix, sizeof g_prefix, "%s", prefix ? prefix : ""); }

void td_log_sink(void *user, const char *line)
{
    (void)user;
    td_eprint("%s%s", g_prefix, line);
}

void td_json_put(cJSON *j)
{
    char *t = j ? cJSON_Print(j) : NULL;
    if (t) puts(t);
    free(t);
    cJSON_Delete(j);
}

cJSON *td_json_string(const char *s)
{
    char *v = st_text_utf8_dup(s ? s : "");
    cJSON *o = v ? cJSON_CreateString(v) : NULL;
    free(v);
    return o;
}

cJSON *td_json_add_string(cJSON *obj, const char *name, const char *s)
{
    cJSON *v = td_json_string(s);
    if (v && !cJSON_AddItemToObject(obj, name, v)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

void td_json_add_identity(cJSON *obj, const st_identity *id)
{
    char *text = st_identity_json(id);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (o && !cJSON_AddItemToObject(obj, "identity", o)) cJSON_Delete(o);
}
