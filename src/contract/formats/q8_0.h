/* Q8_0 (ggml type 8): 32 values per 34-byte block, y = d * q.
 * Canonical unit (the unit is the block): w = q (int8), W = d;
 *   acc = fma(d * da, isum, acc).
 * Device layout: 0: d u16[R][nu]   1: qs i8[R][nu][32]. */
#ifndef ST_FMT_Q8_0_H
#define ST_FMT_Q8_0_H
#include "format_home.h"

typedef struct {
    uint16_t d;    /* f16 scale */
    int8_t qs[32]; /* the values */
} st_block_q8_0;
ST_BLOCK_CHECK(Q8_0, st_block_q8_0);

ST_HD float st_w_q8_0(float d) { return d; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q8_0(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q8_0, d), 2);
    st_io_field(io, 1, bi, b + offsetof(st_block_q8_0, qs), 32);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q8_0_HOST)
#define ST_FMT_Q8_0_HOST
static void q8_0_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q8_0, d));
    const uint8_t *qs = ST_FIELD(b, st_block_q8_0, qs);
    for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)qs[i] * d;
}

static void q8_0_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    const uint8_t *qs = ST_FIELD(b, st_block_q8_0, qs);
    o->W = st_w_q8_0(st_ldh(ST_FIELD(b, st_block_q8_0, d)));
    for (int i = 0; i < 32; i++) o->w[i] = (int8_t)qs[i];
}

static void q8_0_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 2;
    s->per_row[0] = 2 * nu;
    s->per_row[1] = 32 * nu;
}

static void q8_0_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_q8_0, d), d); }

ST_FORMAT_OPS(Q8_0, q8_0)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q8_0_DEVICE)
#define ST_FMT_Q8_0_DEVICE
template <> struct st_unit_dec<ST_Q8_0> : st_unit_plain {
    struct raw {
        uint4 a, b;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.d = ld_u16(m.p[0] + ru * 2);
        r.a = *(const uint4 *)(m.p[1] + ru * 32);
        r.b = *(const uint4 *)(m.p[1] + ru * 32 + 16);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q8_0);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q8_0;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q8_0, ST_BYTES_Q8_0>(m, row, u, j);
        (void)j;
        r.d = ST_LDB(16, b, B, d, 0, 0);
        uint32_t q[8];
        ST_LDW(32, b, B, qs, 0, 0, q);
        r.a = st_uint4(q);
        r.b = st_uint4(q + 4);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q8_0(st_h2f(r.d));
        o.w[0] = r.a.x; o.w[1] = r.a.y; o.w[2] = r.a.z; o.w[3] = r.a.w;
        o.w[4] = r.b.x; o.w[5] = r.b.y; o.w[6] = r.b.z; o.w[7] = r.b.w;
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
