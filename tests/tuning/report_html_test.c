/* The HTML report: a tune on the CPU backend writes a page that an HTML5
 * parser (gumbo) reads without one parse error, whose title names the model,
 * in which every shape of the JSON appears with one SVG bar per candidate,
 * that `tune_decode report` renders again byte for byte from the JSON alone,
 * and that has no script, no external reference and no markup from the
 * strings it shows. A mismatch comes first, in the red alert; the gate's
 * step chart has two bars per token count; bad input is refused in one line
 * and leaves the page as it was. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "strata/tools/report.h"
#include "strata/decode.h"
#include "strata/table.h"
#include "strata/tools/tuner.h"

#include <cjson/cJSON.h>
#include <gumbo.h>
#include <stdbool.h>

#include "test_cli.h"

/* ---- the parsed page ------------------------------------------------------ */

/* The element's tag name: gumbo names SVG elements only through their text. */
static void tag_name(const GumboNode *n, char *buf, size_t len)
{
    buf[0] = '\0';
    if (n->type != GUMBO_NODE_ELEMENT) return;
    const GumboElement *e = &n->v.element;
    if (e->tag != GUMBO_TAG_UNKNOWN) {
        snprintf(buf, len, "%s", gumbo_normalized_tagname(e->tag));
        return;
    }
    GumboStringPiece p = e->original_tag;
    gumbo_tag_from_original_text(&p);
    snprintf(buf, len, "%.*s", (int)p.length, p.data);
    for (char *c = buf; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
}

static const char *attr(const GumboNode *n, const char *name)
{
    if (n->type != GUMBO_NODE_ELEMENT) return NULL;
    const GumboAttribute *a = gumbo_get_attribute(&n->v.element.attributes, name);
    return a ? a->value : NULL;
}

static bool has_class(const GumboNode *n, const char *cls)
{
    const char *c = attr(n, "class");
    const size_t l = strlen(cls);
    for (const char *p = c; p && *p;) {
        while (*p == ' ') p++;
        const char *q = p;
        while (*q && *q != ' ') q++;
        if ((size_t)(q - p) == l && !strncmp(p, cls, l)) return true;
        p = q;
    }
    return false;
}

typedef bool (*node_pred)(const GumboNode *n, const void *arg);

/* Visits every node under N in document order; counts those PRED accepts
 * and keeps the first in *FIRST. */
static int walk(const GumboNode *n, node_pred pred, const void *arg, const GumboNode **first)
{
    int c = 0;
    if (pred(n, arg)) {
        if (first && !*first) *first = n;
        c++;
    }
    const GumboVector *kids = n->type == GUMBO_NODE_ELEMENT ? &n->v.element.children
                              : n->type == GUMBO_NODE_DOCUMENT ? &n->v.document.children
                                                               : NULL;
    for (unsigned i = 0; kids && i < kids->length; i++) c += walk(kids->data[i], pred, arg, first);
    return c;
}

static bool is_tag(const GumboNode *n, const void *arg)
{
    char t[64];
    tag_name(n, t, sizeof t);
    return !strcmp(t, (const char *)arg);
}

static bool is_bar(const GumboNode *n, const void *arg)
{
    (void)arg;
    return is_tag(n, "rect") && has_class(n, "bar");
}

static bool has_id(const GumboNode *n, const void *arg)
{
    const char *id = attr(n, "id");
    return id && !strcmp(id, (const char *)arg);
}

/* Attributes that would run code or fetch something. */
static bool is_active(const GumboNode *n, const void *arg)
{
    (void)arg;
    if (n->type != GUMBO_NODE_ELEMENT) return false;
    if (is_tag(n, "script") || is_tag(n, "iframe") || is_tag(n, "img") || is_tag(n, "link") || is_tag(n, "object"))
        return true;
    const GumboVector *a = &n->v.element.attributes;
    for (unsigned i = 0; i < a->length; i++) {
        const GumboAttribute *x = a->data[i];
        if (!strncmp(x->name, "on", 2) || !strcmp(x->name, "src") || !strcmp(x->name, "href")) return true;
    }
    return false;
}

/* The text content of N (appended to BUF). */
static void text_of(const GumboNode *n, char *buf, size_t len)
{
    if (n->type == GUMBO_NODE_TEXT || n->type == GUMBO_NODE_WHITESPACE) {
        const size_t at = strlen(buf);
        snprintf(buf + at, len - at, "%s", n->v.text.text);
        return;
    }
    if (n->type != GUMBO_NODE_ELEMENT) return;
    for (unsigned i = 0; i < n->v.element.children.length; i++) text_of(n->v.element.children.data[i], buf, len);
}

/* Parses HTML; fails on any HTML5 parse error (gumbo reports them). */
static GumboOutput *parse_strict(const char *html, size_t len)
{
    GumboOptions opt = kGumboDefaultOptions;
    opt.max_errors = -1;
    GumboOutput *g = gumbo_parse_with_options(&opt, html, len);
    assert_non_null(g);
    /* (gumbo keeps its error records private: the count is what it shows) */
    if (g->errors.length) fail_msg("%u HTML5 parse errors", g->errors.length);
    return g;
}

static void check_title(const GumboOutput *g, const char *want_prefix)
{
    const GumboNode *t = NULL;
    assert_int_equal(walk(g->document, is_tag, "title", &t), 1);
    char text[512] = "";
    text_of(t, text, sizeof text);
    if (strncmp(text, want_prefix, strlen(want_prefix))) fail_msg("title '%s' does not start with '%s'", text, want_prefix);
}

static void shape_key(const cJSON *s, char *buf, size_t n)
{
    const char *kind = cJSON_GetObjectItem(s, "kind")->valuestring;
    if (!strcmp(kind, "mmvq"))
        snprintf(buf, n, "mmvq %s %d %d", cJSON_GetObjectItem(s, "type")->valuestring, cJSON_GetObjectItem(s, "n_rows")->valueint,
                 cJSON_GetObjectItem(s, "n_cols")->valueint);
    else
        snprintf(buf, n, "expert %s %s %d %d %d", cJSON_GetObjectItem(s, "type")->valuestring,
                 cJSON_GetObjectItem(s, "down_type")->valuestring, cJSON_GetObjectItem(s, "n_embd")->valueint,
                 cJSON_GetObjectItem(s, "n_ff")->valueint, cJSON_GetObjectItem(s, "n_tokens")->valueint);
}

/* Every shape of JSON appears in the page as figure shape-I, headed by its
 * key, with one bar per candidate. Returns the number of shapes. */
static int check_shapes(const GumboOutput *g, const cJSON *root)
{
    const cJSON *shapes = cJSON_GetObjectItem(root, "shapes"), *s;
    int i = 0;
    cJSON_ArrayForEach(s, shapes)
    {
        char id[32], key[160], text[8192] = "";
        snprintf(id, sizeof id, "shape-%d", i);
        shape_key(s, key, sizeof key);
        const GumboNode *fig = NULL;
        if (walk(g->document, has_id, id, &fig) != 1) fail_msg("no single element #%s for %s", id, key);
        const GumboNode *h3 = NULL;
        assert_true(walk(fig, is_tag, "h3", &h3) >= 1);
        text_of(h3, text, sizeof text);
        if (strcmp(text, key)) fail_msg("#%s is headed '%s', the JSON's shape is '%s'", id, text, key);
        const GumboNode *svg = NULL;
        assert_int_equal(walk(fig, is_tag, "svg", &svg), 1);
        const int bars = walk(svg, is_bar, NULL, NULL), cands = cJSON_GetArraySize(cJSON_GetObjectItem(s, "candidates"));
        if (bars != cands) fail_msg("%s: %d bars for %d candidates", key, bars, cands);
        assert_true(cands >= 2);
        i++;
    }
    return i;
}

/* ---- 1: a real tune --------------------------------------------------------- */

static void tune_into(const char *dir)
{
    static const char *const shapes[] = {"expert iq3_s iq4_nl 256 64 2", "expert iq4_xs iq4_nl 256 64 1", "mmvq q8_0 512 256",
                                         "mmvq iq3_s 256 256"};
    st_tune_options o;
    st_tune_options_default(&o);
    o.out_dir = dir;
    o.quick = true;
    o.quiet = true;
    o.no_verify = true; /* the gate's verdict on a shared CPU is noise; its chart is checked in test 3 */
    o.shapes = shapes;
    o.n_shapes = 4;
    o.n_expert = 8;
    o.topk = 2;
    static const int mix[] = {1, 3};
    o.ntok_mix = mix;
    o.n_ntok_mix = 2;
    o.command_line = "report_html_test <script>alert(1)</script> & 'quotes'";
    st_ctx *ctx = NULL;
    assert_int_equal(st_ctx_create(ST_BACKEND_CPU, 0, &ctx), ST_OK);
    st_tune_result res __attribute__((cleanup(st_tune_result_clear)));
    st_tune_result_init(&res);
    assert_int_equal(st_tune_run(ctx, &o, &res), ST_OK);
    st_ctx_destroy(ctx);
    assert_int_equal(res.shapes, 4);
}

static void tune_writes_a_page_that_parses_with_every_shape(void **state)
{
    (void)state;
    const char *dir = make_dir();
    tune_into(dir);
    const char *json = path_in(dir, "strata-shapes.autotune.json"), *html = path_in(dir, "strata-shapes.autotune.html");
    assert_true(file_exists(json));
    assert_true(file_exists(html));
    size_t hl = 0, jl = 0;
    char *page = slurp(html, &hl), *text = slurp(json, &jl);
    GumboOutput *g = parse_strict(page, hl);
    check_title(g, "strata-tune autotune report: shapes on cpu");
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_int_equal(check_shapes(g, root), 4);
    /* the sections the issue asks for */
    static const char *const ids[] = {"verdict", "identity", "bytes", "gate", "family-expert", "family-mmvq"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (walk(g->document, has_id, ids[i], NULL) != 1) fail_msg("no section #%s", ids[i]);
    assert_int_equal(walk(g->document, has_id, "mismatch", NULL), 0); /* no mismatch, no alert */
    /* self-contained: nothing runs, nothing is fetched; the command line's
     * markup stayed text */
    assert_int_equal(walk(g->document, is_active, NULL, NULL), 0);
    assert_non_null(strstr(page, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#39;quotes&#39;"));
    /* the threshold band and the default's line in every chart */
    assert_int_equal(walk(g->document, is_tag, "svg", NULL), 4);
    gumbo_destroy_output(&kGumboDefaultOptions, g);
    cJSON_Delete(root);
    free(text);
    /* `tune_decode report` renders the same page from the JSON alone */
    char *const argv[] = {CLI, "report", (char *)json, "-o", path_in(dir, "again.html"), NULL};
    char *out = NULL;
    assert_int_equal(run_cli(argv, &out, NULL), 0);
    free(out);
    size_t al = 0;
    char *again = slurp(path_in(dir, "again.html"), &al);
    assert_int_equal(al, hl);
    assert_memory_equal(again, page, hl);
    free(again);
    free(page);
}

/* ---- 2: hostile strings, a mismatch, the gate ------------------------------- */

static const char HOSTILE[] =
    "{\"report\":\"autotune\",\"tool\":\"tune_decode\",\"version\":\"0.2.0\",\"date\":\"d\","
    "\"identity\":{\"arch\":\"cpu\",\"runtime\":\"0.2.0\",\"compiler\":\"c\",\"space\":3,\"device\":\"<b onmouseover=x>dev</b>\"},"
    "\"options\":{\"threshold_pct\":1,\"model_name\":\"</title><script>evil()</script>\\u0001\\u0007 \\u00e9\"},"
    "\"shapes\":[{\"kind\":\"mmvq\",\"type\":\"q8_0\",\"n_rows\":512,\"n_cols\":256,\"weights\":\"<img src=x>\","
    "\"candidates\":["
    "{\"name\":\"default\",\"is_default\":true,\"byte_compare\":\"reference\",\"blended_median_us\":100,"
    "\"blended_p25_us\":95,\"blended_p75_us\":104,\"timings\":[]},"
    "{\"name\":\"rows 2\",\"byte_compare\":\"MISMATCH\",\"mismatch\":\"n_tokens 1: 3 of 512 outputs differ <i>\","
    "\"blended_median_us\":80,\"timings\":[]},"
    "{\"name\":\"rows 4\",\"byte_compare\":\"identical\",\"blended_median_us\":90,\"blended_p25_us\":88,"
    "\"blended_p75_us\":92,\"timings\":[]}],"
    "\"decision\":{\"kept\":\"rows 4\",\"delta_pct\":10,\"noisy\":false,\"reason\":\"rows 4 is 10.0% faster\"}}],"
    "\"table\":{\"path\":\"/x/t.table\",\"written\":true,\"engaged\":true,\"engagement_line\":\"decode tuning: 1 shapes\"},"
    "\"gate\":{\"message\":\"PASS: ...\",\"ran\":true,\"steps\":["
    "{\"n_tokens\":1,\"without_us\":1000,\"with_us\":990,\"spread_without\":0.02,\"spread_with\":0.03},"
    "{\"n_tokens\":2,\"without_us\":1500,\"with_us\":1480,\"spread_without\":0.02,\"spread_with\":0.03},"
    "{\"n_tokens\":3,\"without_us\":2000,\"with_us\":1990,\"spread_without\":0.02,\"spread_with\":0.03}]},"
    "\"summary\":{\"shapes\":1,\"kept_variants\":1,\"mismatches\":1,\"noisy\":0}}";

static bool is_gate_bar(const GumboNode *n, const void *arg)
{
    (void)arg;
    return is_bar(n, NULL);
}

static void page_escapes_and_puts_a_mismatch_first(void **state)
{
    (void)state;
    char *html = NULL;
    size_t len = 0;
    assert_int_equal(st_report_html_render(HOSTILE, sizeof HOSTILE - 1, "hostile.json", &html, &len), ST_OK);
    GumboOutput *g = parse_strict(html, len);
    check_title(g, "strata-tune autotune report: </title><script>evil()</script>");
    assert_int_equal(walk(g->document, is_active, NULL, NULL), 0);
    /* the mismatch: a red alert that comes before everything else in the body */
    const GumboNode *alert = NULL, *verdict = NULL;
    assert_int_equal(walk(g->document, has_id, "mismatch", &alert), 1);
    assert_int_equal(walk(g->document, has_id, "verdict", &verdict), 1);
    assert_true(has_class(alert, "alert"));
    assert_true(alert->index_within_parent < verdict->index_within_parent);
    char text[4096] = "";
    text_of(alert, text, sizeof text);
    assert_non_null(strstr(text, "rows 2: n_tokens 1: 3 of 512 outputs differ <i>"));
    assert_non_null(strstr(html, ".alert{background:#fdecec;border:2px solid #c62828"));
    /* one bar per candidate, the mismatching one styled as such */
    const GumboNode *fig = NULL;
    assert_int_equal(walk(g->document, has_id, "shape-0", &fig), 1);
    assert_int_equal(walk(fig, is_bar, NULL, NULL), 3);
    assert_non_null(strstr(html, "class=\"bar bar-bad\""));
    assert_non_null(strstr(html, "class=\"bar bar-kept\""));
    assert_non_null(strstr(html, "class=\"bar bar-default\""));
    assert_non_null(strstr(html, "class=\"band\""));
    /* the gate: two bars (without, with) per token count */
    const GumboNode *gate = NULL;
    assert_int_equal(walk(g->document, has_id, "gate", &gate), 1);
    assert_int_equal(walk(gate, is_gate_bar, NULL, NULL), 6);
    /* control characters replaced, the accented letter kept */
    assert_null(strchr(html, '\x01'));
    assert_null(strchr(html, '\x07'));
    assert_non_null(strstr(html, "\xc3\xa9"));
    gumbo_destroy_output(&kGumboDefaultOptions, g);
    free(html);
}

/* The parser check is not vacuous: gumbo reports errors on broken markup. */
static void parser_reports_broken_markup(void **state)
{
    (void)state;
    static const char bad[] = "<!DOCTYPE html><html><head><title>x</title></head><body><p>a</div></span></body></html>";
    GumboOptions opt = kGumboDefaultOptions;
    opt.max_errors = -1;
    GumboOutput *g = gumbo_parse_with_options(&opt, bad, sizeof bad - 1);
    assert_true(g->errors.length > 0);
    gumbo_destroy_output(&opt, g);
}

/* ---- 3: verify and bench pages, refusals ------------------------------------ */

static void verify_and_bench_json_render(void **state)
{
    (void)state;
    static const char verify[] =
        "{\"report\":\"verify\",\"identity\":{\"arch\":\"cpu\"},\"options\":{\"table\":\"/t/x.table\"},\"passed\":false,"
        "\"bytes_equal\":true,\"not_slower\":false,\"message\":\"FAIL: n_tokens 2 is 40% slower\","
        "\"steps\":[{\"n_tokens\":1,\"without_us\":10,\"with_us\":11},{\"n_tokens\":2,\"without_us\":12,\"with_us\":17}]}";
    static const char bench[] =
        "{\"report\":\"bench\",\"identity\":{\"arch\":\"cpu\",\"device\":\"CPU\"},\"read_gb_per_s\":10,\"rows\":["
        "{\"kind\":\"mmvq\",\"shape\":\"iq3_s 256x2560\",\"n_tokens\":1,\"path\":\"default\",\"median_us\":5,\"p25_us\":4,\"p75_us\":6},"
        "{\"kind\":\"mmvq\",\"shape\":\"iq3_s 256x2560\",\"n_tokens\":2,\"path\":\"default\",\"median_us\":7},"
        "{\"kind\":\"expert\",\"shape\":\"iq3_s/iq4_nl\",\"n_tokens\":2,\"path\":\"default\",\"median_us\":9}]}";
    char *html = NULL;
    size_t len = 0;
    assert_int_equal(st_report_html_render(verify, sizeof verify - 1, "v.json", &html, &len), ST_OK);
    GumboOutput *g = parse_strict(html, len);
    check_title(g, "strata-tune verify report: x.table on cpu");
    assert_int_equal(walk(g->document, is_bar, NULL, NULL), 4);
    assert_non_null(strstr(html, "FAIL: n_tokens 2 is 40% slower"));
    gumbo_destroy_output(&kGumboDefaultOptions, g);
    free(html);
    assert_int_equal(st_report_html_render(bench, sizeof bench - 1, "b.json", &html, &len), ST_OK);
    g = parse_strict(html, len);
    check_title(g, "strata-tune bench report: CPU on cpu");
    const GumboNode *f0 = NULL, *f1 = NULL;
    assert_int_equal(walk(g->document, has_id, "shape-0", &f0), 1);
    assert_int_equal(walk(g->document, has_id, "shape-1", &f1), 1);
    assert_int_equal(walk(f0, is_bar, NULL, NULL), 2);
    assert_int_equal(walk(f1, is_bar, NULL, NULL), 1);
    gumbo_destroy_output(&kGumboDefaultOptions, g);
    free(html);
}

static void bad_input_is_refused_and_leaves_the_page(void **state)
{
    (void)state;
    const char *dir = make_dir();
    const char *json = path_in(dir, "x.autotune.json"), *html = path_in(dir, "x.autotune.html");
    spit(html, "the old page\n");
    static const char *const bad[] = {"", "not json", "[1,2]", "{\"shapes\":7}", "{\"report\":\"nonsense\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spit(json, bad[i]);
        char *const argv[] = {CLI, "report", (char *)json, NULL};
        char *out = NULL, *err = NULL;
        assert_int_equal(run_cli(argv, &out, &err), 1);
        /* one line, naming the file */
        if (!strstr(err, "x.autotune.json") || strchr(err, '\n') != err + strlen(err) - 1)
            fail_msg("input '%s': expected one line naming the file, got '%s'", bad[i], err);
        free(out);
        free(err);
        char *page = slurp(html, NULL);
        assert_string_equal(page, "the old page\n");
        free(page);
    }
    char *const usage[] = {CLI, "report", NULL};
    char *out = NULL;
    assert_int_equal(run_cli(usage, &out, NULL), 2);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tune_writes_a_page_that_parses_with_every_shape),
        cmocka_unit_test(page_escapes_and_puts_a_mismatch_first),
        cmocka_unit_test(parser_reports_broken_markup),
        cmocka_unit_test(verify_and_bench_json_render),
        cmocka_unit_test(bad_input_is_refused_and_leaves_the_page),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_dirs);
}
