/* The host side of every weight format, looked up by type: one table per
 * format (st_format_ops, format_home.h), defined by the format's home.
 * Internal. */
#ifndef ST_FORMAT_OPS_H
#define ST_FORMAT_OPS_H

#include "format_home.h"

/* The table of type T; NULL for a type not in ST_QTYPES. */
const st_format_ops *st_format_ops_of(st_qtype t);

#endif
