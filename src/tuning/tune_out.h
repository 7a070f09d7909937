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
 * A run that installs nothing (the gate refused or could not decide)
 * while this identity's table is in DIR writes its report as
 * "strata-<name>.not-installed.autotune.{json,html}": the installed
 * table's report stays the one it names.
 *
 * Every output path (the table, the report's JSON and page, tables.json,
 * the gate's candidate) is checked before the sweep: a folder, FIFO,
 * device or socket standing at one is refused then, not after the sweep
 * (file_write.h: the file rule).
 *
 * The outputs change together or not at all (a journal, tune_journal.c): the install
 * writes the report's JSON, its page and the table to temporary files,
 * keeps a hard link to each old file ("NAME.old.<pid>"), writes the
 * journal DIR/.strata-tune.journal (atomically) naming each temporary file,
 * target and link, renames the temporary files into place, rewrites
 * tables.json and removes the links and the journal. A rename that fails
 * turns the journal into a roll-back one and puts the old files back, so
 * the folder holds the old set. A process killed at any instant leaves the
 * journal, and the next tune of the folder (st_tune_out_open, under the
 * lock) completes it (the journal was written: every new file is in place
 * afterwards) or finishes its roll back; without a journal the old set
 * stands. Either way that run then removes what dead runs left: temporary
 * files ("*.tmp.<pid>.<n>", "*.old.<pid>", probes) of processes that no
 * longer exist and the gate's candidates. Paths are built whole (never
 * cut); one longer than ST_TUNE_PATH_MAX is refused. */
#ifndef ST_TUNE_OUT_H
#define ST_TUNE_OUT_H

#include "out_manifest.h"
#include "strata/identity.h"
#include "strata/knobs.h"
#include "strata/table.h"
#include "strata/status.h"
#include "file_write.h"
#include "tuner_decide.h"

#include <stdbool.h>
#include <stddef.h>

/* The names the tune keeps in its folder besides the outputs. */
#define ST_TUNE_JOURNAL_NAME ".strata-tune.journal"
/* ST_TUNE_PROBE_PREFIX, the probe's name: file_write.h (st_out_probe) */
#define ST_TUNE_LOCK_NAME ".strata-tune.lock"

typedef struct {
    char *dir;
    char *table_path;  /* this identity's table in DIR, or the new name */
    char *report_path;
    char *html_path;   /* the report's page */
    char *refused_path; /* the report of a run that installed nothing over this identity's table */
    char *index_path;  /* DIR/tables.json */
    char *manifest_path; /* the run's manifest, beside its report (out_manifest.h) */
    char *journal_path;
    char *lock_path;
    int lock_fd;       /* -1 when not held */
    int lock_slot;     /* the lock file's tmpfiles.h slot */
    st_table *existing; /* this identity's table found in DIR (merged into), or NULL */
    char *existing_text; /* its bytes, to restore on a failed install */
    size_t existing_len;
    const volatile int *stop; /* the run's stop flag (may be NULL): a stop before the install's commit point installs nothing */
} st_tune_out;

/* A malloc'd string printed from F (NULL when out of memory): the tune's
 * paths are built whole, never cut. */
char *st_tune_fmt(const char *f, ...) ST_PRINTF(1, 2);

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
/* The same, for a run made from the file INPUT (the model; may be NULL):
 * refused in one line, before anything in DIR changes, when INPUT is one
 * of the paths the run may write or remove (st_out_not_input), whatever
 * its name. */
st_status st_tune_out_open_input(st_tune_out *out, const char *dir, const char *name, int report_device,
                                 const st_identity *id, bool force, size_t probe_bytes, const char *input);

/* Adds to T (this run's table) the rows of the existing table for shapes
 * that R[0..N) did not tune, and its comments except the ones this run
 * supersedes (its provenance lines: one "merged:" line names the earlier
 * campaign whose shapes stay; the tuned-default lines of re-tuned shapes).
 * No-op without an existing table. */
st_status st_tune_out_merge(const st_tune_out *out, st_table *t, const st_tune_shape_result *r, int n);

/* Installs the table text, the report text and the report's page (HTML
 * may be NULL: no page) together, then rewrites DIR/tables.json for ID
 * and CFG (see above). On failure the folder holds what it held before (the old
 * files, or none) and the message names the file and the system's reason. */
st_status st_tune_out_install(st_tune_out *out, const st_identity *id, const st_dispatch_config *cfg,
                              const char *table_text, size_t table_len,
                              const char *report_text, size_t report_len, const char *html, size_t html_len);

/* The same journaled install for another run's set of N (at most 3) files
 * of DIR in ROLES (a settings run's report, page and profile) with the
 * run's manifest of them at MANIFEST, under DIR's lock, which the caller
 * holds: a kill at any instant leaves the old set or the new one (the next
 * run of the folder settles it), a stop (*STOP, may be NULL) before the
 * commit point installs nothing. Each path is an output of this tool (a
 * "strata-..." name ending in .json, .html or .manifest). */
st_status st_out_install_set(const char *dir, const char *manifest, int n, const char *const *paths,
                             const st_mf_role *roles, const char *const *texts, const size_t *lens,
                             const volatile int *stop);

/* Completes or rolls back the journal DIR holds (see above), then removes
 * the litter of dead runs; WHO names the command in its lines ("tune",
 * "settings", "table list"; NULL: "tune"); *DONE (may be NULL) receives how many files
 * were moved or removed. The caller holds DIR's lock (st_tune_out_open
 * calls it). ID: rewrites tables.json when a journal was found. KEEP (may
 * be NULL): the run's input, never moved or removed under any name or
 * link in DIR (a journal naming it is refused). */
st_status st_tune_out_recover(const char *who, const char *dir, const st_identity *id, const char *keep, int *done);

/* The folder's lock on its own, for what changes a tables folder besides a
 * tune (`table list --prune`, WHO "prune"; `settings`, WHO "settings", from
 * its output check to the end of its write): the same exclusive flock of
 * DIR/.strata-tune.lock, refused at once while another process holds it
 * (ST_ERR_EXISTS; the line starts with WHO and names the holder's pid and
 * kind). st_folder_unlock removes the lock file. */
typedef struct {
    char *path;
    int fd, slot;
} st_folder_lock_t;
st_status st_folder_lock(const char *dir, const char *who, st_folder_lock_t *l);
void st_folder_unlock(st_folder_lock_t *l);

/* Releases the lock (removing the lock file) and frees. Accepts an
 * st_tune_out that was zeroed or whose open failed. */
void st_tune_out_close(st_tune_out *out);

#endif
