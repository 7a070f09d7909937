/* Q4_0 (ggml type 2): 32 values per 18-byte block, y = (q - 8) * d, q = 0..15.
 * Canonical unit (the block): w = q - 8 (-8..7), W = d;
 *   acc = fma(d * da, isum, acc).
 * Device layout: 0: d u16[R][nu]   1: qs u8[R][nu][16] (as ggml: byte i =
 * value i | value i+16 << 4). */
#ifndef ST_FMT_Q4_0_H
#define ST_FMT_Q4_0_H
#include "format_home.h"

typedef struct {
    uint16_t d;     /* f16 scale */
    uint8_t qs[16]; /* byte j: value j (low nibble), value j+16 (high nibble) */
} st_block_q4_0;
ST_BLOCK_CHECK(Q4_0, st_block_q4_0);

ST_HD float st_w_q4_0(float d) { return d; }

/* One block <-> the device layout's planes (host and device repack). */
ST_HD void st_io_Q4_0(const st_repack_io *io, int64_t bi, uint8_t *b)
{
    st_io_field(io, 0, bi, b + offsetof(st_block_q4_0, d), 2);
    st_io_field(io, 1, bi, b + offsetof(st_block_q4_0, qs), 16);
}

#endif

#if defined(ST_FORMAT_HOST) && !defined(ST_FMT_Q4_0_HOST)
#define ST_FMT_Q4_0_HOST
static void q4_0_deq(const uint8_t *b, float *y)
{
    const float d = st_ldh(ST_FIELD(b, st_block_q4_0, d));
    const uint8_t *qs = ST_FIELD(b, st_block_q4_0, qs);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 15) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void q4_0_unit(const uint8_t *b, int j, st_unit *o)
{
    (void)j;
    const uint8_t *qs = ST_FIELD(b, st_block_q4_0, qs);
    o->W = st_w_q4_0(st_ldh(ST_FIELD(b, st_block_q4_0, d)));
    for (int i = 0; i < 16; i++) {
        o->w[i] = (int16_t)((qs[i] & 15) - 8);
        o->w[i + 16] = (int16_t)((qs[i] >> 4) - 8);
    }
}

static void q4_0_planes(int64_t k, st_plane_spec *s)
{
    const size_t nu = (size_t)(k / 32);
    s->n = 2;
    s->per_row[0] = 2 * nu;
    s->per_row[1] = 16 * nu;
}

static void q4_0_scales(uint8_t *b, float d) { st_put_f16(b + offsetof(st_block_q4_0, d), d); }

ST_FORMAT_OPS(Q4_0, q4_0)
#endif

#if defined(ST_FORMAT_DEVICE) && !defined(ST_FMT_Q4_0_DEVICE)
#define ST_FMT_Q4_0_DEVICE
template <> struct st_unit_dec<ST_Q4_0> : st_unit_plain {
    struct raw {
        uint4 q;
        uint16_t d;
    };
    ST_DEV void load(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        const int64_t ru = row * m.nu + u;
        r.d = ld_u16(m.p[0] + ru * 2);
        r.q = *(const uint4 *)(m.p[1] + ru * 16);
    }
    /* the in-place layout (units.h): the same raw from ggml's block */
    static constexpr int blk_align = ST_BLK_ALIGN(ST_BYTES_Q4_0);
    ST_DEV void load_blk(const st_mat_dev &m, int64_t row, int u, raw &r)
    {
        using B = st_block_q4_0;
        int j;
        const uint8_t *b = st_blk_of<ST_QK_Q4_0, ST_BYTES_Q4_0>(m, row, u, j);
        (void)j;
        r.d = ST_LDB(16, b, B, d, 0, 0);
        uint32_t q[4];
        ST_LDW(16, b, B, qs, 0, 0, q);
        r.q = st_uint4(q);
    }
    ST_DEV void dec(const raw &r, int, const st_grids &, st_dunit &o)
    {
        o.W = st_w_q4_0(st_h2f(r.d));
        const uint32_t q[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o.w[k] = st_sub_bytes(q[k] & 0x0f0f0f0fu, 0x08080808u);
            o.w[k + 4] = st_sub_bytes((q[k] >> 4) & 0x0f0f0f0fu, 0x08080808u);
        }
        o.f0 = o.f1 = 1;
        o.M = 0.0f;
    }
    ST_UNIT_GET
};
#endif
