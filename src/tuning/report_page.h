/* Pieces shared by the HTML report pages (report_page.c): JSON getters that
 * never trust a field's type, the page skeleton with its stylesheet, the
 * identity block and the step-time chart of the gate. The bodies are in
 * report_autotune.c (tune) and report_steps.c (verify, bench). */
#ifndef ST_REPORT_PAGE_H
#define ST_REPORT_PAGE_H

#include "html_out.h"
#include "report_svg.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* A field of object O of the named type, or DFLT when absent or of
 * another type. */
const char *st_j_str(const cJSON *o, const char *key, const char *dflt);
double st_j_num(const cJSON *o, const char *key, double dflt);
bool st_j_bool(const cJSON *o, const char *key, bool dflt);
const cJSON *st_j_obj(const cJSON *o, const char *key);
const cJSON *st_j_arr(const cJSON *o, const char *key);

/* <!DOCTYPE html> .. <body>, with TITLE (escaped) as <title>. */
void st_page_begin(st_html *h, const char *title);
/* The footer (NAME: the JSON the page was rendered from) and </html>. */
void st_page_end(st_html *h, const char *name);
/* The identity and device (root.identity), the tool, date, source commit,
 * command line and every field of root.options, as a key/value table. */
void st_page_identity(st_html *h, const cJSON *root);
/* A key/value row. */
void st_page_kv(st_html *h, const char *key, const char *value);
/* STEPS: [{n_tokens, without_us, with_us, spread_without, spread_with}]:
 * one pair of bars per token count (without the table, with it). */
void st_page_steps_chart(st_html *h, const cJSON *steps, const char *caption);

void st_page_autotune(st_html *h, const cJSON *root);
void st_page_verify(st_html *h, const cJSON *root);
void st_page_bench(st_html *h, const cJSON *root);
void st_page_settings(st_html *h, const cJSON *root); /* report_settings.c */

#endif
