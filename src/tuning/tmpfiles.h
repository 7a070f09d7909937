/* The temporary files the tools library has on disk right now (a table or report
 * being written, the tuner's gate candidate), so that a process dying from
 * a signal can remove them: st_tmpfiles_remove_all() is async-signal-safe.
 * Internal; the registry is process-wide and meant for one writing thread. */
#ifndef ST_TMPFILES_H
#define ST_TMPFILES_H

#include "strata/tools/output.h" /* st_tmpfiles_remove_all */

/* How many can be live at once; st_tmpfile_track beyond that (or for a path
 * longer than ST_TMPFILE_PATH_MAX - 1) returns -1 and the file is simply not
 * tracked. */
#define ST_TMPFILE_SLOTS 8
#define ST_TMPFILE_PATH_MAX 4096

/* Records PATH before the file is created; returns the slot for untrack. */
int st_tmpfile_track(const char *path);
/* Forgets the slot (after the file was renamed into place or removed). */
void st_tmpfile_untrack(int slot);

#endif
