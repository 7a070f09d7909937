/* strata-tune: exact, tuned LLM decode kernels. The whole public API. */
#ifndef STRATA_STRATA_H
#define STRATA_STRATA_H
#include "strata/version.h"
#include "strata/status.h"
#include "strata/limits.h"
#include "strata/variants.h"
#include "strata/knobs.h"
#include "strata/identity.h"
#include "strata/formats.h"
#include "strata/table.h"
#include "strata/reference.h"
#include "strata/decode.h"
#include "strata/model.h"
#include "strata/tuner.h"
#include "strata/verify.h"
#endif
