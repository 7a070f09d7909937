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

int st_identity_header(const st_identity *id, char *buf, size_t n)
{
    return snprintf(buf, n, "%s %s %s %d", id->arch, id->runtime, id->compiler, id->space);
}

const char *st_version(void) { return ST_VERSION_STRING; }

const char *st_gpu_backend_name(void) { return ST_GPU_BACKEND_NAME; }
