/* tune_decode report FILE.json [-o FILE.html]: the HTML page of a report,
 * rendered again from its JSON alone. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const char REPORT_HELP[] =
    "usage: tune_decode report FILE.json [-o FILE.html]\n"
    "\n"
    "Renders the HTML page of a report from its JSON alone: the tuner's\n"
    "strata-<model>.autotune.json (tune writes the page itself beside it), or the JSON that\n"
    "verify --html and bench --html write. The page is self-contained (inline CSS and SVG, no\n"
    "scripts, nothing fetched): identity and device, the campaign verdict, byte compares\n"
    "(mismatches in red at the top), the gate's step times without and with the table, and\n"
    "per kernel family one chart per shape: every candidate's median with its interquartile\n"
    "spread, the default marked, the keep-threshold band, the decision and its reason.\n"
    "Writes FILE.html beside FILE.json unless -o names the page (written atomically).\n"
    "Exit status: 0 written, 1 unreadable or not a report (one line), 2 usage.\n";

int cmd_report(int argc, char **argv, const td_global *g)
{
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(REPORT_HELP, stdout);
            return 0;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
            int rc = 0;
            if (!(out = td_value(argc, argv, &i, "report", &rc))) return rc;
        } else if (a[0] == '-' && a[1]) {
            return td_usage_error("report: unknown option '%s'", a);
        } else if (in) {
            return td_usage_error("report: unexpected argument '%s'", a);
        } else {
            in = a;
        }
    }
    if (!in) return td_usage_error("report: expected FILE.json");
    char path[4096];
    if (!out) {
        st_report_html_path(in, path, sizeof path);
        out = path;
    }
    if (st_report_html_write(in, out) != ST_OK) {
        td_eprint("report: %s", st_last_error());
        return 1;
    }
    if (!g->quiet) td_print("report: %s", out);
    return 0;
}
