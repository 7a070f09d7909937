/* Helper macros every layer of both libraries may include: no state,
 * nothing of either library's inside (src/CMakeLists.txt gives this folder
 * to every layer; st_struct.h beside it holds stateless inline helpers). */
#ifndef ST_MACROS_H
#define ST_MACROS_H

/* Propagate a failure: every error path is one line. */
#define ST_TRY(expr)                              \
    do {                                          \
        st_status st_try_s_ = (expr);             \
        if (st_try_s_ != ST_OK) return st_try_s_; \
    } while (0)

#define ST_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
