/* In-memory HTML with escaping (html_out.h). */
#include "html_out.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_html_init(st_html *h) { memset(h, 0, sizeof *h); }

void st_html_free(st_html *h)
{
    free(h->p);
    memset(h, 0, sizeof *h);
}

static bool reserve(st_html *h, size_t more)
{
    if (h->oom) return false;
    if (h->n + more + 1 <= h->cap) return true;
    size_t cap = h->cap ? h->cap : 4096;
    while (cap < h->n + more + 1) {
        if (cap > SIZE_MAX / 2) {
            h->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(h->p, cap);
    if (!p) {
        h->oom = true;
        return false;
    }
    h->p = p;
    h->cap = cap;
    return true;
}

static void put(st_html *h, const char *s, size_t n)
{
    if (!reserve(h, n)) return;
    memcpy(h->p + h->n, s, n);
    h->n += n;
    h->p[h->n] = '\0';
}

void st_html_raw(st_html *h, const char *s) { put(h, s, strlen(s)); }

static void vfmt(st_html *h, bool escape, const char *fmt, va_list ap)
{
    char small[512];
    va_list cp;
    va_copy(cp, ap);
    const int n = vsnprintf(small, sizeof small, fmt, cp);
    va_end(cp);
    if (n < 0) return;
    char *buf = small;
    if ((size_t)n >= sizeof small) {
        buf = malloc((size_t)n + 1);
        if (!buf) {
            h->oom = true;
            return;
        }
        vsnprintf(buf, (size_t)n + 1, fmt, ap);
    }
    if (escape)
        st_html_text(h, buf);
    else
        put(h, buf, (size_t)n);
    if (buf != small) free(buf);
}

void st_html_fmt(st_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfmt(h, false, fmt, ap);
    va_end(ap);
}

void st_html_textf(st_html *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfmt(h, true, fmt, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at S (1..4), or 0 when it is not one
 * (overlong forms, surrogates and values past U+10FFFF included). */
static int utf8_len(const unsigned char *s)
{
    const unsigned c = s[0];
    if (c < 0x80) return 1;
    int n;
    uint32_t v;
    if ((c & 0xe0) == 0xc0) n = 2, v = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) n = 3, v = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) n = 4, v = c & 0x07;
    else return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    /* C1 controls and noncharacters are parse errors in HTML5 */
    if ((v >= 0x80 && v <= 0x9f) || (v >= 0xfdd0 && v <= 0xfdef) || (v & 0xfffe) == 0xfffe) return 0;
    return n;
}

void st_html_text(st_html *h, const char *s)
{
    static const char REPLACEMENT[] = "\xef\xbf\xbd"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const unsigned char c = *p;
        switch (c) {
        case '&': st_html_raw(h, "&amp;"); p++; continue;
        case '<': st_html_raw(h, "&lt;"); p++; continue;
        case '>': st_html_raw(h, "&gt;"); p++; continue;
        case '"': st_html_raw(h, "&quot;"); p++; continue;
        case '\'': st_html_raw(h, "&#39;"); p++; continue;
        default: break;
        }
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            put(h, REPLACEMENT, 3);
            p++;
            continue;
        }
        const int n = utf8_len(p);
        if (n == 0) {
            put(h, REPLACEMENT, 3);
            p++;
            continue;
        }
        put(h, (const char *)p, (size_t)n);
        p += n;
    }
}

st_status st_html_take(st_html *h, char **out, size_t *len)
{
    if (h->oom || !reserve(h, 0)) {
        st_html_free(h);
        return st_fail(ST_ERR_NOMEM, "report: out of memory");
    }
    *out = h->p;
    *len = h->n;
    memset(h, 0, sizeof *h);
    return ST_OK;
}
