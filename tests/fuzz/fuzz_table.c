/* Fuzz target for the tuning table parser. Any input: st_table_parse (for a
 * fixed CPU identity, default dispatch) and st_table_parse_any must return
 * without a sanitizer report. When a parse succeeds, format -> parse_any ->
 * format must give the same text, every row must be found by lookup, and
 * parse_any must accept whatever parse accepted.
 *
 * The identity is fixed (not this build's compiler hash) so the seed corpus
 * in tests/fuzz/corpus/table/ reaches the row parser in every build. */
#include "fuzz_target.h"
#include "strata/status.h"
#include "strata/table.h"
#include "strata/variants.h"
#include "fuzz_table_identity.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(void *user, const char *line)
{
    (void)user;
    (void)line;
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_table: %s\n", what);
        abort();
    }
}

static void check_lookups(const st_table *t)
{
    for (size_t i = 0; i < st_table_mmvq_count(t); i++) {
        st_mmvq_key k;
        int rows = -1, found = -1;
        st_table_mmvq_at(t, i, &k, &rows);
        check(st_table_lookup_mmvq(t, &k, &found) && found == rows, "mmvq row not found");
        check(st_mmvq_rows_valid(rows), "table holds a rows value that is not compiled in");
    }
    for (size_t i = 0; i < st_table_expert_count(t); i++) {
        st_expert_key k;
        int gu = -1, dn = -1, fg = -1, fd = -1;
        st_table_expert_at(t, i, &k, &gu, &dn);
        check(st_table_lookup_expert(t, &k, &fg, &fd) && fg == gu && fd == dn,
              "expert row not found");
        check(st_expert_rows_valid(gu, dn), "table holds a rows pair that is not compiled in");
    }
    check(st_table_mmvq_count(t) + st_table_expert_count(t) == st_table_count(t), "row counts");
}

static void round_trip(const st_table *t)
{
    char *a = NULL, *b = NULL, msg[512];
    size_t na = 0, nb = 0;
    st_table *u = NULL;
    check(st_table_format(t, &a, &na) == ST_OK, "format failed");
    check(st_table_parse_any(a, na, "fuzz", &u, msg, sizeof msg) == ST_OK, "formatted text refused");
    check(st_table_format(u, &b, &nb) == ST_OK, "format of the re-parse failed");
    check(na == nb && memcmp(a, b, na) == 0, "round trip changed the text");
    check(st_table_count(u) == st_table_count(t), "round trip changed the row count");
    check_lookups(u);
    free(a);
    free(b);
    st_table_destroy(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_set_log(quiet, NULL);
    st_identity id;
    fuzz_table_identity(&id);
    st_dispatch_config cfg;
    st_dispatch_config_default(&cfg);

    /* A copy of exactly SIZE bytes, so any read past the end is caught. */
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);

    char msg[1024];
    st_table *t = NULL, *any = NULL;
    st_status s = st_table_parse(buf, size, "fuzz", &id, &cfg, &t, msg, sizeof msg);
    check((s == ST_OK) == (t != NULL), "parse status and table disagree");
    check(strncmp(msg, "decode tuning: ", 15) == 0, "message without the prefix");
    st_status sa = st_table_parse_any(buf, size, "fuzz", &any, msg, sizeof msg);
    check((sa == ST_OK) == (any != NULL), "parse_any status and table disagree");
    if (t) {
        check(any != NULL, "parse accepted what parse_any refused");
        check(st_table_count(t) == st_table_count(any), "parse and parse_any disagree");
        check_lookups(t);
        round_trip(t);
    }
    if (any) round_trip(any);
    st_table_destroy(t);
    st_table_destroy(any);
    free(buf);
    st_set_log(NULL, NULL);
    return 0;
}
