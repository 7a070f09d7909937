/* strata-tune: reading files so that no path can hang or exhaust the
 * process. The table loader reads this way (so STRATA_DECODE_TUNING naming
 * a FIFO refuses at once), and so do the tools built on the library (GGUF
 * models, reference vectors, reports): the open does not block (a FIFO
 * without a writer, a terminal, a device), anything that is not a regular
 * file is refused with one reason, and whole-file reads are bounded. */
#ifndef STRATA_FILES_H
#define STRATA_FILES_H

#include "strata/version.h"

#include "strata/status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for a reason ("not a regular file (a FIFO)", the system's text). */
#define ST_FILE_WHY_MAX 128

/* Opens PATH read-only without blocking, then checks it: a FIFO, a device,
 * a socket or a directory is refused ("not a regular file (a FIFO)"). On
 * success *FD is the descriptor (blocking mode restored; the caller closes
 * it) and *SIZE the file's size. On failure ST_ERR_IO (ST_ERR_NOMEM), nothing
 * is left open, WHY (ST_FILE_WHY_MAX bytes; may be NULL) holds the reason
 * without the path, *ERR (may be NULL) the errno or 0 when the refusal is
 * ours, and st_last_error() the line with the path. */
ST_API st_status st_file_open_regular(const char *path, int *fd, uint64_t *size, char *why, int *err);

/* The whole regular file at PATH into a malloc'd, NUL-terminated buffer
 * the caller frees (the NUL is not counted in *LEN). A file larger than MAX
 * bytes is refused before anything is read ("larger than the N-byte
 * limit"), as is one that grows past MAX while it is read. Failure as
 * st_file_open_regular. */
ST_API st_status st_file_read_all(const char *path, size_t max, char **buf, size_t *len, char *why, int *err);

/* st_file_read_all with the table's limit, ST_TABLE_MAX_BYTES (16 MiB). */
ST_API st_status st_read_file(const char *path, char **buf, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
