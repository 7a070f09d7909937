#include "strata/knobs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *env;
    const char *when;
    const char *what;
} knob_info;

static const knob_info g_knobs[ST_KNOB_COUNT] = {
#define ST_KNOB_INFO_(id, env, when, what) {env, when, what},
    STRATA_DISPATCH_KNOBS(ST_KNOB_INFO_)
#undef ST_KNOB_INFO_
};

/* "ENV" or "ENV=VALUE", built once. */
static char g_labels[ST_KNOB_COUNT][96];
static pthread_once_t g_labels_once = PTHREAD_ONCE_INIT;

static void build_labels(void)
{
    for (int k = 0; k < ST_KNOB_COUNT; k++) {
        if (g_knobs[k].when)
            snprintf(g_labels[k], sizeof g_labels[k], "%s=%s", g_knobs[k].env, g_knobs[k].when);
        else
            snprintf(g_labels[k], sizeof g_labels[k], "%s", g_knobs[k].env);
    }
}

static const knob_info *info(st_knob k)
{
    return ((unsigned)k < ST_KNOB_COUNT) ? &g_knobs[k] : NULL;
}

const char *st_knob_env(st_knob k) { return info(k) ? info(k)->env : "?"; }
const char *st_knob_what(st_knob k) { return info(k) ? info(k)->what : "?"; }
const char *st_knob_label(st_knob k)
{
    if (!info(k)) return "?";
    pthread_once(&g_labels_once, build_labels);
    return g_labels[k];
}

const char *st_knob_when(st_knob k)
{
    if (!info(k)) return "?";
    if (!info(k)->when) return "set (not empty, not 0)";
    return strcmp(info(k)->when, "0") == 0 ? "=0" : "=1";
}

bool st_knob_value_active(st_knob k, const char *value)
{
    if (!info(k) || !value) return false;
    if (!info(k)->when) return value[0] != '\0' && strcmp(value, "0") != 0;
    return strcmp(value, info(k)->when) == 0;
}

void st_dispatch_config_default(st_dispatch_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
}

void st_dispatch_config_from_env(st_dispatch_config *cfg)
{
    for (int k = 0; k < ST_KNOB_COUNT; k++)
        cfg->active[k] = st_knob_value_active((st_knob)k, getenv(st_knob_env((st_knob)k)));
}

int st_dispatch_config_first_active(const st_dispatch_config *cfg)
{
    for (int k = 0; k < ST_KNOB_COUNT; k++)
        if (cfg->active[k]) return k;
    return -1;
}
