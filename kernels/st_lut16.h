/* The 16-entry int8 table lookup of 8 four-bit indices (the 8 nibbles of
 * Q) in a table held in four registers TAB[0..3] (entry i = byte i%4 of
 * TAB[i/4]): LO gets the entries of the low nibbles of Q's bytes 0..3, HI
 * those of the high nibbles. Byte permutes only, no memory. Written once on
 * the project's permute primitives, which st_gpu.h maps to the vendor's
 * instruction and st_gpu_emu.h emulates for the host test:
 *   st_perm_nib(x, y, s):      result byte i = byte ((s >> 4i) & 7) of {y:x}
 *                              (CUDA prmt: nibble selectors)
 *   st_perm_byte(s0, s1, sel): result byte i = byte ((sel >> 8i) & 7) of {s0:s1}
 *                              (AMD v_perm_b32: byte selectors)             */
#ifndef ST_LUT16_H
#define ST_LUT16_H

#ifdef ST_HAVE_PERM_NIB
ST_DEV void st_lut16_nib(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
    /* the 8 nibbles of q are 8 selectors; bit 3 picks entries 8..15 */
    const uint32_t sel = 0x32103210u | ((q & 0x88888888u) >> 1);
    const uint32_t t0 = st_perm_nib(st_perm_nib(tab[0], tab[1], q), st_perm_nib(tab[2], tab[3], q), sel);
    const uint32_t t1 =
        st_perm_nib(st_perm_nib(tab[0], tab[1], q >> 16), st_perm_nib(tab[2], tab[3], q >> 16), sel >> 16);
    lo = st_perm_nib(t0, t1, 0x6420);
    hi = st_perm_nib(t0, t1, 0x7531);
}

/* Byte zips: bytes [x0, y0, x1, y1] (HALF 0) or [x2, y2, x3, y3] (HALF 1),
 * e.g. two 9-bit grid indices (low byte, high bit) as 16-bit halves. */
ST_DEV uint32_t st_zip_bytes_nib(uint32_t x, uint32_t y, int half) { return st_perm_nib(x, y, half ? 0x7362u : 0x5140u); }
#endif

#ifdef ST_HAVE_PERM_BYTE
ST_DEV uint32_t st_zip_bytes_byte(uint32_t x, uint32_t y, int half)
{
    return st_perm_byte(y, x, half ? 0x07030602u : 0x05010400u);
}

ST_DEV void st_lut16_byte(uint32_t q, const uint32_t tab[4], uint32_t &lo, uint32_t &hi)
{
    const uint32_t qe = q & 0x0f0f0f0fu, qo = (q >> 4) & 0x0f0f0f0fu;
    const uint32_t le = st_perm_byte(tab[1], tab[0], qe & 0x07070707u);
    const uint32_t he = st_perm_byte(tab[3], tab[2], qe & 0x07070707u);
    const uint32_t lo_ = st_perm_byte(tab[1], tab[0], qo & 0x07070707u);
    const uint32_t ho = st_perm_byte(tab[3], tab[2], qo & 0x07070707u);
    lo = st_perm_byte(he, le, 0x03020100u | ((qe & 0x08080808u) >> 1));
    hi = st_perm_byte(ho, lo_, 0x03020100u | ((qo & 0x08080808u) >> 1));
}
#endif

#endif
