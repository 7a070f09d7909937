/* strata-tune tools library: included first by each of its headers.
 *
 * The tools library (libstrata_tools: the tuner, the gate, reports, GGUF
 * and model reading, the benchmark) is built on the engine library
 * (libstrata_tune, <strata/strata.h>) and links it. The engine library's
 * own sources are compiled with ST_ENGINE_LAYER defined, so an include of a
 * tools header from them (an upward include) does not compile. */
#ifndef STRATA_TOOLS_BASE_H
#define STRATA_TOOLS_BASE_H

#ifdef ST_ENGINE_LAYER
#error "a strata/tools/ header is the tools library's: the engine library (contract, kernels, runtime) cannot include it"
#endif

#include "strata/version.h"

#endif
