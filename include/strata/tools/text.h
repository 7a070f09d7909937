/* strata-tune tools library: untrusted text made safe to show. Names, comments and tokens
 * come from files anyone can write (tables, GGUF models, reference vectors)
 * and paths from the command line: printed raw, an escape sequence in them
 * moves the cursor, recolours or hides the rest of the line on a terminal,
 * and bytes that are not UTF-8 make a JSON document invalid. */
#ifndef STRATA_TOOLS_TEXT_H
#define STRATA_TOOLS_TEXT_H

#include "strata/tools/base.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For a terminal: S[0..LEN) into DST (N bytes, always NUL-terminated when
 * N > 0). Printable ASCII and well-formed UTF-8 characters are kept; control
 * characters (C0, DEL, C1), bytes outside well-formed UTF-8 and the
 * invisible format characters that can disguise text (zero-width, bidi
 * controls, line/paragraph separators, BOM) become "\xNN" per byte, and a
 * backslash becomes "\\", so the shown text is unambiguous. When DST is too
 * small the text is cut at a character boundary and ends in "...".
 * ST_TEXT_SHOW_BYTES(LEN) always holds the whole text. Returns DST. */
ST_API const char *st_text_show(char *dst, size_t n, const char *s, size_t len);
#define ST_TEXT_SHOW_BYTES(len) (4 * (size_t)(len) + 1)

/* st_text_show of the NUL-terminated S into a malloc'd string (never cut);
 * NULL when out of memory. */
ST_API char *st_text_show_dup(const char *s);

/* For JSON: a malloc'd copy of the NUL-terminated S that is valid UTF-8:
 * each byte outside a well-formed UTF-8 sequence becomes the four
 * characters "\xNN"; everything else is kept (the JSON writer escapes
 * control characters itself). NULL when out of memory. */
ST_API char *st_text_utf8_dup(const char *s);

#ifdef __cplusplus
}
#endif
#endif
