#define _POSIX_C_SOURCE 200809L
/* What a campaign leaves beside its table: the provenance it writes into
 * the table's comments, the HTML page rendered from its JSON report, and
 * the folder's tables.json. */
#include "out_manifest.h"
#include "report_json.h"
#include "sha256.h"
#include "tools_internal.h"
#include "strata/tools/report.h"
#include "strata/tools/tables.h"
#include "tuner_outputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void list_text(const int *v, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "", v[i]);
}

st_status st_tune_provenance(st_ctx *ctx, const st_tune_options *o, const char *model_name, const char *report_path,
                             st_provenance *p)
{
    memset(p, 0, sizeof *p);
    const st_identity *id = st_ctx_identity(ctx);
    snprintf(p->tool, sizeof p->tool, "tune_decode %s", st_version());
    snprintf(p->source_commit, sizeof p->source_commit, "%s", st_source_commit());
    st_utc_now(p->date, sizeof p->date);
    snprintf(p->device, sizeof p->device, "%s", id->device_name);
    snprintf(p->driver, sizeof p->driver, "%s", id->driver);
    snprintf(p->model, sizeof p->model, "%s", model_name);
    if (o->model_path && o->n_shapes == 0) {
        const char *b = strrchr(o->model_path, '/');
        snprintf(p->model_file, sizeof p->model_file, "%s", b ? b + 1 : o->model_path);
        if (!o->quiet) st_log("tune: hashing %s (SHA-256, for the table's provenance)", p->model_file);
        ST_TRY(st_sha256_file(o->model_path, p->model_sha256));
    }
    int mix[ST_MAX_TOKENS], n = o->n_ntok_mix;
    if (n > 0) memcpy(mix, o->ntok_mix, sizeof(int) * (size_t)n);
    else
        for (n = 0; n < ST_DECODE_TOKENS; n++) mix[n] = n + 1;
    /* as tuner_shapes.c picks them: the expert list, else the mix, else 1..8 */
    if (o->do_mmvq) list_text(mix, n, p->token_mix, sizeof p->token_mix);
    if (o->do_expert && o->n_expert_ntok > 0) list_text(o->expert_ntok, o->n_expert_ntok, p->expert_tokens, sizeof p->expert_tokens);
    else if (o->do_expert) list_text(mix, n, p->expert_tokens, sizeof p->expert_tokens);
    if (o->do_expert && o->n_shapes > 0) snprintf(p->expert_tokens, sizeof p->expert_tokens, "as each --shape gives");
    snprintf(p->threshold, sizeof p->threshold, "%.1f%%", 100 * o->threshold);
    char html[ST_TUNE_PATH_MAX + 8];
    st_report_html_path(report_path, html, sizeof html);
    const char *j = strrchr(report_path, '/'), *h = strrchr(html, '/');
    /* "strata-<model>.autotune.{json,html}" with the model name sanitised
     * to at most 127 bytes: 148 bytes each, so nothing is cut */
    snprintf(p->report, sizeof p->report, "%.150s %.150s", j ? j + 1 : report_path, h ? h + 1 : html);
    return ST_OK;
}

st_status st_tune_outputs(st_ctx *ctx, const st_tune_options *o, const char *dir, const char *report_path,
                          const char *table_path, bool page)
{
    st_status s = ST_OK;
    char html[ST_TUNE_PATH_MAX + 8] = "";
    if (page) {
        st_report_html_path(report_path, html, sizeof html);
        ST_TRY(st_report_html_write(report_path, html));
    }
    st_tables_index *ix = NULL;
    st_index_state before;
    bool wrote = false;
    s = st_tables_index_update(dir, st_ctx_identity(ctx), st_ctx_dispatch(ctx), true, &ix, &before, &wrote);
    if (s != ST_OK) return s;
    if (!o->quiet)
        st_log("tune: %s/%s: %d table%s%s", dir, ST_TABLES_INDEX_NAME, ix->n, ix->n == 1 ? "" : "s",
               before == ST_INDEX_UP_TO_DATE || before == ST_INDEX_STALE ? "" : before == ST_INDEX_MISSING ? " (new)"
                                                                                   : " (rebuilt: it was damaged)");
    const char *mine = strrchr(table_path, '/');
    mine = mine ? mine + 1 : table_path;
    for (int i = 0; i < ix->n; i++) {
        const st_tables_entry *e = &ix->e[i];
        if (e->status == ST_TSTATUS_SUPERSEDED && !strcmp(e->superseded_by, mine))
            st_log("tune: %s is superseded by this table (kept; tune_decode table list %s --prune removes it)", e->file, dir);
    }
    if (!ix->engages[0]) st_log("tune: %s", ix->dir_line); /* the folder does not engage: say why */
    st_tables_index_free(ix);
    if (page) { /* the report and its page written one by one: their manifest after them (out_manifest.h) */
        char *mf = st_manifest_path_for(report_path);
        const char *j = strrchr(report_path, '/'), *h = strrchr(html, '/');
        const char *names[3] = {j ? j + 1 : report_path, h ? h + 1 : html, ST_TABLES_INDEX_NAME};
        const st_mf_role roles[3] = {ST_MF_REPORT, ST_MF_PAGE, ST_MF_INDEX};
        s = mf ? st_manifest_write_files(dir, mf, names, roles, 3) : st_fail(ST_ERR_NOMEM, "tune: out of memory");
        free(mf);
    }
    return s;
}
