/* Q4_1 (ggml type 3): 32 values per 20-byte block, y = q * d + m, q = 0..15.
 * Canonical unit (the block): w = q, W = d, and the min as a min term with
 * M = -m (so the same formula as the subtracted mins: -(M * da) = m * da
 * exactly) and min factors g0 = g1 = 1;
 *   acc = fma(d * da, isum, acc);  acc = fma(-(M * da), sum(q8), acc).
 * (ggml's kernels use the q8_1 block's float sum s instead of sum(q8); the
 * integer sum keeps the term exact and independent of how s was rounded.)
 * Device layout: 0: dm u32[R][nu] (d | m << 16)   1: qs u8[R][nu][16] (as
 * ggml: byte i = value i | value i+16 << 4). */
#ifndef ST_FMT_Q4_1_H
#define ST_FMT_Q4_1_H
#include "format_home.h"

typedef struct {
    uint16_t d;     /* f16 scale */
    uint16_t m;     /* f16 min, added to every value */
    uint8_t qs[16]; /* byte j: value j (low nibble), value j+16 (high nibble) */
} st_block_q4_1;
ST_BLOCK_CHECK(Q4_1, st_block_q4_1);

ST_HD float st_w_q4_1(float d) { return d; }
/* An additive min: the min term subtracts M, so M is the negated min (an
 * exact negation). Q5_1 shares it. */
ST_HD float st_m_add(float m) { return -m; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q4_1(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q4_1, d), 4); /* d and m, adjacent */
    st_io_field(io, 1, bi, b + offsetof(st_block_q4_1, qs), 16);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q4_1_HOST)
#define ST_FMT_Q4_1_HOST
static void q4_1_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q4_1, d)), m = st_ldh(ST_FIELD(b, st_block_q4_1, m));
    const uint8_t *qs = ST_FIELD(b, st_block_q4_1, qs);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 15) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void q4_1_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    const uint8_t *qs = ST_FIELD(b, st_block_q4_1, qs);
    o->W = st_w_q4_1(st_ldh(ST_FIELD(b, st_block_q4_1, d)));
    o->M = st_m_add(st_ldh(ST_FIELD(b, st_block_q4_1, m)));
    o->mf[0] = o->mf[1] = 1;
    o->has_min = true;
    for (int i = 0; i < 16; i++) {
        o->w[i] = (int16_t)(qs[i] & 15);
        o->w[i + 16] = (int16_t)(qs[i] >> 4);
    }
}

static void q4_1_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 2;
    s->per_row[0] = 4 * nu;
    s->per_row[1] = 16 * nu;
}

static void q4_1_scales(uint8_t *b, float d)
{
    st_put_f16(b + offsetof(st_block_q4_1, d), d);
    st_put_f16(b + offsetof(st_block_q4_1, m), d * -4.0f);
}

ST_FORMAT_OPS(Q4_1, q4_1)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q4_1_DEVICE)
#define ST_FMT_Q4_1_DEVICE
template <> struct st_unit_dec<ST_Q4_1> : st_unit_plain {
    static constexpr bool min = true;
    struct raw {
        uint4 q;
        uint32_t dm;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.dm = *(const uint32_t *)(m.p[0] + ru * 4);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q4_1);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q4_1;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q4_1, ST_BYTES_Q4_1>(m, row, u, j);
        (void)j;
        static_assert(offsetof(B, m) == offsetof(B, d) + 2, "d | m << 16 is one word");
        r.dm = ST_LDB(32, b, B, d, 0, 0);
        r.q = ST_LDB(128, b, B, qs, 0, 0);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q4_1(st_h2f((uint16_t)(r.dm & 0xffffu)));
        o.M = st_m_add(st_h2f((uint16_t)(r.dm >> 16)));
        const uint32_t q[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o.w[k] = q[k] & 0x0f0f0f0fu;
            o.w[k + 4] = (q[k] >> 4) & 0x0f0f0f0fu;
        }
        o.f0 = o.f1 = 1;
    }
    ST_UNIT_GET
};
#endif
