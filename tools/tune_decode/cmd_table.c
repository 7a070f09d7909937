/* tune_decode table check|show, variants, identity: inspect tuning tables,
 * the compiled-in variants and knobs, and this process's identity. */
#include "commands.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char TABLE_HELP[] =
    "usage: tune_decode [--json] table check PATH\n"
    "       tune_decode [--json] table show PATH\n"
    "       tune_decode [--json] table list DIR [--prune]\n"
    "\n"
    "  check PATH   load PATH (a table file, or a directory holding *.table files: the one\n"
    "               whose header matches this process is chosen) the way the library does,\n"
    "               against this process's identity and the dispatch knobs of the\n"
    "               environment, and print the one line the loader prints: the engagement\n"
    "               line or the reason for the refusal.\n"
    "               Exit status: 0 the table would engage, 1 it would not.\n"
    "               --json: {\"engages\": bool, \"message\": \"...\", \"path\": \"...\"}\n"
    "  show PATH    print a table's header tokens, provenance (tool, source commit, date,\n"
    "               device, model file and SHA-256, token mix, threshold, report files), other\n"
    "               comments and shapes, without checking them against this machine (the\n"
    "               structure is still checked).\n"
    "               Exit status: 0, or 1 with the one refusal line when it is malformed.\n"
    "               --json: {\"path\", \"identity\": {...}, \"provenance\": {...},\n"
    "               \"comments\": [...], \"mmvq\": [...], \"expert\": [...]}\n"
    "  list DIR     the tables folder from its index (tables.json): each table's identity,\n"
    "               model, date, shapes and status here, which one engages and why the others\n"
    "               do not; --prune removes superseded tables (tune_decode table list --help).\n"
    "\n"
    "Options:\n"
    "  --json       machine-readable output\n"
    "  -h, --help   this text\n";

static const char VARIANTS_HELP[] =
    "usage: tune_decode [--json] variants\n"
    "\n"
    "Prints the kernel selection space of this build, the compiled-in rows variants a table\n"
    "row may name (iq_mmvq rows; expert_grouped gate-up/down rows pairs) and each dispatch\n"
    "knob: its environment variable, when it counts as set, what it reroutes, and whether it\n"
    "is active in this environment (a table is refused while any knob is active).\n"
    "\n"
    "Options:\n"
    "  --json       machine-readable output\n"
    "  -h, --help   this text\n";

static const char IDENTITY_HELP[] =
    "usage: tune_decode [--json] identity\n"
    "\n"
    "Prints the lines this process writes at the top of the tables it makes and accepts in\n"
    "the tables it loads: the header (<arch> <runtime> <compiler> <space>), on a GPU the\n"
    "device line (device <model>: the device name and its compute units, so that SKUs of one\n"
    "arch are told apart), then the device name as a comment. The output without its comment\n"
    "line starts a valid table.\n"
    "\n"
    "Options:\n"
    "  --json       machine-readable output\n"
    "  -h, --help   this text\n";

/* The identity of the backend in use (--backend / --device): the GPU's
 * arch, loaded runtime and GPU compiler hash, or the CPU identity. */
static int td_process_identity(const td_global *g, st_identity *id)
{
    st_ctx *c = NULL;
    if (td_open_ctx(g, &c) != 0) return 1;
    *id = *st_ctx_identity(c);
    st_ctx_destroy(c);
    return 0;
}

/* Splits ARGV[FIRST..ARGC) into positionals (into POS, at most MAXPOS) and
 * options. Returns -1 after --help (printed), -2 after a usage error
 * (printed), or the number of positionals. */
static int td_args(int argc, char **argv, int first, const char *help, const char *cmd,
                   const char **pos, int maxpos, int *err)
{
    int n = 0;
    bool opts = true;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (opts && (!strcmp(a, "-h") || !strcmp(a, "--help"))) {
            fputs(help, stdout);
            return -1;
        }
        if (opts && !strcmp(a, "--")) {
            opts = false;
            continue;
        }
        if (opts && a[0] == '-' && a[1] != '\0') {
            *err = td_usage_error("%s: unknown option '%s'", cmd, a);
            return -2;
        }
        if (n >= maxpos) {
            *err = td_usage_error("%s: unexpected argument '%s'", cmd, a);
            return -2;
        }
        pos[n++] = a;
    }
    return n;
}

static int print_json(cJSON *o)
{
    char *s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!s) {
        fputs("tune_decode: out of memory\n", stderr);
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}

/* ---- table check ---------------------------------------------------------- */

static int table_check(const char *path, const td_global *g)
{
    st_identity id;
    st_dispatch_config cfg;
    if (td_process_identity(g, &id) != 0) return 1;
    st_dispatch_config_from_env(&cfg);
    struct {
        char line[ST_TABLE_MSG_MAX];
    } cap;
    st_table *t = NULL;
    st_status s = st_table_load_msg(path, &id, &cfg, &t, cap.line, sizeof cap.line);
    bool engages = s == ST_OK && t != NULL;
    st_table_destroy(t);
    if (g->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddBoolToObject(o, "engages", engages);
        td_json_add_string(o, "message", cap.line);
        td_json_add_string(o, "path", path);
        if (print_json(o) != 0) return 1;
    } else {
        td_print("%s", cap.line);
    }
    return engages ? 0 : 1;
}

/* ---- table show ----------------------------------------------------------- */

static void show_text(const char *path, const st_table *t)
{
    const st_identity *id = st_table_identity(t);
    /* the path, the header tokens, the provenance and the comments are the
     * file's bytes: shown escaped */
    td_print("table:     %s", path);
    td_print("arch:      %s", id->arch);
    td_print("runtime:   %s", id->runtime);
    td_print("compiler:  %s", id->compiler);
    printf("space:     %d\n", id->space);
    td_print("device:    %s", id->model[0] ? id->model : "(none: a CPU table)");
    st_provenance p;
    st_provenance_from_table(t, &p);
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++)
        td_print("%-16s %s", st_provenance_key(i), st_provenance_value(&p, i)[0] ? st_provenance_value(&p, i) : "(not recorded)");
    for (size_t i = 0; i < st_table_comment_count(t); i++)
        if (st_table_comment_kind(st_table_comment_at(t, i)) != ST_COMMENT_PROVENANCE)
            td_print("# %s", st_table_comment_at(t, i));
    size_t nm = st_table_mmvq_count(t), ne = st_table_expert_count(t);
    printf("shapes:    %zu (%zu mmvq, %zu expert)\n", st_table_count(t), nm, ne);
    if (nm) {
        printf("\n%-8s %8s %8s %9s\n", "type", "n_rows", "n_cols", "variant");
        for (size_t i = 0; i < nm; i++) {
            st_mmvq_key k;
            int rows = 0;
            char vn[32];
            st_table_mmvq_at(t, i, &k, &rows);
            printf("%-8s %8d %8d %9s\n", st_qtype_name(k.type), k.n_rows, k.n_cols, st_mmvq_variant_name(rows, vn, sizeof vn));
        }
    }
    if (ne) {
        printf("\n%-8s %-9s %8s %8s %8s %7s %9s\n", "gu_type", "down_type", "n_embd", "n_ff",
               "n_tokens", "gu_rows", "down_rows");
        for (size_t i = 0; i < ne; i++) {
            st_expert_key k;
            int gu = 0, dn = 0;
            st_table_expert_at(t, i, &k, &gu, &dn);
            printf("%-8s %-9s %8d %8d %8d %7d %9d\n", st_qtype_name(k.gu_type),
                   st_qtype_name(k.down_type), k.n_embd, k.n_ff, k.n_tokens, gu, dn);
        }
    }
}

static int show_json(const char *path, const st_table *t)
{
    const st_identity *id = st_table_identity(t);
    cJSON *o = cJSON_CreateObject();
    td_json_add_string(o, "path", path);
    td_json_add_identity(o, id);
    st_provenance p;
    st_provenance_from_table(t, &p);
    cJSON *pj = cJSON_AddObjectToObject(o, "provenance");
    for (int i = 0; i < ST_PROVENANCE_COUNT; i++) td_json_add_string(pj, st_provenance_key(i), st_provenance_value(&p, i));
    cJSON *com = cJSON_AddArrayToObject(o, "comments");
    for (size_t i = 0; i < st_table_comment_count(t); i++)
        cJSON_AddItemToArray(com, td_json_string(st_table_comment_at(t, i)));
    cJSON *mm = cJSON_AddArrayToObject(o, "mmvq");
    for (size_t i = 0; i < st_table_mmvq_count(t); i++) {
        st_mmvq_key k;
        int rows = 0;
        st_table_mmvq_at(t, i, &k, &rows);
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "type", st_qtype_name(k.type));
        cJSON_AddNumberToObject(r, "n_rows", k.n_rows);
        cJSON_AddNumberToObject(r, "n_cols", k.n_cols);
        cJSON_AddNumberToObject(r, "rows", rows);
        char vn[32];
        cJSON_AddStringToObject(r, "variant", st_mmvq_variant_name(rows, vn, sizeof vn));
        cJSON_AddItemToArray(mm, r);
    }
    cJSON *ex = cJSON_AddArrayToObject(o, "expert");
    for (size_t i = 0; i < st_table_expert_count(t); i++) {
        st_expert_key k;
        int gu = 0, dn = 0;
        st_table_expert_at(t, i, &k, &gu, &dn);
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "gu_type", st_qtype_name(k.gu_type));
        cJSON_AddStringToObject(r, "down_type", st_qtype_name(k.down_type));
        cJSON_AddNumberToObject(r, "n_embd", k.n_embd);
        cJSON_AddNumberToObject(r, "n_ff", k.n_ff);
        cJSON_AddNumberToObject(r, "n_tokens", k.n_tokens);
        cJSON_AddNumberToObject(r, "gu_rows", gu);
        cJSON_AddNumberToObject(r, "down_rows", dn);
        cJSON_AddItemToArray(ex, r);
    }
    return print_json(o);
}

static int table_show(const char *path, const td_global *g)
{
    char *buf = NULL, why[ST_FILE_WHY_MAX] = "";
    size_t len = 0;
    if (st_file_read_all(path, ST_TABLE_MAX_BYTES, &buf, &len, why, NULL) != ST_OK) {
        td_eprint(ST_TABLE_MSG_PREFIX "%s: cannot read: %s", path, why[0] ? why : "error");
        return 1;
    }
    st_table *t = NULL;
    char msg[ST_TABLE_MSG_MAX];
    st_status s = st_table_parse_any(buf, len, path, &t, msg, sizeof msg);
    free(buf);
    if (s != ST_OK) {
        td_eprint("%s", msg);
        return 1;
    }
    int rc = 0;
    if (g->json)
        rc = show_json(path, t);
    else
        show_text(path, t);
    st_table_destroy(t);
    return rc;
}

int cmd_table(int argc, char **argv, const td_global *g)
{
    if (argc >= 2 && !strcmp(argv[1], "list")) return td_table_list(argc - 2, argv + 2, g);
    const char *pos[2];
    int err = 0;
    int n = td_args(argc, argv, 1, TABLE_HELP, "table", pos, 2, &err);
    if (n == -1) return 0;
    if (n == -2) return err;
    if (n == 0) return td_usage_error("table: expected 'check PATH', 'show PATH' or 'list DIR'");
    bool check = !strcmp(pos[0], "check"), show = !strcmp(pos[0], "show");
    if (!check && !show) return td_usage_error("table: unknown subcommand '%s' (check, show, list)", pos[0]);
    if (n != 2) return td_usage_error("table %s: expected one PATH", pos[0]);
    return check ? table_check(pos[1], g) : table_show(pos[1], g);
}

/* ---- variants ------------------------------------------------------------- */

int cmd_variants(int argc, char **argv, const td_global *g)
{
    const char *pos[1];
    int err = 0;
    int n = td_args(argc, argv, 1, VARIANTS_HELP, "variants", pos, 0, &err);
    if (n == -1) return 0;
    if (n == -2) return err;
    st_dispatch_config cfg;
    st_dispatch_config_from_env(&cfg);
    if (g->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "selection_space", STRATA_SELECTION_SPACE);
        cJSON *mm = cJSON_AddArrayToObject(o, "mmvq_rows");
#define TD_ROWS_JSON_(r) cJSON_AddItemToArray(mm, cJSON_CreateNumber(r));
        STRATA_MMVQ_ROWS_VARIANTS(TD_ROWS_JSON_)
#undef TD_ROWS_JSON_
        cJSON *mma = cJSON_AddArrayToObject(o, "mmvq_mma_warps");
#define TD_MMA_JSON_(w) cJSON_AddItemToArray(mma, cJSON_CreateNumber(w));
        STRATA_MMVQ_MMA_VARIANTS(TD_MMA_JSON_)
#undef TD_MMA_JSON_
        cJSON *spl = cJSON_AddArrayToObject(o, "mmvq_split_warps");
#define TD_SPLIT_JSON_(w) cJSON_AddItemToArray(spl, cJSON_CreateNumber(w));
        STRATA_MMVQ_SPLIT_VARIANTS(TD_SPLIT_JSON_)
#undef TD_SPLIT_JSON_
        cJSON *wide = cJSON_AddArrayToObject(o, "mmvq_wide");
#define TD_WIDE_JSON_(t, r)                                   \
    {                                                         \
        cJSON *p = cJSON_CreateObject();                      \
        cJSON_AddNumberToObject(p, "lanes", t);               \
        cJSON_AddNumberToObject(p, "rows_per_group", r);      \
        cJSON_AddItemToArray(wide, p);                        \
    }
        STRATA_MMVQ_WIDE_VARIANTS(TD_WIDE_JSON_)
#undef TD_WIDE_JSON_
        cJSON *ex = cJSON_AddArrayToObject(o, "expert_rows");
#define TD_PAIR_JSON_(gu, dn)                                 \
    {                                                         \
        cJSON *p = cJSON_CreateObject();                      \
        cJSON_AddNumberToObject(p, "gu_rows", gu);            \
        cJSON_AddNumberToObject(p, "down_rows", dn);          \
        cJSON_AddItemToArray(ex, p);                          \
    }
        STRATA_EXPERT_ROWS_VARIANTS(TD_PAIR_JSON_)
#undef TD_PAIR_JSON_
        cJSON *kn = cJSON_AddArrayToObject(o, "knobs");
        for (int k = 0; k < ST_KNOB_COUNT; k++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "env", st_knob_env((st_knob)k));
            cJSON_AddStringToObject(p, "when", st_knob_when((st_knob)k));
            cJSON_AddStringToObject(p, "label", st_knob_label((st_knob)k));
            cJSON_AddStringToObject(p, "description", st_knob_what((st_knob)k));
            cJSON_AddBoolToObject(p, "active", cfg.active[k]);
            cJSON_AddItemToArray(kn, p);
        }
        return print_json(o);
    }
    char list[256];
    printf("kernel selection space: %d\n", STRATA_SELECTION_SPACE);
    printf("mmvq rows variants: %s\n", st_mmvq_variant_list(list, sizeof list));
    printf("  (wideTxR: T lanes and R rows per lane group, on rows of %d values or more only)\n",
           ST_CANON_WIDE_UNITS * ST_CANON_UNIT);
    printf("expert rows variants (gate-up/down): %s\n", st_expert_variant_list(list, sizeof list));
    printf("dispatch knobs (a table is refused while any is active):\n");
    for (int k = 0; k < ST_KNOB_COUNT; k++)
        printf("  %-26s %-24s %s\n      %s\n", st_knob_env((st_knob)k), st_knob_when((st_knob)k),
               cfg.active[k] ? "ACTIVE" : "inactive", st_knob_what((st_knob)k));
    return 0;
}

/* ---- identity ------------------------------------------------------------- */

int cmd_identity(int argc, char **argv, const td_global *g)
{
    const char *pos[1];
    int err = 0;
    int n = td_args(argc, argv, 1, IDENTITY_HELP, "identity", pos, 0, &err);
    if (n == -1) return 0;
    if (n == -2) return err;
    st_identity id;
    if (td_process_identity(g, &id) != 0) return 1;
    char hdr[4 * ST_TOKEN_MAX + 16];
    st_identity_header(&id, hdr, sizeof hdr);
    if (g->json) {
        /* the identity object every report carries, and the backend */
        char *text = st_identity_json(&id);
        cJSON *o = text ? cJSON_Parse(text) : NULL;
        free(text);
        if (o) cJSON_AddStringToObject(o, "backend", st_gpu_backend_name());
        return print_json(o);
    }
    printf("%s\n", hdr);
    if (id.model[0]) printf("device %s\n", id.model);
    printf("# %s\n", id.device_name);
    return 0;
}
