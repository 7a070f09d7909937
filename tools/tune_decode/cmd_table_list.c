#define _POSIX_C_SOURCE 200809L
/* tune_decode table list DIR [--prune]: the tables folder as its index
 * (tables.json) describes it, with each table's status for this process:
 * which one engages, and the loader's line for each that does not. */
#include "commands.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char LIST_HELP[] =
    "usage: tune_decode [--json] table list DIR [--prune]\n"
    "\n"
    "Prints the tables of folder DIR from its index, DIR/tables.json (rebuilt from the *.table\n"
    "files when it is missing, damaged or stale, and written back unless DIR holds no table or\n"
    "cannot be written, which the first line then says): per table its file, header\n"
    "tokens, device, model, campaign date, shapes (rows naming a variant + shapes tuned to the\n"
    "default) and its status for this process: engages here, refused here, or superseded (a\n"
    "newer campaign in DIR for the same device and model, or for the same four header tokens).\n"
    "Then the table this process would engage, with the loader's line (the line `table check DIR`\n"
    "prints), the loader's line for every other table, and each table's provenance (tool,\n"
    "source commit, model file and SHA-256, token mix, report files).\n"
    "Nothing is deleted unless --prune is given; --prune takes the folder's lock (refused while a\n"
    "tune holds it), settles what an interrupted tune left, then removes the superseded tables\n"
    "(and the report files that describe them) that a run's manifest in DIR (*.manifest) lists\n"
    "with their bytes now, names each file removed or kept, and rewrites the index.\n"
    "Exit status: 0 a table of DIR engages here, 1 none does (or an error), 2 usage.\n"
    "--json: {\"index_state\", \"index_written\", \"this_process\", \"engages\", \"load_line\",\n"
    "\"pruned\": [...], \"index\": <tables.json for this process>}\n";

static void on_prune(void *user, const char *line)
{
    cJSON *arr = user;
    if (arr) cJSON_AddItemToArray(arr, td_json_string(line));
    else td_print("prune: %s", line);
}

static int width(const st_tables_index *ix, int col, int min)
{
    int w = min;
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *e = &ix->e[i];
        char hdr[4 * ST_TOKEN_MAX + 16];
        st_identity_header(&e->id, hdr, sizeof hdr);
        const char *v[] = {e->file, hdr, e->id.device_name, e->prov.model, e->prov.date};
        const int l = (int)strlen(v[col]);
        if (l > w) w = l;
    }
    return w > 64 ? 64 : w;
}

/* The escaped copies a listing made (freed together). */
typedef struct {
    char **s;
    size_t n;
} shown;

static const char *show(shown *sh, const char *raw)
{
    char *v = st_text_show_dup(raw ? raw : "");
    char **p = v ? realloc(sh->s, (sh->n + 1) * sizeof *p) : NULL;
    if (!p) {
        free(v);
        return "(out of memory)";
    }
    sh->s = p;
    sh->s[sh->n++] = v;
    return v;
}
#define SH(x) show(sh, (x))

static void print_text_to(FILE *out, const char *dir, const st_tables_index *ix, const char *me, const char *device,
                          shown *sh)
{
    fprintf(out, "this process: %s (%s)\n\n", SH(me), SH(device));
    const int wf = width(ix, 0, 4), wi = width(ix, 1, 8), wd = width(ix, 2, 6), wm = width(ix, 3, 5), wt = width(ix, 4, 8);
    fprintf(out, "  %-*s  %-*s  %-*s  %-*s  %-*s  %-7s  %s\n", wf, "file", wi, "identity", wd, "device", wm, "model", wt, "campaign",
           "shapes", "status");
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *e = &ix->e[i];
        char hdr[4 * ST_TOKEN_MAX + 16], shapes[32];
        if (e->id.arch[0]) st_identity_header(&e->id, hdr, sizeof hdr);
        else snprintf(hdr, sizeof hdr, "(no header)");
        snprintf(shapes, sizeof shapes, "%d+%d", e->n_rows, e->n_shapes - e->n_rows);
        fprintf(out, "%c %-*.*s  %-*.*s  %-*.*s  %-*.*s  %-*.*s  %-7s  %s\n", e->status == ST_TSTATUS_ENGAGES ? '*' : ' ', wf, wf,
               SH(e->file), wi, wi, SH(hdr), wd, wd, e->id.device_name[0] ? SH(e->id.device_name) : "-", wm, wm,
               e->prov.model[0] ? SH(e->prov.model) : "-", wt, wt, e->prov.date[0] ? SH(e->prov.date) : "-", shapes,
               st_table_status_text(e->status));
    }
    if (!ix->n) fprintf(out, "  (no *.table files)\n");
    fprintf(out, "  (shapes: rows naming a variant + shapes tuned to the default)\n\n");
    if (ix->engages[0]) fprintf(out, "engages here: %s\n  %s\n", SH(ix->engages), SH(ix->dir_line));
    else fprintf(out, "engages here: none\n  %s\n", SH(ix->dir_line));
    bool header = false;
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *e = &ix->e[i];
        if (e->status == ST_TSTATUS_ENGAGES) continue;
        if (!header) fprintf(out, "why the others do not:\n");
        header = true;
        if (e->status == ST_TSTATUS_SUPERSEDED)
            fprintf(out,
                    "  %s: superseded by %s (table list %s --prune removes it when a manifest of the folder lists "
                    "it); %s\n",
                    SH(e->file), SH(e->superseded_by), SH(dir), SH(e->status_line));
        else
            fprintf(out, "  %s: %s\n", SH(e->file), SH(e->status_line));
    }
    if (ix->n) fprintf(out, "provenance:\n");
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *e = &ix->e[i];
        const st_provenance *p = &e->prov;
        fprintf(out, "  %s: %s, source %.12s, model %s", SH(e->file), p->tool[0] ? SH(p->tool) : "tool not recorded",
               p->source_commit[0] ? SH(p->source_commit) : "not recorded", p->model[0] ? SH(p->model) : "not recorded");
        if (p->model_file[0])
            fprintf(out, " (%s, sha256 %.16s...)", SH(p->model_file), p->model_sha256[0] ? SH(p->model_sha256) : "-");
        if (p->token_mix[0]) fprintf(out, ", token mix %s", SH(p->token_mix));
        if (p->expert_tokens[0]) fprintf(out, ", expert n_tokens %s", SH(p->expert_tokens));
        for (int k = 0; k < e->n_reports; k++)
            fprintf(out, "%s%s (%s)", k ? ", " : "; reports ", SH(e->reports[k].file), SH(e->reports[k].status));
        fprintf(out, "\n");
    }
}

/* File names, provenance and the loader's lines come from the file
 * system and the tables: each is escaped (st_text_show) before it goes
 * into a line, so a newline in a file name cannot start a line of its own,
 * and the lines are printed as they are (escaping them again would double
 * each backslash). */
static void print_text(const char *dir, const st_tables_index *ix, const char *me, const char *device)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {
        fputs("table list: out of memory\n", stderr);
        return;
    }
    shown sh = {NULL, 0};
    print_text_to(m, dir, ix, me, device, &sh);
    fclose(m);
    fputs(text, stdout);
    free(text);
    for (size_t i = 0; i < sh.n; i++) free(sh.s[i]);
    free(sh.s);
}

#undef SH

int td_table_list(int argc, char **argv, const td_global *g)
{
    const char *dir = NULL;
    bool prune = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(LIST_HELP, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--prune")) prune = true;
        else if (argv[i][0] == '-') return td_usage_error("table list: unknown option '%s'", argv[i]);
        else if (dir) return td_usage_error("table list: unexpected argument '%s'", argv[i]);
        else dir = argv[i];
    }
    if (!dir) return td_usage_error("table list: expected a tables folder (DIR)");
    char clean[4096]; /* "tables/" prints as "tables" */
    if (strlen(dir) >= sizeof clean) { /* refused, never cut (a cut path names another folder) */
        td_eprint("table list: the folder's path has %zu bytes, more than the %zu a path may have here: name a "
                  "shorter one",
                  strlen(dir), sizeof clean - 1);
        return 1;
    }
    snprintf(clean, sizeof clean, "%s", dir);
    for (size_t l = strlen(clean); l > 1 && clean[l - 1] == '/'; l--) clean[l - 1] = '\0';
    dir = clean;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        td_eprint("table list: %s is not a folder (table check PATH looks at one table file)", dir);
        return 1;
    }
    st_ctx *c = NULL;
    if (td_open_ctx(g, &c) != 0) return 1;
    st_identity id = *st_ctx_identity(c);
    st_ctx_destroy(c);
    st_dispatch_config cfg;
    st_dispatch_config_from_env(&cfg);
    st_tables_index *old = NULL, *ix = NULL;
    st_index_state state = ST_INDEX_MISSING;
    st_status s = st_tables_index_read(dir, &old, &state);
    st_tables_index_free(old);
    if (s == ST_OK) s = st_tables_index_build(dir, &id, &cfg, &ix);
    if (s != ST_OK) {
        td_eprint("table list: %s", st_last_error());
        return 1;
    }
    /* a missing, damaged or stale index is rebuilt; failing to write it back
     * (a read-only folder) does not stop the listing */
    bool written = false;
    char why[600] = "";
    if (state != ST_INDEX_UP_TO_DATE && ix->n == 0 && state == ST_INDEX_MISSING) {
        snprintf(why, sizeof why, "the folder holds no table"); /* listing any folder must not leave a file there */
    } else if (state != ST_INDEX_UP_TO_DATE) {
        written = st_tables_index_write_locked(dir, &id, &cfg, &ix) == ST_OK;
        if (!written) snprintf(why, sizeof why, "%s", st_last_error());
    }
    cJSON *pruned = g->json ? cJSON_CreateArray() : NULL;
    int removed = 0;
    if (prune) {
        int superseded = 0;
        for (int i = 0; i < ix->n; i++) superseded += ix->e[i].status == ST_TSTATUS_SUPERSEDED;
        s = st_tables_prune(dir, &id, &cfg, ix, on_prune, pruned, &removed);
        if (s == ST_OK) {
            st_tables_index_free(ix);
            ix = NULL;
            s = st_tables_index_build(dir, &id, &cfg, &ix);
        }
        if (s != ST_OK) {
            /* the settling's refusals name the command already */
            const char *err = st_last_error();
            if (!strncmp(err, "table list: ", 12)) td_eprint("%s", err);
            else td_eprint("table list: --prune: %s", err);
            cJSON_Delete(pruned);
            st_tables_index_free(ix);
            return 1;
        }
        if (!g->json && removed == 0) {
            if (superseded) printf("prune: nothing removed (%d superseded table%s kept: see the lines above)\n", superseded,
                                   superseded == 1 ? "" : "s");
            else printf("prune: nothing is superseded; nothing removed\n");
        }
    }
    /* an install a killed run left (its journal still there) shows as a
     * mixed set until the next tune or --prune settles it: said, not hidden */
    char *journal = malloc(strlen(dir) + 32);
    struct stat js;
    const bool unsettled = journal && (snprintf(journal, strlen(dir) + 32, "%s/.strata-tune.journal", dir), 1) &&
                           lstat(journal, &js) == 0;
    free(journal);
    if (unsettled && !g->json)
        td_print("note: %s holds the journal of an interrupted install: the listing may show a mixed set until the next "
                 "tune of the folder or table list --prune settles it", dir);
    char me[4 * ST_TOKEN_MAX + 16];
    st_identity_header(&id, me, sizeof me);
    const bool engages = ix->engages[0] != '\0';
    if (g->json) {
        char *text = NULL;
        size_t len = 0;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "index_state", st_index_state_text(state));
        cJSON_AddBoolToObject(o, "index_written", written);
        if (why[0]) td_json_add_string(o, "index_write_error", why);
        td_json_add_string(o, "this_process", me);
        td_json_add_string(o, "engages", ix->engages);
        td_json_add_string(o, "load_line", ix->dir_line);
        cJSON_AddBoolToObject(o, "interrupted_install", unsettled);
        cJSON_AddItemToObject(o, "pruned", pruned);
        if (st_tables_index_format(ix, &text, &len) == ST_OK) cJSON_AddItemToObject(o, "index", cJSON_ParseWithLength(text, len));
        free(text);
        char *out = cJSON_Print(o);
        cJSON_Delete(o);
        if (out) puts(out);
        free(out);
    } else {
        /* the folder's name comes from the command line: escaped like every other name */
        char *sdir = st_text_show_dup(dir), *swhy = st_text_show_dup(why);
        const char *d = sdir ? sdir : "(out of memory)";
        if (state == ST_INDEX_UP_TO_DATE) printf("%s/%s: up to date, %d table%s\n", d, ST_TABLES_INDEX_NAME, ix->n, ix->n == 1 ? "" : "s");
        else if (written) printf("%s/%s: %s; rebuilt from the %d table%s\n", d, ST_TABLES_INDEX_NAME, st_index_state_text(state), ix->n,
                   ix->n == 1 ? "" : "s");
        else printf("%s/%s: %s; rebuilt in memory, not written: %s\n", d, ST_TABLES_INDEX_NAME, st_index_state_text(state),
                    swhy ? swhy : why);
        free(sdir);
        free(swhy);
        print_text(dir, ix, me, id.device_name);
    }
    st_tables_index_free(ix);
    return engages ? 0 : 1;
}
