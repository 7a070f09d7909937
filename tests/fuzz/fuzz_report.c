/* Fuzz target for what a report or an index file drives: the HTML renderer
 * (st_report_html_render) and the tables.json parser. Any input must return
 * without a sanitizer report; a rendered page must be one document (starts
 * with the doctype, ends with </html>) with no raw '<' from the input: every
 * "<script" in it would have come from the input, so there must be none. An
 * index that parses must format and parse again to the same text.
 *
 * Seeds: tests/fuzz/corpus/report/ (an autotune report, verify, bench and
 * settings reports, a tables.json). */
#include "fuzz_target.h"
#include "strata/tools/report.h"
#include "strata/status.h"
#include "strata/tools/tables.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_report: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *html = NULL;
    size_t len = 0;
    if (st_report_html_render((const char *)data, size, "fuzz.json", &html, &len) == ST_OK) {
        static const char head[] = "<!DOCTYPE html>", tail[] = "</html>\n";
        check(len > sizeof head + sizeof tail && !memcmp(html, head, sizeof head - 1), "page does not start with the doctype");
        check(!memcmp(html + len - (sizeof tail - 1), tail, sizeof tail - 1), "page does not end with </html>");
        check(strlen(html) == len, "page holds a NUL byte");
        check(!strstr(html, "<script") && !strstr(html, "<SCRIPT"), "markup from the input reached the page");
        free(html);
    } else {
        check(html == NULL, "a refused render returned a page");
    }
    st_tables_index *ix = NULL;
    if (st_tables_index_parse((const char *)data, size, &ix) == ST_OK) {
        char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        st_tables_index *back = NULL;
        check(st_tables_index_format(ix, &a, &al) == ST_OK, "a parsed index does not format");
        check(st_tables_index_parse(a, al, &back) == ST_OK, "a formatted index does not parse");
        check(st_tables_index_format(back, &b, &bl) == ST_OK && al == bl && !memcmp(a, b, al), "the index does not round-trip");
        free(a);
        free(b);
        st_tables_index_free(back);
        st_tables_index_free(ix);
    }
    return 0;
}
