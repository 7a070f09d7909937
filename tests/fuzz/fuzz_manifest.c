/* The manifest parser (src/tuning/out_manifest.c): any bytes either parse
 * into entries whose names are plain names of the folder, or are refused
 * with one line; a parsed manifest formats back into text that parses to
 * the same entries. */
#include "fuzz_target.h"
#include "file_write.h"
#include "out_manifest.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_manifest m;
    if (st_manifest_parse((const char *)data, size, &m) != ST_OK) return 0;
    for (int i = 0; i < m.n; i++)
        if (!st_out_name_ok(m.e[i].name)) abort();
    char *text = NULL;
    size_t len = 0;
    st_manifest back;
    if (st_manifest_format(&m, &text, &len) != ST_OK) return 0;
    if (st_manifest_parse(text, len, &back) != ST_OK || back.n != m.n) abort();
    for (int i = 0; i < m.n; i++)
        if (back.e[i].role != m.e[i].role || strcmp(back.e[i].name, m.e[i].name) || strcmp(back.e[i].sha256, m.e[i].sha256))
            abort();
    free(text);
    return 0;
}
