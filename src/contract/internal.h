/* Internal helpers shared by the library's C sources (not installed). */
#ifndef STRATA_INTERNAL_H
#define STRATA_INTERNAL_H

#include "strata/status.h"

#include <stddef.h>

/* st_fail, st_clear_error and st_log are public (strata/status.h): the
 * tools library reports through them too. */

#include "st_macros.h"

#endif
