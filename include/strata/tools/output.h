/* strata-tune tools library: how the tools write files. Every file is
 * written to a temporary file beside its target, synced and renamed over
 * it, then the folder is synced: a reader sees the old bytes or all the new
 * ones, never a part, and a failure leaves the target untouched. While a
 * temporary file exists it is tracked, so a process ending on a signal can
 * remove it. */
#ifndef STRATA_TOOLS_OUTPUT_H
#define STRATA_TOOLS_OUTPUT_H

#include "strata/tools/base.h"

#include "strata/status.h"
#include "strata/table.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes LEN bytes of TEXT to PATH atomically (above). On failure the
 * message names PATH, the step and the system's reason ("No space left on
 * device"). */
ST_API st_status st_file_write_atomic(const char *path, const char *text, size_t len);

/* Writes table T (st_table_format) to PATH atomically. */
ST_API st_status st_table_write_atomic(const st_table *t, const char *path);

/* Removes every temporary file the tools library has on disk right now.
 * Async-signal-safe: for a signal handler of a program whose process is
 * about to end (tune_decode's fault handler). */
ST_API void st_tmpfiles_remove_all(void);

#ifdef __cplusplus
}
#endif
#endif
