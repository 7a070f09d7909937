/* strata-tune tools library (libstrata_tools): the tuner, the end-to-end
 * gate, reports, GGUF and model reading, the benchmark. Built on the
 * engine library (<strata/strata.h>, libstrata_tune), which it links; an
 * engine needs it only to read GGUF files through us. */
#ifndef STRATA_TOOLS_H
#define STRATA_TOOLS_H
#include "strata/strata.h"
#include "strata/tools/base.h"
#include "strata/tools/model.h"
#include "strata/tools/verify.h"
#include "strata/tools/tuner.h"
#include "strata/tools/output.h"
#include "strata/tools/text.h"
#include "strata/tools/tables.h"
#include "strata/tools/devices.h"
#include "strata/tools/report.h"
#include "strata/tools/vectors.h"
#include "strata/tools/bench.h"
#include "strata/tools/settings.h"
#endif
