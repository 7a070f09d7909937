/* strata-tune: status codes.
 *
 * Every fallible function of the library returns an st_status. The list is
 * one X-macro so the enum, st_status_str() and st_status_name() can never
 * disagree. Values are stable: new codes are appended.
 */
#ifndef STRATA_STATUS_H
#define STRATA_STATUS_H

#include "strata/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_STATUS_LIST(X)                                                  \
    X(ST_OK, "ok")                                                         \
    X(ST_ERR_INVALID_ARG, "invalid argument")                              \
    X(ST_ERR_NOMEM, "out of memory")                                       \
    X(ST_ERR_IO, "input/output error")                                     \
    X(ST_ERR_PARSE, "malformed input")                                     \
    X(ST_ERR_REFUSED, "refused: does not describe this build or machine")  \
    X(ST_ERR_UNSUPPORTED, "not supported")                                 \
    X(ST_ERR_NOT_FOUND, "not found")                                       \
    X(ST_ERR_GPU, "GPU runtime error")                                     \
    X(ST_ERR_NO_DEVICE, "no GPU device")                                   \
    X(ST_ERR_MISMATCH, "outputs differ")                                   \
    X(ST_ERR_INTERRUPTED, "interrupted")                                   \
    X(ST_ERR_EXISTS, "already exists")                                     \
    X(ST_ERR_UNDECIDED, "cannot decide: the measurement cannot tell")

typedef enum {
#define ST_STATUS_ENUM_(name, text) name,
    ST_STATUS_LIST(ST_STATUS_ENUM_)
#undef ST_STATUS_ENUM_
    ST_STATUS_COUNT_
} st_status;

/* Human text for a status ("out of memory"). Never NULL; unknown values give
 * "unknown status". */
ST_API const char *st_status_str(st_status s);

/* The enumerator's name ("ST_ERR_NOMEM"). Never NULL. */
ST_API const char *st_status_name(st_status s);

/* The detailed message of the last failure on this thread (for example the
 * GPU runtime's own error text, or the parser's line and reason). Empty
 * string when none was recorded. Valid until the next library call on this
 * thread. */
ST_API const char *st_last_error(void);

/* Where the library's user-facing lines go (the table engagement or refusal
 * line, progress of long work). LINE has no trailing newline. The default
 * sink writes LINE and a newline to stderr. Pass NULL to restore it. */
typedef void (*st_log_fn)(void *user, const char *line);
ST_API void st_set_log(st_log_fn fn, void *user);

/* For libraries and engines built on this one (the tools library uses
 * them), so that a failure anywhere reads through one st_last_error():
 * st_fail records the formatted message as this thread's last error and
 * returns S; st_clear_error empties it; st_log sends one formatted line to
 * the sink st_set_log installed. */
#if defined(__GNUC__) || defined(__clang__)
#define ST_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ST_PRINTF(a, b)
#endif
ST_API st_status st_fail(st_status s, const char *fmt, ...) ST_PRINTF(2, 3);
ST_API void st_clear_error(void);
ST_API void st_log(const char *fmt, ...) ST_PRINTF(1, 2);

#ifdef __cplusplus
}
#endif
#endif
