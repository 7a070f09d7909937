/* Internal interface between the table sources (table.c: the data
 * structure; table_parse.c: the text parser; table_io.c: files and the
 * loader) and the tests. Not installed. */
#ifndef STRATA_TABLE_INTERNAL_H
#define STRATA_TABLE_INTERNAL_H

#include "strata/table.h"
#include "file_io.h"

#include <stdbool.h>
#include <stddef.h>

/* The message prefix of every user-facing table line. */
#define ST_TABLE_MSG_PREFIX "decode tuning: "

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

/* Comments in order. */
size_t st_table_comment_count(const st_table *t);
const char *st_table_comment_at(const st_table *t, size_t i);

/* The compiled-in variants as message text, expanded from the X-macros of
 * strata/variants.h: "1 2 4 8 16" and "1/1 2/2 4/2 4/4 8/4 8/8". Writes
 * into BUF (always NUL-terminated when N > 0), returns BUF. */
const char *st_mmvq_rows_list(char *buf, size_t n);
const char *st_expert_rows_list(char *buf, size_t n);

/* Whether mmvq variant R is a wide-row one (STRATA_MMVQ_WIDE_VARIANTS), and
 * whether R may run on rows of COLS values (a wide-row variant needs
 * ST_CANON_WIDE_UNITS units: 128 streams). */
bool st_mmvq_rows_is_wide(int r);
bool st_mmvq_rows_fit(int r, int64_t cols);

/* How a table row names mmvq variant ROWS: "R" (rows), "mmaW", "splitW",
 * "wideTxR". */
const char *st_mmvq_variant_name(int rows, char *buf, size_t n);
/* The same as reports and the tables index name a choice: "rows R", "mmaW",
 * "splitW", "wideTxR". */
const char *st_mmvq_choice_name(int rows, char *buf, size_t n);

/* Space-separated names of the types of ST_QTYPES, for the unknown-type
 * message ("q8_0 q4_K iq3_xxs ..."). */
const char *st_table_type_names(void);

/* Finds the header of table text BUF[0..LEN) without checking anything
 * else: ST_OK and its four tokens (and the device line's model, empty when
 * there is none) in *HDR when the first non-comment line is a well-formed
 * header; otherwise an error status. Silent (used to pick a table out of a
 * directory). */
st_status st_table_read_header(const char *buf, size_t len, st_identity *hdr);

/* st_read_file that also gives the reason of a failure, without the path,
 * in WHY (ST_FILE_WHY_MAX bytes of file_io.h; may be NULL). The buffer is
 * NUL-terminated (not counted in *LEN). */
st_status st_read_file_err(const char *path, char **buf, size_t *len, char *why);

/* The test hook st_table_write_fail_after_bytes of st_table_write_atomic
 * lives in file_io.h. */

#endif
