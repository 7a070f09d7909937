/* The identity the table fuzzer parses against ("cpu 0.1.0 0123456789abcdef
 * <this build's selection space>"), fixed rather than this build's compiler
 * hash so the seeds in tests/fuzz/corpus/table reach the row parser in
 * every build. Shared by fuzz_table.c and the test that keeps the seeds
 * current (tests/runtime/table_load_test.c). */
#ifndef STRATA_FUZZ_TABLE_IDENTITY_H
#define STRATA_FUZZ_TABLE_IDENTITY_H

#include "strata/table.h"
#include "strata/variants.h"

#include <stdio.h>
#include <string.h>

static inline void fuzz_table_identity(st_identity *id)
{
    memset(id, 0, sizeof *id);
    snprintf(id->arch, sizeof id->arch, "cpu");
    snprintf(id->runtime, sizeof id->runtime, "0.1.0");
    snprintf(id->compiler, sizeof id->compiler, "0123456789abcdef");
    id->space = STRATA_SELECTION_SPACE;
}

#endif
