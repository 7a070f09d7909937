/* Where a tune's table and report go (internal to the tuner).
 *
 * Before the sweep: the output folder is made if missing and checked (a
 * folder, writable, room for the outputs: a probe file of the expected size
 * is written, synced and removed), and locked: an exclusive flock on
 * DIR/.strata-tune.lock, so that two tunes of one folder cannot interleave
 * their files; the second is refused at once with a line naming the lock
 * (it does not wait: a tune takes minutes, and a silent wait looks like a
 * hang). The lock file is removed when the tune ends.
 *
 * One table per identity: when DIR already holds the table for this
 * process's identity (whatever its name), this run's rows are merged into
 * it: its rows for shapes this run did not tune are kept, rows for shapes
 * this run tuned are replaced by this run's choices, so tuning a second
 * model or shape set into a folder leaves one table the loader engages.
 * Two tables for this identity, or one that does not parse, are refused up
 * front with what to do.
 *
 * The install puts the table in place only together with its report: both
 * are written to temporary files first, then renamed; if the report's
 * rename fails the table is rolled back, so a table never names a report
 * that is not there. Paths are built whole (never cut); one longer than
 * ST_TUNE_PATH_MAX is refused. */
#ifndef ST_TUNE_OUT_H
#define ST_TUNE_OUT_H

#include "strata/identity.h"
#include "strata/table.h"
#include "tuner_decide.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *dir;
    char *table_path;  /* this identity's table in DIR, or the new name */
    char *report_path;
    char *lock_path;
    int lock_fd;       /* -1 when not held */
    int lock_slot;     /* the lock file's tmpfiles.h slot */
    st_table *existing; /* this identity's table found in DIR (merged into), or NULL */
    char *existing_text; /* its bytes, to restore on a failed install */
    size_t existing_len;
} st_tune_out;

/* The file-name part for a model name: [A-Za-z0-9._-] kept, other bytes
 * as '-'; a name longer than 48 bytes is cut and ends in a hash of the
 * whole name, so long names stay distinct and the file name short. */
void st_tune_file_name(const char *model, char *out, size_t n);

/* Prepares DIR for a tune of NAME (st_tune_file_name) by this identity:
 * see above (the files are strata-NAME-..., "strata-" not doubled on a
 * NAME that starts with it). REPORT_DEVICE >= 0 puts ".devN" in the report's name
 * (st_tune_options.report_per_device). PROBE_BYTES: what the outputs are expected to take. FORCE:
 * a table for another identity at the new name is replaced (else
 * refused), and this identity's table that does not parse is replaced
 * instead of merged. On failure everything is released and nothing is
 * left in DIR (a folder it made stays). */
st_status st_tune_out_open(st_tune_out *out, const char *dir, const char *name, int report_device,
                           const st_identity *id, bool force, size_t probe_bytes);

/* Adds to T (this run's table) the rows of the existing table for shapes
 * that R[0..N) did not tune, and its comments except the ones this run
 * supersedes (its provenance lines: one "merged:" line names the earlier
 * campaign whose shapes stay; the tuned-default lines of re-tuned shapes).
 * No-op without an existing table. */
st_status st_tune_out_merge(const st_tune_out *out, st_table *t, const st_tune_shape_result *r, int n);

/* Installs the table text and the report text together (see above). On
 * failure the folder holds what it held before (the old table, or none)
 * and the message names the file and the system's reason. */
st_status st_tune_out_install(st_tune_out *out, const char *table_text, size_t table_len, const char *report_text,
                              size_t report_len);

/* Releases the lock (removing the lock file) and frees. Accepts an
 * st_tune_out that was zeroed or whose open failed. */
void st_tune_out_close(st_tune_out *out);

#endif
