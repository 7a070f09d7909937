/* Untrusted text made safe to show: see strata/tools/text.h. */
#include "strata/tools/text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at S[0..LEN) (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF) and its code point,
 * or 0 when the bytes there are not one. */
static size_t utf8_seq(const unsigned char *s, size_t len, uint32_t *cp)
{
    const unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        *cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        *cp = c & 0x0fu;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        *cp = c & 0x07u;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        return 0;
    }
    if (len < n) return 0;
    for (size_t i = 1; i < n; i++) {
        const unsigned char b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf)) return 0;
        *cp = (*cp << 6) | (b & 0x3fu);
    }
    return n;
}

/* Characters a terminal acts on or shows as nothing. */
static bool hidden(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x200b && cp <= 0x200f) ||
           (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}

/* The shown form of the character at S (SEQ bytes, code point CP) into OUT
 * (at least 17 bytes); returns its length. */
static size_t show_char(const unsigned char *s, size_t seq, uint32_t cp, char *out)
{
    if (seq == 0) { /* a stray byte */
        snprintf(out, 5, "\\x%02x", s[0]);
        return 4;
    }
    if (cp == '\\') {
        memcpy(out, "\\\\", 2);
        return 2;
    }
    if (hidden(cp)) {
        for (size_t i = 0; i < seq; i++) snprintf(out + 4 * i, 5, "\\x%02x", s[i]);
        return 4 * seq;
    }
    memcpy(out, s, seq);
    return seq;
}

const char *st_text_show(char *dst, size_t n, const char *s, size_t len)
{
    if (!dst || n == 0) return dst;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    if (!s) len = 0;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        const size_t seq = utf8_seq(p + i, len - i, &cp);
        char piece[17];
        const size_t k = show_char(p + i, seq, cp, piece);
        /* room for this piece, and for "..." if more would follow */
        const size_t tail = i + (seq ? seq : 1) < len ? 3 : 0;
        if (o + k + tail + 1 > n) {
            /* the previous piece left room for "..." (tail) */
            for (size_t j = 0; j < 3 && o + 1 < n; j++) dst[o++] = '.';
            break;
        }
        memcpy(dst + o, piece, k);
        o += k;
        i += seq ? seq : 1;
    }
    dst[o] = '\0';
    return dst;
}

char *st_text_show_dup(const char *s)
{
    const size_t len = s ? strlen(s) : 0;
    char *d = malloc(ST_TEXT_SHOW_BYTES(len));
    if (d) st_text_show(d, ST_TEXT_SHOW_BYTES(len), s, len);
    return d;
}

char *st_text_utf8_dup(const char *s)
{
    const size_t len = s ? strlen(s) : 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    char *d = malloc(4 * len + 1);
    if (!d) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        const size_t seq = utf8_seq(p + i, len - i, &cp);
        if (seq) {
            memcpy(d + o, p + i, seq);
            o += seq;
            i += seq;
        } else {
            snprintf(d + o, 5, "\\x%02x", p[i]);
            o += 4;
            i++;
        }
    }
    d[o] = '\0';
    return d;
}
