/* text: untrusted bytes made safe for a terminal (st_text_show) and for
 * JSON (st_text_utf8_dup). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/tools/text.h"

#include <stdlib.h>
#include <string.h>

static void show_is(const char *in, size_t len, const char *want)
{
    char buf[256];
    st_text_show(buf, sizeof buf, in, len);
    if (strcmp(buf, want) != 0) fail_msg("st_text_show: got '%s', want '%s'", buf, want);
}

#define SHOW(lit, want) show_is(lit, sizeof(lit) - 1, want)

static void text_show_keeps_printable_ascii_and_utf8(void **state)
{
    (void)state;
    SHOW("blk.0.attn_q.weight", "blk.0.attn_q.weight");
    SHOW("Gr\xc3\xbc\xc3\x9f \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82", "Gr\xc3\xbc\xc3\x9f \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82");
}

static void text_show_escapes_terminal_controls(void **state)
{
    (void)state;
    SHOW("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m");    /* ESC: colour */
    SHOW("a\rb\nc\td\x07", "a\\x0db\\x0ac\\x09d\\x07");     /* C0 */
    SHOW("del\x7f", "del\\x7f");                          /* DEL */
    SHOW("csi\xc2\x9b" "2J", "csi\\xc2\\x9b2J");           /* C1 as UTF-8 */
    SHOW("back\\slash", "back\\\\slash");                  /* unambiguous */
}

static void text_show_escapes_bytes_outside_utf8(void **state)
{
    (void)state;
    SHOW("raw\x9b" "2J", "raw\\x9b2J");                    /* a raw 8-bit CSI */
    SHOW("\xff\xfe", "\\xff\\xfe");
    SHOW("\xc0\xaf", "\\xc0\\xaf");                        /* overlong '/' */
    SHOW("\xed\xa0\x80", "\\xed\\xa0\\x80");               /* a surrogate */
    SHOW("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");      /* past U+10FFFF */
    SHOW("cut\xe6\x97", "cut\\xe6\\x97");                  /* truncated sequence */
}

static void text_show_escapes_invisible_format_characters(void **state)
{
    (void)state;
    SHOW("\xef\xbb\xbf" "cpu", "\\xef\\xbb\\xbfcpu");      /* BOM */
    SHOW("ab\xe2\x80\xae" "cd", "ab\\xe2\\x80\\xaecd");    /* right-to-left override */
    SHOW("zero\xe2\x80\x8bwidth", "zero\\xe2\\x80\\x8bwidth");
    SHOW("line\xe2\x80\xa8sep", "line\\xe2\\x80\\xa8sep");
}

static void text_show_cuts_at_a_character_boundary(void **state)
{
    (void)state;
    char buf[12];
    st_text_show(buf, sizeof buf, "abcdefghijklmnop", 16);
    assert_string_equal(buf, "abcdefgh...");
    /* a multi-byte character is never split */
    st_text_show(buf, sizeof buf, "abcdefg\xe6\x97\xa5xyz", 13);
    assert_string_equal(buf, "abcdefg...");
    /* nor an escape */
    st_text_show(buf, sizeof buf, "abcdef\x1bxyz", 10);
    assert_string_equal(buf, "abcdef...");
    /* tiny buffers stay terminated */
    char tiny[3];
    st_text_show(tiny, sizeof tiny, "abcdef", 6);
    assert_true(strlen(tiny) < sizeof tiny);
    /* ST_TEXT_SHOW_BYTES always holds the whole text */
    const char worst[] = "\x1b\x1b\x1b\x1b";
    char whole[ST_TEXT_SHOW_BYTES(4)];
    st_text_show(whole, sizeof whole, worst, 4);
    assert_string_equal(whole, "\\x1b\\x1b\\x1b\\x1b");
}

static void text_utf8_dup_keeps_valid_text_and_marks_stray_bytes(void **state)
{
    (void)state;
    char *a = st_text_utf8_dup("name \xc3\xa9t\xc3\xa9 \x1b[0m");
    assert_string_equal(a, "name \xc3\xa9t\xc3\xa9 \x1b[0m"); /* JSON escapes controls itself */
    free(a);
    char *b = st_text_utf8_dup("bad\x9b\xff\xc3");
    assert_string_equal(b, "bad\\x9b\\xff\\xc3");
    free(b);
    char *c = st_text_show_dup("\x1b");
    assert_string_equal(c, "\\x1b");
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text_show_keeps_printable_ascii_and_utf8),
        cmocka_unit_test(text_show_escapes_terminal_controls),
        cmocka_unit_test(text_show_escapes_bytes_outside_utf8),
        cmocka_unit_test(text_show_escapes_invisible_format_characters),
        cmocka_unit_test(text_show_cuts_at_a_character_boundary),
        cmocka_unit_test(text_utf8_dup_keeps_valid_text_and_marks_stray_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
