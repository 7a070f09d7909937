/* The settings profile (strata-settings-<model>.profile.json): what a run
 * adopted and the identity it holds for, the engine build (the version
 * lines it prints and one sha256 over its binary and the libraries beside
 * it), the model (name and sha256), the device and the strata table that
 * engaged, and st_settings_profile_apply, which refuses a profile for
 * another engine build or model with one line, as a table is refused on
 * another machine. */
#define _GNU_SOURCE
#include "settings_engine.h"
#include "settings_internal.h"
#include "sha256.h"
#include "strata/files.h"
#include "strata/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROFILE_KIND "strata-settings-profile"
#define PROFILE_FORMAT 1
#define PROFILE_MAX_BYTES (1 << 20)

static cJSON *string_array(char *const *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

cJSON *st_settings_profile_json(const st_settings_run_state *s)
{
    const st_settings_point *w = &s->p[s->best], *d = &s->p[0];
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "kind", PROFILE_KIND);
    cJSON_AddNumberToObject(j, "format", PROFILE_FORMAT);
    cJSON_AddStringToObject(j, "tool", "tune_decode");
    cJSON_AddStringToObject(j, "version", st_version());
    cJSON_AddStringToObject(j, "date", s->date);
    cJSON *id = cJSON_AddObjectToObject(j, "identity");
    cJSON_AddStringToObject(id, "engine_version", s->engine_version);
    cJSON_AddStringToObject(id, "engine_sha256", s->engine_sha);
    cJSON_AddStringToObject(id, "model", s->model_name);
    cJSON_AddStringToObject(id, "model_sha256", s->model_sha);
    cJSON_AddStringToObject(id, "device", s->device);
    if (s->table[0])
        cJSON_AddStringToObject(id, "strata_table", s->table);
    else
        cJSON_AddNullToObject(id, "strata_table");
    cJSON_AddStringToObject(id, "strata_log", s->strata_log);
    cJSON_AddStringToObject(j, "decision", s->best ? "adopted" : s->undecided ? "cannot decide" : "defaults kept");
    cJSON_AddStringToObject(j, "verdict", s->verdict);
    cJSON *set = cJSON_AddObjectToObject(j, "settings");
    cJSON_AddStringToObject(set, "label", w->label);
    cJSON_AddItemToObject(set, "flags", string_array(w->flags, w->n_flags));
    cJSON_AddItemToObject(set, "engine_args", string_array((char *const *)s->o->engine_args, s->o->n_engine_args));
    cJSON *fig = cJSON_AddObjectToObject(j, "figures");
    cJSON_AddNumberToObject(fig, "defaults_tok_s", d->tps);
    cJSON_AddNumberToObject(fig, "tok_s", w->tps);
    cJSON_AddNumberToObject(fig, "time_change", w->change);
    cJSON_AddNumberToObject(fig, "time_change_lo", w->change_lo);
    cJSON_AddNumberToObject(fig, "time_change_hi", w->change_hi);
    cJSON_AddNumberToObject(fig, "threshold", s->threshold);
    cJSON_AddNumberToObject(fig, "rounds", s->rounds);
    cJSON_AddNumberToObject(fig, "prompts", s->n_prompts);
    cJSON_AddNumberToObject(fig, "n_predict", s->n_predict);
    cJSON_AddStringToObject(j, "command", s->command);
    return j;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

void st_settings_put_arg(char *out, size_t n, size_t *at, const char *arg)
{
    bool plain = arg[0] != '\0';
    for (const char *c = arg; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+%@", *c)) plain = false;
    int w;
    if (plain)
        w = snprintf(out + *at, *at < n ? n - *at : 0, "%s%s", *at ? " " : "", arg);
    else {
        w = snprintf(out + *at, *at < n ? n - *at : 0, "%s'", *at ? " " : "");
        if (w > 0) *at += (size_t)w;
        for (const char *c = arg; *c && *at + 6 < n; c++) {
            if (*c == '\'') {
                memcpy(out + *at, "'\\''", 4);
                *at += 4;
            } else
                out[(*at)++] = *c;
        }
        out[*at < n ? *at : n - 1] = '\0';
        w = snprintf(out + *at, *at < n ? n - *at : 0, "'");
    }
    if (w > 0) *at += (size_t)w;
    if (*at >= n) *at = n - 1;
}

static void put_array(char *out, size_t n, size_t *at, const cJSON *a)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, a)
    {
        if (cJSON_IsString(v)) st_settings_put_arg(out, n, at, v->valuestring);
    }
}

st_status st_settings_profile_apply(const char *profile, const char *engine, const char *model, char *cmd, size_t n)
{
    if (!profile || !engine || !model || !cmd || n < 2)
        return st_fail(ST_ERR_INVALID_ARG, "settings apply: a profile, an engine and a model are needed");
    cmd[0] = '\0';
    char *text = NULL;
    size_t len = 0;
    ST_TRY(st_file_read_all(profile, PROFILE_MAX_BYTES, &text, &len, NULL, NULL));
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *id = j ? cJSON_GetObjectItemCaseSensitive(j, "identity") : NULL;
    const cJSON *set = j ? cJSON_GetObjectItemCaseSensitive(j, "settings") : NULL;
    const cJSON *fmt = j ? cJSON_GetObjectItemCaseSensitive(j, "format") : NULL;
    const char *kind = jstr(j, "kind"), *ev = jstr(id, "engine_version"), *es = jstr(id, "engine_sha256"),
               *mn = jstr(id, "model"), *ms = jstr(id, "model_sha256");
    if (!kind || strcmp(kind, PROFILE_KIND) || !cJSON_IsObject(set) || !ev || !es || !mn || !ms) {
        cJSON_Delete(j);
        return st_fail(ST_ERR_PARSE, "%s: not a settings profile (tune_decode settings writes them)", profile);
    }
    if (!cJSON_IsNumber(fmt) || fmt->valuedouble != PROFILE_FORMAT) {
        cJSON_Delete(j);
        return st_fail(ST_ERR_REFUSED, "%s: profile format %g, this build reads format %d", profile,
                       cJSON_IsNumber(fmt) ? fmt->valuedouble : -1.0, PROFILE_FORMAT);
    }
    char version[512], sha[65];
    st_status st = st_engine_identity(engine, version, sizeof version, sha);
    if (st == ST_OK && strcmp(sha, es))
        st = st_fail(ST_ERR_REFUSED,
                     "%s was made for another engine build (%s, sha256 %.12s), not %s (%s, sha256 %.12s): run "
                     "tune_decode settings with this build",
                     profile, ev, es, engine, version, sha);
    char msha[65];
    if (st == ST_OK) st = st_sha256_file(model, msha);
    if (st == ST_OK && strcmp(msha, ms))
        st = st_fail(ST_ERR_REFUSED,
                     "%s was made for the model %s (sha256 %.12s), not %s (sha256 %.12s): run tune_decode settings "
                     "with this model",
                     profile, mn, ms, model, msha);
    if (st == ST_OK) {
        size_t at = 0;
        st_settings_put_arg(cmd, n, &at, engine);
        st_settings_put_arg(cmd, n, &at, "-m");
        st_settings_put_arg(cmd, n, &at, model);
        put_array(cmd, n, &at, cJSON_GetObjectItemCaseSensitive(set, "engine_args"));
        put_array(cmd, n, &at, cJSON_GetObjectItemCaseSensitive(set, "flags"));
    }
    cJSON_Delete(j);
    return st;
}
