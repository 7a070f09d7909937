#define _POSIX_C_SOURCE 200809L
/* The JSON + HTML report pair that verify --html and bench --html write:
 * the JSON first (the page is rendered from it alone, as `tune_decode
 * report` would), both atomically. */
#include "commands.h"
#include "provenance.h"
#include "report_html.h"
#include "strata/decode.h"
#include "table_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void td_report_header(cJSON *root, const char *kind, const st_identity *id, int argc, char **argv)
{
    cJSON_AddStringToObject(root, "report", kind);
    cJSON_AddStringToObject(root, "tool", "tune_decode");
    cJSON_AddStringToObject(root, "version", st_version());
    cJSON_AddStringToObject(root, "source_commit", st_source_commit());
    char date[32];
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    cJSON_AddStringToObject(root, "date", date);
    size_t n = 16;
    for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
    char *cl = malloc(n);
    if (cl) {
        snprintf(cl, n, "tune_decode");
        for (int i = 0; i < argc; i++) {
            strcat(cl, " ");
            strcat(cl, argv[i]);
        }
        cJSON_AddStringToObject(root, "command_line", cl);
        free(cl);
    }
    cJSON *idj = cJSON_AddObjectToObject(root, "identity");
    cJSON_AddStringToObject(idj, "arch", id->arch);
    cJSON_AddStringToObject(idj, "runtime", id->runtime);
    cJSON_AddStringToObject(idj, "compiler", id->compiler);
    cJSON_AddNumberToObject(idj, "space", id->space);
    cJSON_AddStringToObject(idj, "device", id->device_name);
    cJSON_AddStringToObject(idj, "driver", id->driver);
}

int td_write_report(const cJSON *root, const char *html_path, const char *cmd, bool quiet)
{
    const size_t l = strlen(html_path);
    if (l < 6 || strcmp(html_path + l - 5, ".html")) {
        fprintf(stderr, "%s: --html %s: the page's name must end in .html (its JSON goes beside it)\n", cmd, html_path);
        return 1;
    }
    char *json_path = malloc(l + 1);
    char *text = cJSON_Print(root);
    int rc = 0;
    if (!json_path || !text) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        rc = 1;
    } else {
        snprintf(json_path, l + 1, "%.*s.json", (int)(l - 5), html_path);
        if (st_file_write_atomic(json_path, text, strlen(text)) != ST_OK || st_report_html_write(json_path, html_path) != ST_OK) {
            fprintf(stderr, "%s: %s\n", cmd, st_last_error());
            rc = 1;
        } else if (!quiet) {
            fprintf(stderr, "%s: report: %s (from %s)\n", cmd, html_path, json_path);
        }
    }
    free(json_path);
    free(text);
    return rc;
}
