/* Internal interface between the table sources (table.c: the data
 * structure; table_parse.c: the text parser; table_io.c: files and the
 * loader) and the tests. Not installed. */
#ifndef STRATA_TABLE_INTERNAL_H
#define STRATA_TABLE_INTERNAL_H

#include "strata/table.h"

#include <stdbool.h>
#include <stddef.h>


/* Room for one message line (path included). */

typedef enum { ST_ROW_MMVQ, ST_ROW_EXPERT } st_row_kind;

/* One shape as the table stores it. LINE is the source line of a parsed row
 * (1-based) and 0 for a row added through the API. */
typedef struct {
    st_row_kind kind;
    st_mmvq_key mmvq;     /* kind == ST_ROW_MMVQ */
    st_expert_key expert; /* kind == ST_ROW_EXPERT */
    int rows;             /* mmvq variant */
    int gu_rows, down_rows;
    size_t line;
} st_table_row;

/* Adds ROW without validating its values (the parser has). When the key is
 * already present returns ST_ERR_EXISTS and stores the first row's LINE in
 * *FIRST_LINE (may be NULL). */
st_status st_table_insert_row(st_table *t, const st_table_row *row, size_t *first_line);

/* Replaces the header tokens (the parser fills them after it created the
 * table). Copies arch, runtime, compiler, space and the device model only. */
void st_table_set_identity(st_table *t, const st_identity *id);

/* st_table_add_comment for N bytes of TEXT (need not be NUL-terminated).
 * Newlines and carriage returns become spaces and trailing spaces and tabs
 * are dropped, so a comment reads back exactly as it is written. */
st_status st_table_add_comment_n(st_table *t, const char *text, size_t n);

/* Whether comment C is a tuned-default line (strata/table_meta.h), and
 * the shape it names as a row in *R (kind and key; no variant). */
bool st_meta_tuned_default_row(const char *c, st_table_row *r);

/* Space-separated names of the types of ST_QTYPES, for the unknown-type
 * message ("q8_0 q4_K iq3_xxs ..."). */
const char *st_table_type_names(void);

#endif
