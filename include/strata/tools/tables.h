/* strata-tune tools library: tables.json, the index of a tables folder. Per *.table file: its identity
 * (the four header tokens and the device model), the model and its hash,
 * the campaign date, tool version and source commit, the token mix, the
 * shapes it covers, its status for the process that wrote the index
 * (engages here / refused here, with the loader's line / superseded) and
 * its report files. The tables are the truth: the index is rebuilt from
 * them whenever it is missing, damaged or stale, and written atomically
 * (temporary file, fsync, rename), so a reader never sees half of one.
 *
 * Superseded: a table that does not engage here, for which the folder
 * holds a newer campaign (a later date) for the same device (arch and
 * device model) and either the same model (same hash, or same name when a
 * hash is missing) or the same four header tokens (the loader cannot pick
 * between two tables of one identity). Nothing is ever deleted except by
 * st_tables_prune, which removes superseded tables only and names each. */
#ifndef STRATA_TOOLS_TABLES_H
#define STRATA_TOOLS_TABLES_H

#include "strata/tools/base.h"

#include "strata/table_meta.h"
#include "strata/identity.h"
#include "strata/knobs.h"
#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* a SHA-256 as 64 hex digits and the NUL */
#define ST_TABLES_HASH_HEX 65
#define ST_TABLES_INDEX_NAME "tables.json"
#define ST_TABLES_INDEX_FORMAT "strata-tables-index"
#define ST_TABLES_INDEX_VERSION 1
#define ST_INDEX_NAME_MAX 256
#define ST_INDEX_LINE_MAX ST_TABLE_MSG_MAX

/* status, its text in tables.json */
#define ST_TABLE_STATUSES(X)                \
    X(ST_TSTATUS_ENGAGES, "engages here")   \
    X(ST_TSTATUS_REFUSED, "refused here")   \
    X(ST_TSTATUS_SUPERSEDED, "superseded")

typedef enum {
#define ST_TSTATUS_ENUM_(e, text) e,
    ST_TABLE_STATUSES(ST_TSTATUS_ENUM_)
#undef ST_TSTATUS_ENUM_
} st_table_status;

ST_API const char *st_table_status_text(st_table_status s);
/* The status whose text is TEXT; false when none is. */
ST_API bool st_table_status_from_text(const char *text, st_table_status *s);

typedef struct {
    char key[96];    /* "expert iq3_s iq4_nl 2560 640 1" / "mmvq iq3_s 4096 14336" */
    char choice[16]; /* "rows 8/8", "rows 4", or "default" (a tuned-default comment) */
} st_index_shape;

typedef struct {
    char file[ST_INDEX_NAME_MAX];
    char status[ST_INDEX_NAME_MAX + 16]; /* "present", "missing", "describes <another table>", or "not a file of this folder" (a name with a path in it) */
} st_index_report;

typedef struct {
    char file[ST_INDEX_NAME_MAX]; /* base name in the folder */
    char sha256[ST_TABLES_HASH_HEX];
    double bytes;
    bool readable;      /* the structure parsed (else the line says why) */
    st_identity id;     /* header tokens; device_name and driver from the provenance */
    st_provenance prov;
    st_index_shape *shapes;
    int n_shapes, n_rows; /* rows: shapes the table names a variant for */
    st_table_status status;
    char status_line[ST_INDEX_LINE_MAX]; /* the loader's line for this file */
    char superseded_by[ST_INDEX_NAME_MAX];
    st_index_report reports[2];
    int n_reports;
} st_tables_entry;

typedef struct {
    char date[32];
    char tool[64];
    char source_commit[64];
    char writer[4 * ST_TOKEN_MAX + 16]; /* header tokens of the process the statuses are for */
    char writer_device[128];
    char dir_line[ST_INDEX_LINE_MAX]; /* the loader's line for the folder, for that process */
    char engages[ST_INDEX_NAME_MAX];  /* the table that engages there, or "" */
    st_tables_entry *e;
    int n;
} st_tables_index;

typedef enum { ST_INDEX_UP_TO_DATE, ST_INDEX_MISSING, ST_INDEX_DAMAGED, ST_INDEX_STALE } st_index_state;
/* "up to date", "missing", "damaged", "stale (the tables changed)" */
ST_API const char *st_index_state_text(st_index_state s);

/* Scans DIR's *.table files and computes each status for identity ID and
 * dispatch configuration CFG (the way st_table_load_msg sees them). */
ST_API st_status st_tables_index_build(const char *dir, const st_identity *id, const st_dispatch_config *cfg, st_tables_index **out);

/* tables.json text (malloc'd, the caller frees). */
ST_API st_status st_tables_index_format(const st_tables_index *ix, char **text, size_t *len);
/* Parses tables.json text: ST_ERR_PARSE with one line when it is not a
 * well-formed index of this format version. */
ST_API st_status st_tables_index_parse(const char *text, size_t len, st_tables_index **out);

/* Reads DIR/tables.json and compares it with the folder: *STATE says
 * whether it is up to date (the same table files with the same hashes),
 * missing, damaged or stale; *OUT is the parsed index or NULL. */
ST_API st_status st_tables_index_read(const char *dir, st_tables_index **out, st_index_state *state);

/* Writes IX to DIR/tables.json atomically. */
ST_API st_status st_tables_index_write(const char *dir, const st_tables_index *ix);

/* For a reader of the folder (`table list`): under DIR's lock (as a tune
 * takes it; ST_ERR_EXISTS at once, nothing written, while a tune, a prune
 * or a settings run holds it), rebuilds the index for ID/CFG from the
 * folder as it is now into *IX (the old one freed) and writes it, so an
 * index written beside a running tune never undoes the tune's. */
ST_API st_status st_tables_index_write_locked(const char *dir, const st_identity *id, const st_dispatch_config *cfg,
                                              st_tables_index **ix);

/* Builds the index for ID/CFG and writes it when WRITE is true or the one
 * on disk is not up to date. *BEFORE: the state found; *WROTE: whether it
 * was written. */
ST_API st_status st_tables_index_update(const char *dir, const st_identity *id, const st_dispatch_config *cfg, bool write,
                                 st_tables_index **out, st_index_state *before, bool *wrote);

/* Removes the superseded tables of IX from DIR (and their report files when
 * those are proven theirs), then rewrites the index. It works under DIR's
 * lock (the tune's, DIR/.strata-tune.lock: ST_ERR_EXISTS at once while a
 * tune holds it) and first settles the folder as the next tune would (an
 * interrupted install completed or rolled back, dead runs' temporary files
 * removed). A table goes only when it is still superseded with the bytes
 * IX saw and a run's manifest in DIR (*.manifest: every file a tune left,
 * with its SHA-256) lists it with those bytes. Only plain names of regular
 * files in DIR are removed (the file rule, docs/DESIGN.md): never the
 * table that engages, the lock or tables.json, never a name with a path in
 * it, never a link, folder or FIFO; a report goes only when it ends in
 * .json or .html, no other table of IX names it, its JSON (for a page, the
 * JSON of the same name) says it describes the removed table and a
 * manifest lists it with its bytes now; a manifest that then proves
 * nothing goes too. Each file kept for these reasons gets a "kept NAME:
 * ..." line. NOTE receives one line per removed or kept file (may be
 * NULL); returns the count of removed tables in *N_REMOVED. */
typedef void (*st_prune_note)(void *user, const char *line);
ST_API st_status st_tables_prune(const char *dir, const st_identity *id, const st_dispatch_config *cfg, const st_tables_index *ix,
                          st_prune_note note, void *user, int *n_removed);

ST_API void st_tables_index_free(st_tables_index *ix);

#ifdef __cplusplus
}
#endif
#endif
