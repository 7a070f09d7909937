/* strata-tune: exact, tuned LLM decode kernels. The engine library
 * (libstrata_tune): everything an inference engine links. The tuner, the
 * gate, reports and GGUF reading are the tools library's
 * (libstrata_tools, <strata/tools.h>). */
#ifndef STRATA_STRATA_H
#define STRATA_STRATA_H
#include "strata/version.h"
#include "strata/status.h"
#include "strata/limits.h"
#include "strata/variants.h"
#include "strata/knobs.h"
#include "strata/identity.h"
#include "strata/formats.h"
#include "strata/files.h"
#include "strata/table.h"
#include "strata/table_meta.h"
#include "strata/reference.h"
#include "strata/decode.h"
#include "strata/probe.h"
#endif
