/* What every source of the tools library includes: the public status
 * calls (st_fail, st_log: the one st_last_error of both libraries) and the
 * shared macros. The tools library sees the engine library through its
 * public headers only. */
#ifndef ST_TOOLS_INTERNAL_H
#define ST_TOOLS_INTERNAL_H

#include "strata/status.h"
#include "st_macros.h"
#include "st_struct.h"


#endif
