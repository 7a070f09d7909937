/* What the rest of the tools library and the fuzz target use of the model
 * reader (model.c, model_meta.c) beyond strata/tools/model.h. Internal to
 * the tools library. */
#ifndef ST_MODEL_EXTRA_H
#define ST_MODEL_EXTRA_H

#include "gguf.h"
#include "strata/tools/model.h"

/* Builds the model description from G, which it takes over in every case
 * (freed on failure, freed by st_model_close on success). NAME_FALLBACK is
 * the model name when the file has no general.name (may be NULL: ""). The
 * fuzz target and st_model_open share this path. */
st_status st_model_from_gguf(st_gguf *g, const char *name_fallback, st_model **out);

/* One line per thing the decode step of M leaves out (the omissions and the
 * dense matrices of unsupported types) through the log sink:
 * "<WHO>: blk.1 experts skipped: <reason>". */
void st_model_log_skips(const st_model *m, const char *who);

#endif
