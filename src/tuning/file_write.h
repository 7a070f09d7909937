/* The write rule's steps, for the tuner's install of a table together with
 * its report (tune_out.c) and the tests; st_file_write_atomic and
 * st_table_write_atomic (strata/tools/output.h) are the two steps in one.
 * Internal to the tools library. */
#ifndef ST_FILE_WRITE_H
#define ST_FILE_WRITE_H

#include "strata/tools/output.h"

#include <stdbool.h>
#include <stddef.h>

/* Writes LEN bytes of TEXT to a new temporary file beside PATH
 * ("PATH.tmp.<pid>.<n>", created with O_EXCL and tracked in tmpfiles.h),
 * fsyncs and closes it; *TMP (malloc'd, the caller frees) names it and
 * *SLOT is its tmpfiles slot. On failure nothing is left behind, *TMP is
 * NULL and the message names PATH, the step, the temporary file and the
 * system's reason. */
st_status st_file_write_temp(const char *path, const char *text, size_t len, char **tmp, int *slot);

/* Renames TMP (from st_file_write_temp) over PATH and fsyncs the folder,
 * so PATH holds either its old bytes or all the new ones; the slot is
 * untracked. When the rename fails TMP is removed and PATH is untouched.
 * *RENAMED (may be NULL) says whether PATH holds the new bytes, which it
 * does when only the folder's sync failed (an error too). */
st_status st_file_commit(const char *path, const char *tmp, int slot, bool *renamed);

/* Test hook: when set, st_file_commit calls it with the temporary file's
 * name just before the rename (a test kills the process there). NULL (the
 * default) in production. */
extern void (*st_file_write_before_rename)(const char *tmp);

/* Test hook: when >= 0, st_file_write_temp (so every atomic write) fails
 * with EIO after this many bytes, exercising the cleanup path. -1 (the
 * default) disables it. */
extern long st_table_write_fail_after_bytes;

#endif
