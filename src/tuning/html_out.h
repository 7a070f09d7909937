/* Building an HTML document in memory: trusted markup goes in as it is,
 * everything that comes from a file or a user (model names, comments,
 * paths, command lines) goes through st_html_text, which escapes it and
 * replaces control characters and invalid UTF-8, so a hostile report JSON
 * cannot inject markup. */
#ifndef ST_HTML_OUT_H
#define ST_HTML_OUT_H

#include "tools_internal.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *p;
    size_t n, cap;
    bool oom; /* an append failed: the document is incomplete */
} st_html;

void st_html_init(st_html *h);
void st_html_free(st_html *h);
/* Trusted markup (literals of the renderer). */
void st_html_raw(st_html *h, const char *s);
/* Trusted markup with printf formatting: only numbers and literals, never
 * untrusted %s. */
void st_html_fmt(st_html *h, const char *fmt, ...) ST_PRINTF(2, 3);
/* Untrusted text, escaped for element content and quoted attributes. */
void st_html_text(st_html *h, const char *s);
/* printf, then st_html_text of the result. */
void st_html_textf(st_html *h, const char *fmt, ...) ST_PRINTF(2, 3);
/* Hands the document over (NUL-terminated; the caller frees), or
 * ST_ERR_NOMEM when an append failed. */
st_status st_html_take(st_html *h, char **out, size_t *len);

#endif
