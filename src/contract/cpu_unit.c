#include "cpu_unit.h"
#include "grids.h"
#include "st_canon.h"

#include <string.h>

static float rd_f16(const uint8_t *p)
{
    return st_half_to_float((uint16_t)(p[0] | (p[1] << 8)));
}

static void unit_q8_0(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + u * 34;
    o->W = st_w_q8_0(rd_f16(b));
    for (int j = 0; j < 32; j++) o->w[j] = (int8_t)b[2 + j];
}

static void unit_iq4_nl(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + u * 18;
    o->W = st_w_iq4_nl(rd_f16(b));
    for (int j = 0; j < 16; j++) {
        o->w[j] = st_kvalues_iq4nl[b[2 + j] & 15];
        o->w[j + 16] = st_kvalues_iq4nl[b[2 + j] >> 4];
    }
}

static void unit_iq4_xs(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + (u / 8) * 136;
    int ib = (int)(u % 8);
    uint16_t sh = (uint16_t)(b[2] | (b[3] << 8));
    int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
    o->W = st_w_iq4_xs(rd_f16(b), ls);
    const uint8_t *q = b + 8 + 16 * ib;
    for (int j = 0; j < 16; j++) {
        o->w[j] = st_kvalues_iq4nl[q[j] & 15];
        o->w[j + 16] = st_kvalues_iq4nl[q[j] >> 4];
    }
}

static void unit_iq3_s(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + (u / 8) * 110;
    int ib = (int)(u % 8);
    int s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 15;
    o->W = st_w_iq3_s(rd_f16(b), s);
    const uint8_t *qs = b + 2 + 8 * ib;
    uint8_t qh = b[66 + ib];
    const uint8_t *sg = b + 74 + 4 * ib;
    for (int g = 0; g < 8; g++) {
        uint32_t grid = st_iq3s_grid[qs[g] | (((qh >> g) & 1) << 8)];
        for (int j = 0; j < 4; j++) {
            int e = 4 * g + j;
            int v = (int)((grid >> (8 * j)) & 0xff);
            o->w[e] = (int16_t)(((sg[e / 8] >> (e % 8)) & 1) ? -v : v);
        }
    }
}

static void unit_iq3_xxs(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + (u / 8) * 98;
    int ib = (int)(u % 8);
    const uint8_t *ssp = b + 66 + 4 * ib;
    uint32_t a = (uint32_t)ssp[0] | ((uint32_t)ssp[1] << 8) | ((uint32_t)ssp[2] << 16) |
                 ((uint32_t)ssp[3] << 24);
    o->W = st_w_iq3_xxs(rd_f16(b), (int)(a >> 28));
    const uint8_t *qs = b + 2 + 8 * ib;
    for (int l = 0; l < 4; l++) {
        uint8_t signs = st_ksigns_iq2xs[(a >> (7 * l)) & 127];
        uint32_t g1 = st_iq3xxs_grid[qs[2 * l]], g2 = st_iq3xxs_grid[qs[2 * l + 1]];
        for (int j = 0; j < 8; j++) {
            uint32_t g = j < 4 ? g1 : g2;
            int v = (int)((g >> (8 * (j & 3))) & 0xff);
            o->w[8 * l + j] = (int16_t)(((signs >> j) & 1) ? -v : v);
        }
    }
}

static void unit_iq2_s(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + (u / 8) * 82;
    int ib = (int)(u % 8);
    o->W = st_w_iq2_s(rd_f16(b));
    uint8_t sc = b[74 + ib];
    uint8_t qh = b[66 + ib];
    for (int l = 0; l < 4; l++) {
        int f = 2 * ((l < 2) ? (sc & 15) : (sc >> 4)) + 1;
        uint64_t g = st_iq2s_grid[b[2 + 4 * ib + l] | (((qh >> (2 * l)) & 3) << 8)];
        uint8_t signs = b[34 + 4 * ib + l];
        for (int j = 0; j < 8; j++) {
            int v = (int)((g >> (8 * j)) & 0xff) * f;
            o->w[8 * l + j] = (int16_t)(((signs >> j) & 1) ? -v : v);
        }
    }
}

static void unit_q4_k(const uint8_t *row, int64_t u, st_unit *o)
{
    const uint8_t *b = row + (u / 8) * 144;
    int j = (int)(u % 8);
    const uint8_t *S = b + 4;
    int sc, m;
    if (j < 4) {
        sc = S[j] & 63;
        m = S[j + 4] & 63;
    } else {
        sc = (S[j + 4] & 15) | ((S[j - 4] >> 6) << 4);
        m = (S[j + 4] >> 4) | ((S[j] >> 6) << 4);
    }
    o->W = st_w_q4_k(rd_f16(b), sc);
    o->M = st_m_q4_k(rd_f16(b + 2), m);
    o->has_min = true;
    const uint8_t *q = b + 16 + 32 * (j / 2);
    int shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) o->w[l] = (int16_t)((q[l] >> shift) & 15);
}

void st_unit_decode(st_qtype t, const uint8_t *row, int64_t u, st_unit *out)
{
    out->M = 0.0f;
    out->has_min = false;
    switch (t) {
    case ST_Q8_0: unit_q8_0(row, u, out); break;
    case ST_IQ4_NL: unit_iq4_nl(row, u, out); break;
    case ST_IQ4_XS: unit_iq4_xs(row, u, out); break;
    case ST_IQ3_S: unit_iq3_s(row, u, out); break;
    case ST_IQ3_XXS: unit_iq3_xxs(row, u, out); break;
    case ST_IQ2_S: unit_iq2_s(row, u, out); break;
    case ST_Q4_K: unit_q4_k(row, u, out); break;
    default: memset(out, 0, sizeof *out); break;
    }
}
