/* Opening the files the library reads (tables, reference vectors, GGUF
 * models) so that no path can hang or exhaust the process: the open does
 * not block (a FIFO without a writer, a terminal, a device), anything that
 * is not a regular file is refused with one reason, and whole-file reads
 * are bounded. Internal. */
#ifndef ST_FILE_IO_H
#define ST_FILE_IO_H

#include "strata/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for a reason ("not a regular file (a FIFO)", the system's text). */
#define ST_FILE_WHY_MAX 128

/* Opens PATH read-only with O_NONBLOCK, then fstat: a FIFO, a device, a
 * socket or a directory is refused ("not a regular file (a FIFO)"). On
 * success *FD is the descriptor (blocking mode restored) and *SIZE the
 * file's size. On failure ST_ERR_IO, nothing is left open and WHY
 * (ST_FILE_WHY_MAX bytes) holds the reason without the path; *ERR (may be
 * NULL) the errno, 0 when the refusal is ours. */
st_status st_file_open_regular(const char *path, int *fd, uint64_t *size, char *why, int *err);

/* The whole regular file at PATH into a malloc'd, NUL-terminated buffer
 * (the NUL is not counted in *LEN). A file larger than MAX bytes is refused
 * before anything is read ("larger than the N-byte limit"), as is one that
 * grows past MAX while it is read. Failure as st_file_open_regular
 * (ST_ERR_NOMEM when the buffer cannot be had); st_last_error() names PATH. */
st_status st_file_read_all(const char *path, size_t max, char **buf, size_t *len, char *why, int *err);

/* ---- writing ---- */

/* Writes LEN bytes of TEXT to a new temporary file beside PATH
 * ("PATH.tmp.<pid>.<n>", created with O_EXCL and tracked in tmpfiles.h),
 * fsyncs and closes it; *TMP (malloc'd, the caller frees) names it and
 * *SLOT is its tmpfiles slot. On failure nothing is left behind, *TMP is
 * NULL and the message names PATH, the step, the temporary file and the
 * system's reason ("No space left on device"). */
st_status st_file_write_temp(const char *path, const char *text, size_t len, char **tmp, int *slot);

/* Renames TMP (from st_file_write_temp) over PATH and fsyncs the folder,
 * so PATH holds either its old bytes or all the new ones; the slot is
 * untracked. When the rename fails TMP is removed and PATH is untouched.
 * *RENAMED (may be NULL) says whether PATH holds the new bytes, which it
 * does when only the folder's sync failed (an error too). */
st_status st_file_commit(const char *path, const char *tmp, int slot, bool *renamed);

/* Writes LEN bytes of TEXT to PATH atomically: st_file_write_temp then
 * st_file_commit (a reader sees the old content or the new, never a part;
 * on failure PATH is untouched and the temporary file removed). */
st_status st_file_write_atomic(const char *path, const char *text, size_t len);

/* Test hook: when set, st_file_commit calls it with the temporary file's
 * name just before the rename (a test kills the process there). NULL (the
 * default) in production. */
extern void (*st_file_write_before_rename)(const char *tmp);

/* Test hook: when >= 0, st_file_write_temp (so st_table_write_atomic)
 * fails with EIO after this many bytes, exercising the cleanup path. -1 (the
 * default) disables it. Not for production use. */
extern long st_table_write_fail_after_bytes;

#endif
