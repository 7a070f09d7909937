/* strata-tune: the decode tuning table.
 *
 * Plain text. '#' lines are comments. The first other line is the header
 * "<arch> <runtime> <compiler> <space>"; on a GPU the next is the device
 * line "device <model>" (st_identity.model); each further line is one
 * shape:
 *
 *   expert <gu_type> <down_type> <n_embd> <n_ff> <n_tokens> <gu_rows> <down_rows>
 *   mmvq   <type> <n_rows> <n_cols> <rows>
 *
 * Loading is all or nothing: any problem refuses the whole table with exactly
 * one line (through the st_set_log sink) and no table is returned, so the
 * caller's defaults stay in effect. The refusal wording is part of the
 * interface (README.md lists every message). */
#ifndef STRATA_TABLE_H
#define STRATA_TABLE_H

#include "strata/version.h"

#include "strata/files.h"
#include "strata/formats.h"
#include "strata/identity.h"
#include "strata/knobs.h"
#include "strata/limits.h"
#include "strata/status.h"
#include "strata/variants.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct st_table st_table;

typedef struct {
    st_qtype gu_type;   /* gate and up weights */
    st_qtype down_type; /* down weights */
    int n_embd;         /* K of gate/up, rows of down */
    int n_ff;           /* rows of gate/up, K of down */
    int n_tokens;       /* 1..ST_MAX_TOKENS */
} st_expert_key;

typedef struct {
    st_qtype type;
    int n_rows; /* output rows */
    int n_cols; /* K */
} st_mmvq_key;

/* Limits the parser enforces on a shape. */
#define ST_TABLE_MAX_DIM (1 << 20)
#define ST_TABLE_MAX_TOKENS ST_MAX_TOKENS

/* Parses table text BUF[0..LEN) (need not be NUL-terminated) named PATH
 * (used only in messages) and checks it against identity ID and dispatch
 * configuration CFG. On success *OUT is the table and MSG holds the
 * engagement line "decode tuning: N shapes from PATH (ARCH, runtime R)".
 * On failure *OUT is NULL, MSG holds the one refusal line
 * ("decode tuning: PATH: ...") and the status is ST_ERR_REFUSED (identity,
 * space or knob) or ST_ERR_PARSE (the text is malformed). MSG may be NULL. */
ST_API st_status st_table_parse(const char *buf, size_t len, const char *path,
                                const st_identity *id, const st_dispatch_config *cfg,
                                st_table **out, char *msg, size_t msglen);

/* Parses without checking identity or knobs (for `table show` and tools
 * that inspect tables made elsewhere). Structure errors still refuse. */
ST_API st_status st_table_parse_any(const char *buf, size_t len, const char *path,
                                    st_table **out, char *msg, size_t msglen);

/* Loads the table at PATH for identity ID. PATH is a table file, or a
 * directory: then the one *.table file in it whose header matches ID is
 * chosen (the others are skipped quietly; no match or several matches give
 * one clear line). Prints exactly one line through the process's log sink
 * (st_set_log): the engagement line or the refusal. */
ST_API st_status st_table_load(const char *path, const st_identity *id,
                               const st_dispatch_config *cfg, st_table **out);

/* Every line the loader and the parser give starts with this. */
#define ST_TABLE_MSG_PREFIX "decode tuning: "

/* The same without printing: the one line (engagement or refusal, at most
 * MSGLEN - 1 bytes) is written to MSG instead. This is how a caller with its
 * own log (a context, a tool) gets the line; nothing process-wide is
 * touched. ST_TABLE_MSG_MAX bytes always hold the whole line. */
#define ST_TABLE_MSG_MAX 8192
ST_API st_status st_table_load_msg(const char *path, const st_identity *id,
                                   const st_dispatch_config *cfg, st_table **out,
                                   char *msg, size_t msglen);

/* The largest table file the loader, st_read_file (strata/files.h) and
 * the tools read (16 MiB; a table of every decode shape of a large model
 * is a few KB). */
#define ST_TABLE_MAX_BYTES ((size_t)16 << 20)

/* Finds the header of table text BUF[0..LEN) without checking anything
 * else: ST_OK and its four tokens (and the device line's model, empty when
 * there is none) in *HDR when the first non-comment line is a well-formed
 * header; otherwise ST_ERR_PARSE (or ST_ERR_REFUSED for a selection-space
 * token this build cannot read), with why in st_last_error(). Gives no log
 * line: how a folder's tables are told apart before one is parsed. */
ST_API st_status st_table_read_header(const char *buf, size_t len, st_identity *hdr);

ST_API void st_table_destroy(st_table *t);

/* An empty table for identity ID, for the tuner to fill and write. */
ST_API st_status st_table_create(const st_identity *id, st_table **out);
/* Adds a shape. ST_ERR_INVALID_ARG for a rows value that is not compiled
 * in, a shape that does not fit its type, or a key already present. */
ST_API st_status st_table_add_mmvq(st_table *t, const st_mmvq_key *key, int rows);
ST_API st_status st_table_add_expert(st_table *t, const st_expert_key *key,
                                     int gu_rows, int down_rows);
/* Adds a provenance comment (written as "# TEXT" after the header). */
ST_API st_status st_table_add_comment(st_table *t, const char *text);

/* Number of shapes. */
ST_API size_t st_table_count(const st_table *t);
/* Header tokens of the table. */
ST_API const st_identity *st_table_identity(const st_table *t);

/* Lookups: true and the variant on a hit. */
ST_API bool st_table_lookup_mmvq(const st_table *t, const st_mmvq_key *key, int *rows);
ST_API bool st_table_lookup_expert(const st_table *t, const st_expert_key *key,
                                   int *gu_rows, int *down_rows);

/* Whether the table has no row for the shape but the tuner measured it and
 * kept the default (its "# tuned-default <key>" comment, the key as a row
 * writes it): a "tuned default", not a gap in the table. */
ST_API bool st_table_tuned_default_mmvq(const st_table *t, const st_mmvq_key *key);
ST_API bool st_table_tuned_default_expert(const st_table *t, const st_expert_key *key);

/* Iteration over rows in file order, for show/coverage. */
ST_API size_t st_table_mmvq_count(const st_table *t);
ST_API size_t st_table_expert_count(const st_table *t);
ST_API void st_table_mmvq_at(const st_table *t, size_t i, st_mmvq_key *key, int *rows);
ST_API void st_table_expert_at(const st_table *t, size_t i, st_expert_key *key,
                               int *gu_rows, int *down_rows);

/* The *.table regular files of DIR (names without the folder; not hidden
 * files), sorted by name: the files the loader chooses among. The caller
 * frees the list with st_table_dir_list_free. On failure WHY
 * (ST_FILE_WHY_MAX bytes; may be NULL) holds the system's reason. */
ST_API st_status st_table_dir_list(const char *dir, char ***names, size_t *n, char *why);
ST_API void st_table_dir_list_free(char **names, size_t n);
/* Whether the file at PATH is a table whose header and device line are
 * ID's (no log line; st_last_error() may hold why not): the test the
 * loader applies to a folder's files. */
ST_API bool st_table_file_is_for(const char *path, const st_identity *id);

/* Shapes the tuner measured and kept the default for ("tuned defaults",
 * strata/table_meta.h), in the order their comments came: I from 0 below
 * st_table_tuned_default_count; *EXPERT says which key is filled. */
ST_API size_t st_table_tuned_default_count(const st_table *t);
ST_API void st_table_tuned_default_at(const st_table *t, size_t i, bool *expert, st_mmvq_key *mmvq,
                                      st_expert_key *exp);

/* The comment lines in file order, without the "# " (NULL past the end). */
ST_API size_t st_table_comment_count(const st_table *t);
ST_API const char *st_table_comment_at(const st_table *t, size_t i);

/* The table as text (header, comments, rows); malloc'd, caller frees.
 * Writing it to a file is the tools library's (st_table_write_atomic,
 * strata/tools/output.h). */
ST_API st_status st_table_format(const st_table *t, char **text, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
