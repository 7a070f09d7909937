#include "strata/identity.h"
#include "strata/variants.h"
#include "st_build_info.h"

#include <stdio.h>
#include <string.h>

static void copy_token(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src);
}

void st_identity_cpu(st_identity *id)
{
    memset(id, 0, sizeof *id);
    copy_token(id->arch, sizeof id->arch, "cpu");
    copy_token(id->runtime, sizeof id->runtime, ST_VERSION_STRING);
    copy_token(id->compiler, sizeof id->compiler, ST_HOST_COMPILER_HASH);
    id->space = STRATA_SELECTION_SPACE;
    copy_token(id->device_name, sizeof id->device_name, "CPU reference backend");
    copy_token(id->driver, sizeof id->driver, "none");
}

bool st_identity_matches(const st_identity *a, const st_identity *b)
{
    return strcmp(a->arch, b->arch) == 0 && strcmp(a->runtime, b->runtime) == 0 &&
           strcmp(a->compiler, b->compiler) == 0 && a->space == b->space;
}

bool st_identity_same_device(const st_identity *a, const st_identity *b)
{
    return st_identity_matches(a, b) && strcmp(a->model, b->model) == 0;
}

void st_identity_set_model(st_identity *id)
{
    char suffix[24];
    snprintf(suffix, sizeof suffix, "-%dcu", id->compute_units > 0 ? id->compute_units : 0);
    const size_t room = sizeof id->model - strlen(suffix) - 1;
    size_t n = 0;
    bool dash = false;
    for (const char *p = id->device_name; *p && n < room; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            if (dash && n > 0 && n + 1 < room) id->model[n++] = '-';
            id->model[n++] = c;
            dash = false;
        } else {
            dash = true;
        }
    }
    if (n == 0) n = (size_t)snprintf(id->model, room + 1, "gpu");
    snprintf(id->model + n, sizeof id->model - n, "%s", suffix);
}

int st_identity_header(const st_identity *id, char *buf, size_t n)
{
    return snprintf(buf, n, "%s %s %s %d", id->arch, id->runtime, id->compiler, id->space);
}

const char *st_version(void) { return ST_VERSION_STRING; }

const char *st_gpu_backend_name(void) { return ST_GPU_BACKEND_NAME; }
