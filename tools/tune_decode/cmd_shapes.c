/* tune_decode shapes MODEL.gguf: the decode shapes and types a model needs. */
#include "commands.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SHAPES_USAGE[] =
    "usage: tune_decode [--json] shapes MODEL.gguf\n"
    "\n"
    "Lists what one decode step of the GGUF model asks of the kernels:\n"
    "  expert shapes  MoE layers (gate/up type, down type, n_embd, n_ff, experts)\n"
    "  mmvq shapes    dense matrices (type, rows, cols) and which tensors have them\n"
    "Shared experts (ffn_*_shexp) are dense matrices of every step. The MoE metadata\n"
    "(<arch>.expert_count, expert_used_count, expert_shared_count, expert_feed_forward_length,\n"
    "expert_shared_feed_forward_length, leading_dense_block_count) is printed when present.\n"
    "Nothing refuses the model for its types: matrices whose type has no kernel are listed\n"
    "as unsupported, routers kept in f32 as skipped (no quantized decode shape), and expert\n"
    "layers the kernels do not run (their types, or a layout such as one tensor per expert)\n"
    "and 3-D per-head weights as omitted, one line each with the reason.\n"
    "--json prints the same as JSON.\n";

#define SKIP_REASON "router stored in float: no quantized decode shape"

/* "blk.12.attn_q.weight" -> "blk.*.attn_q.weight"; other names unchanged. */
static void glob_name(const char *name, char *out, size_t n)
{
    const char *p = name + 4;
    if (strncmp(name, "blk.", 4) == 0 && *p >= '0' && *p <= '9') {
        while (*p >= '0' && *p <= '9') p++;
        if (*p == '.') {
            snprintf(out, n, "blk.*%s", p);
            return;
        }
    }
    snprintf(out, n, "%s", name);
}

static bool in_shape(const st_model_matrix *mx, const st_model_mmvq_shape *s)
{
    return mx->type == s->type && mx->n_rows == s->n_rows && mx->n_cols == s->n_cols;
}

/* The distinct globbed names of the matrices of shape S, comma-separated. */
static void shape_tensors(const st_model *m, const st_model_mmvq_shape *s, char *out, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t j = s->first; j < st_model_matrix_count(m); j++) {
        const st_model_matrix *mx = st_model_matrix_at(m, j);
        if (!in_shape(mx, s)) continue;
        char g[128], h[128];
        glob_name(mx->name, g, sizeof g);
        bool seen = false;
        for (size_t k = s->first; k < j && !seen; k++) {
            const st_model_matrix *mk = st_model_matrix_at(m, k);
            if (!in_shape(mk, s)) continue;
            glob_name(mk->name, h, sizeof h);
            seen = strcmp(g, h) == 0;
        }
        if (seen || o + 1 >= n) continue;
        int w = snprintf(out + o, n - o, "%s%s", o ? ", " : "", g);
        if (w < 0 || (size_t)w >= n - o) {
            snprintf(out + (n > 4 ? n - 4 : 0), n > 4 ? 4 : n, "...");
            return;
        }
        o += (size_t)w;
    }
}

/* A group of same-named (globbed) matrices of one list, printed as one line. */
static void print_matrix_groups(const st_model_matrix *(*at)(const st_model *, size_t), size_t count,
                                const st_model *m, const char *note)
{
    for (size_t j = 0; j < count; j++) {
        const st_model_matrix *mx = at(m, j);
        char g[128], h[128];
        glob_name(mx->name, g, sizeof g);
        bool seen = false;
        int n = 0;
        for (size_t k = 0; k < count; k++) {
            const st_model_matrix *mk = at(m, k);
            glob_name(mk->name, h, sizeof h);
            bool same = strcmp(g, h) == 0 && mk->ggml_type == mx->ggml_type && mk->n_rows == mx->n_rows &&
                        mk->n_cols == mx->n_cols;
            if (same && k < j) seen = true;
            n += same;
        }
        if (seen) continue;
        td_print("  %-8s %6d %6d %5d  %s%s%s", mx->type_name, mx->n_rows, mx->n_cols, n, g, note ? "  " : "",
                 note ? note : "");
    }
}

static int print_text(const char *path, const st_model *m)
{
    /* names and the path are the file's (or the caller's) bytes */
    td_print("model: %s", st_model_name(m));
    td_print("arch: %s", st_model_arch(m)[0] ? st_model_arch(m) : "(none)");
    td_print("file: %s", path);
    printf("expert_used_count: %d\n", st_model_expert_used(m));
    const st_model_moe *md = st_model_moe_info(m);
    const struct {
        const char *key;
        int v;
    } meta[] = {{"expert_count", md->n_expert},
                {"expert_shared_count", md->n_expert_shared},
                {"expert_feed_forward_length", md->n_ff_expert},
                {"expert_shared_feed_forward_length", md->n_ff_shared},
                {"leading_dense_block_count", md->n_leading_dense}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
        if (meta[i].v > 0) printf("%s: %d\n", meta[i].key, meta[i].v);

    size_t ne = st_model_expert_shape_count(m);
    printf("\nexpert shapes: %zu (%zu expert layers)\n", ne, st_model_expert_layer_count(m));
    if (ne) printf("  %-8s %-9s %6s %6s %8s %6s\n", "gu_type", "down_type", "n_embd", "n_ff", "n_expert", "layers");
    for (size_t i = 0; i < ne; i++) {
        const st_model_expert_shape *s = st_model_expert_shape_at(m, i);
        printf("  %-8s %-9s %6d %6d %8d %6d\n", st_qtype_name(s->gu_type), st_qtype_name(s->down_type), s->n_embd,
               s->n_ff, s->n_expert, s->n_layers);
    }

    size_t nm = st_model_mmvq_shape_count(m);
    printf("\nmmvq shapes: %zu\n", nm);
    if (nm) printf("  %-8s %6s %6s %5s  %s\n", "type", "rows", "cols", "count", "tensors");
    for (size_t i = 0; i < nm; i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        char names[1024];
        shape_tensors(m, s, names, sizeof names);
        td_print("  %-8s %6d %6d %5d  %s", st_qtype_name(s->type), s->n_rows, s->n_cols, s->n_matrices, names);
    }

    size_t n_unsup = 0;
    for (size_t j = 0; j < st_model_matrix_count(m); j++) n_unsup += st_model_matrix_at(m, j)->type == ST_QTYPE_NONE;
    if (n_unsup) {
        printf("\nunsupported: %zu %s whose type has no decode kernel (supported: %s)\n", n_unsup,
               n_unsup == 1 ? "matrix" : "matrices",
               st_qtype_names());
        printf("  %-8s %6s %6s %5s  %s\n", "type", "rows", "cols", "count", "tensors");
        for (size_t j = 0; j < st_model_matrix_count(m); j++) {
            const st_model_matrix *mx = st_model_matrix_at(m, j);
            if (mx->type != ST_QTYPE_NONE) continue;
            /* One line per tensor: unsupported matrices are rare and each
             * one is a coverage gap worth naming. */
            td_print("  %-8s %6d %6d %5d  %s", mx->type_name, mx->n_rows, mx->n_cols, 1, mx->name);
        }
    }
    if (st_model_skipped_count(m)) {
        printf("\nskipped: %zu routers stored in float (no quantized decode shape)\n", st_model_skipped_count(m));
        printf("  %-8s %6s %6s %5s  %s\n", "type", "rows", "cols", "count", "tensors");
        print_matrix_groups(st_model_skipped_at, st_model_skipped_count(m), m, NULL);
    }
    if (st_model_omitted_count(m)) {
        printf("\nomitted: %zu left out of the decode step (supported types: %s)\n", st_model_omitted_count(m),
               st_qtype_names());
        for (size_t i = 0; i < st_model_omitted_count(m); i++)
            td_print("  %s: %s", st_model_omitted_at(m, i)->name, st_model_omitted_at(m, i)->reason);
    }
    return 0;
}

static cJSON *matrix_json(const st_model_matrix *mx, const char *reason)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = td_json_add_string(o, "name", mx->name) && td_json_add_string(o, "type", mx->type_name) &&
              cJSON_AddNumberToObject(o, "n_rows", mx->n_rows) && cJSON_AddNumberToObject(o, "n_cols", mx->n_cols) &&
              (!reason || cJSON_AddStringToObject(o, "reason", reason));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool add_moe_json(cJSON *root, const st_model *m)
{
    const st_model_moe *md = st_model_moe_info(m);
    cJSON *o = cJSON_AddObjectToObject(root, "moe");
    return o && cJSON_AddNumberToObject(o, "block_count", md->n_layer) &&
           cJSON_AddNumberToObject(o, "embedding_length", md->n_embd) &&
           cJSON_AddNumberToObject(o, "expert_count", md->n_expert) &&
           cJSON_AddNumberToObject(o, "expert_used_count", md->n_expert_used) &&
           cJSON_AddNumberToObject(o, "expert_shared_count", md->n_expert_shared) &&
           cJSON_AddNumberToObject(o, "expert_feed_forward_length", md->n_ff_expert) &&
           cJSON_AddNumberToObject(o, "expert_shared_feed_forward_length", md->n_ff_shared) &&
           cJSON_AddNumberToObject(o, "leading_dense_block_count", md->n_leading_dense);
}

static cJSON *build_json(const char *path, const st_model *m)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    bool ok = td_json_add_string(root, "file", path) && td_json_add_string(root, "name", st_model_name(m)) &&
              td_json_add_string(root, "arch", st_model_arch(m)) &&
              cJSON_AddNumberToObject(root, "expert_used_count", st_model_expert_used(m)) && add_moe_json(root, m);
    cJSON *experts = ok ? cJSON_AddArrayToObject(root, "expert_shapes") : NULL;
    for (size_t i = 0; experts && ok && i < st_model_expert_shape_count(m); i++) {
        const st_model_expert_shape *s = st_model_expert_shape_at(m, i);
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(experts, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "gu_type", st_qtype_name(s->gu_type)) &&
             cJSON_AddStringToObject(o, "down_type", st_qtype_name(s->down_type)) &&
             cJSON_AddNumberToObject(o, "n_embd", s->n_embd) && cJSON_AddNumberToObject(o, "n_ff", s->n_ff) &&
             cJSON_AddNumberToObject(o, "n_expert", s->n_expert) && cJSON_AddNumberToObject(o, "layers", s->n_layers);
        cJSON *layers = ok ? cJSON_AddArrayToObject(o, "layer_ids") : NULL;
        ok = layers != NULL;
        for (size_t j = s->first; ok && j < st_model_expert_layer_count(m); j++) {
            const st_model_expert_layer *L = st_model_expert_layer_at(m, j);
            if (L->gu_type == s->gu_type && L->down_type == s->down_type && L->n_embd == s->n_embd &&
                L->n_ff == s->n_ff)
                ok = cJSON_AddItemToArray(layers, cJSON_CreateNumber(L->layer));
        }
    }
    cJSON *mmvq = ok && experts ? cJSON_AddArrayToObject(root, "mmvq_shapes") : NULL;
    for (size_t i = 0; mmvq && ok && i < st_model_mmvq_shape_count(m); i++) {
        const st_model_mmvq_shape *s = st_model_mmvq_shape_at(m, i);
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(mmvq, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "type", st_qtype_name(s->type)) &&
             cJSON_AddNumberToObject(o, "n_rows", s->n_rows) && cJSON_AddNumberToObject(o, "n_cols", s->n_cols) &&
             cJSON_AddNumberToObject(o, "count", s->n_matrices);
        cJSON *names = ok ? cJSON_AddArrayToObject(o, "tensors") : NULL;
        ok = names != NULL;
        for (size_t j = s->first; ok && j < st_model_matrix_count(m); j++) {
            const st_model_matrix *mx = st_model_matrix_at(m, j);
            if (in_shape(mx, s)) ok = cJSON_AddItemToArray(names, td_json_string(mx->name));
        }
    }
    cJSON *unsup = ok && mmvq ? cJSON_AddArrayToObject(root, "unsupported") : NULL;
    for (size_t j = 0; unsup && ok && j < st_model_matrix_count(m); j++) {
        const st_model_matrix *mx = st_model_matrix_at(m, j);
        if (mx->type == ST_QTYPE_NONE) ok = cJSON_AddItemToArray(unsup, matrix_json(mx, NULL));
    }
    cJSON *skipped = ok && unsup ? cJSON_AddArrayToObject(root, "skipped") : NULL;
    for (size_t j = 0; skipped && ok && j < st_model_skipped_count(m); j++)
        ok = cJSON_AddItemToArray(skipped, matrix_json(st_model_skipped_at(m, j), SKIP_REASON));
    cJSON *omitted = ok && skipped ? cJSON_AddArrayToObject(root, "omitted") : NULL;
    for (size_t j = 0; omitted && ok && j < st_model_omitted_count(m); j++) {
        const st_model_omission *om = st_model_omitted_at(m, j);
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(omitted, o);
        if (!ok) {
            cJSON_Delete(o);
            break;
        }
        ok = cJSON_AddStringToObject(o, "name", om->name) && cJSON_AddNumberToObject(o, "layer", om->layer) &&
             cJSON_AddStringToObject(o, "reason", om->reason);
    }
    if (!ok || !omitted) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static int print_json(const char *path, const st_model *m)
{
    cJSON *root = build_json(path, m);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        td_eprint("shapes: %s: out of memory writing JSON", path);
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

int cmd_shapes(int argc, char **argv, const td_global *g)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(SHAPES_USAGE, stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') return td_usage_error("shapes: unknown option '%s'", argv[i]);
        if (path) return td_usage_error("shapes: one model file only ('%s' is extra)", argv[i]);
        path = argv[i];
    }
    if (!path) return td_usage_error("shapes: which model? (tune_decode shapes MODEL.gguf)");

    st_model *m;
    st_status s = st_model_open(path, &m);
    if (s != ST_OK) {
        const char *msg = st_last_error();
        td_eprint("shapes: %s: %s", path, msg[0] ? msg : st_status_str(s));
        return 1;
    }
    int rc = g->json ? print_json(path, m) : print_text(path, m);
    st_model_close(m);
    return rc;
}
