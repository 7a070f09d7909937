/* Measuring on a context (strata/probe.h): timers, probes, memory and cache
 * facts, graph capture, each a check of its arguments and one call through
 * the backend's function table. */
#include "ctx_internal.h"
#include "devinfo.h"

#include <stddef.h>

#define ST_NEED(c, what) \
    if (!(c)) return st_fail(ST_ERR_INVALID_ARG, "%s: NULL context", what)

st_status st_ctx_timer_start(st_ctx *c)
{
    ST_NEED(c, "st_ctx_timer_start");
    return c->ops->timer_start(c->b);
}

st_status st_ctx_timer_stop(st_ctx *c, double *ms)
{
    ST_NEED(c, "st_ctx_timer_stop");
    if (!ms) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_timer_stop: NULL result");
    return c->ops->timer_stop(c->b, ms);
}

size_t st_ctx_llc(st_ctx *c, const char **source)
{
    static const char cpu[] = "none: the CPU backend has no card's cache to rotate past (its timings are the reference's)";
    static const char fake[] = "set by a test (st_ctx_test_set_llc)";
    const char *src_unused;
    if (!source) source = &src_unused;
    if (!c) {
        *source = "no context";
        return 0;
    }
    if (c->test_llc) {
        *source = fake;
        return c->test_llc;
    }
    if (c->backend != ST_BACKEND_GPU) {
        *source = cpu;
        return 0;
    }
    /* the runtime's L2, or the per-arch table's larger last level */
    return st_llc_lookup(c->id.arch, c->id.device_name, c->id.compute_units, c->ops->llc_bytes(c->b), source);
}

void st_ctx_test_set_llc(st_ctx *c, size_t bytes) { c->test_llc = bytes; }

st_status st_ctx_mem_info(st_ctx *c, size_t *free_bytes, size_t *total_bytes)
{
    ST_NEED(c, "st_ctx_mem_info");
    if (!free_bytes || !total_bytes) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_mem_info: NULL result");
    return c->ops->mem_info(c->b, free_bytes, total_bytes);
}

const st_ctx_limits *st_ctx_limits_of(const st_ctx *c) { return &c->lim; }

st_status st_ctx_probe_read(st_ctx *c, const void *src, size_t bytes, float *sink)
{
    ST_NEED(c, "st_ctx_probe_read");
    if (!src || !sink) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_probe_read: NULL buffer");
    return c->ops->probe_read(c->b, src, bytes, sink);
}

st_status st_ctx_probe_copy(st_ctx *c, void *dst, const void *src, size_t bytes)
{
    ST_NEED(c, "st_ctx_probe_copy");
    if (!src || !dst) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_probe_copy: NULL buffer");
    return c->ops->probe_copy(c->b, dst, src, bytes);
}

st_status st_ctx_probe_empty(st_ctx *c)
{
    ST_NEED(c, "st_ctx_probe_empty");
    return c->ops->probe_empty(c->b);
}

st_status st_ctx_probe_loads(st_ctx *c, const st_matrix *w, float *sink)
{
    ST_NEED(c, "st_ctx_probe_loads");
    if (!w || !sink) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_probe_loads: NULL argument");
    if (w->ctx != c) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_probe_loads: the matrix belongs to another context");
    return c->ops->probe_loads(c->b, &w->m, sink);
}

size_t st_matrix_bytes(const st_matrix *m) { return m ? m->m.bytes : 0; }
const void *st_matrix_data(const st_matrix *m) { return m ? m->m.data : NULL; }

st_status st_ctx_capture_begin(st_ctx *c)
{
    ST_NEED(c, "st_ctx_capture_begin");
    if (!c->ops->capture_begin) return st_fail(ST_ERR_UNSUPPORTED, "graph capture: the CPU backend has no streams");
    return c->ops->capture_begin(c->b);
}

st_status st_ctx_capture_end(st_ctx *c, st_ctx_graph **g)
{
    ST_NEED(c, "st_ctx_capture_end");
    if (!g) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_capture_end: NULL result");
    *g = NULL;
    if (!c->ops->capture_end) return st_fail(ST_ERR_UNSUPPORTED, "graph capture: the CPU backend has no streams");
    return c->ops->capture_end(c->b, (void **)g);
}

st_status st_ctx_graph_launch(st_ctx *c, st_ctx_graph *g)
{
    ST_NEED(c, "st_ctx_graph_launch");
    if (!g || !c->ops->graph_launch) return st_fail(ST_ERR_INVALID_ARG, "st_ctx_graph_launch: no graph");
    return c->ops->graph_launch(c->b, g);
}

void st_ctx_graph_destroy(st_ctx *c, st_ctx_graph *g)
{
    if (c && g && c->ops->graph_destroy) c->ops->graph_destroy(c->b, g);
}
