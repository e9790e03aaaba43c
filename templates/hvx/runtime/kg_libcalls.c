/* kg_libcalls.c: the library functions clang-19 emits calls to on Hexagon, which
 * compiler-rt and libc would otherwise provide (Debian ships neither for Hexagon).
 *
 * - memcpy/memset/memmove: emitted for struct copies and zero-initialised arrays;
 *   __hexagon_memcpy_likely_aligned_min32bytes_mult8bytes for large aligned copies.
 * - __hexagon_{u,}{div,mod}{si,di}3: Hexagon has no divide instruction, so every
 *   division by a non-constant integer becomes one of these calls.
 *
 * All are weak so that a program may bring its own. no_builtin stops clang from
 * recognising the loops below as memcpy/memset and calling the function itself.
 * - nearbyintf: a network's QuantizeLinear rounds with it (templates/hvx/network.c.j2).
 * - __hexagon_muldf3: double multiply, which v66 has no instruction for (v67 and later do);
 *   a network program's timer and printf multiply doubles.
 * Not provided (a link error names them): double division (__hexagon_divdf3) and
 * other math functions such as sqrtf. Single-precision division is inlined by clang.
 */
#include <stddef.h>
#include <stdint.h>

#define KG_LIBCALL __attribute__((weak, no_builtin))

KG_LIBCALL void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++) {
        d[i] = s[i];
    }
    return dst;
}

KG_LIBCALL void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *restrict dst,
                                                                      const void *restrict src,
                                                                      size_t n)
{
    /* The name promises 8-byte alignment and a multiple of 8 bytes, at least 32. */
    uint64_t *d = dst;
    const uint64_t *s = src;
    for (size_t i = 0; i < n / 8u; i++) {
        d[i] = s[i];
    }
    return dst;
}

KG_LIBCALL void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++) {
        d[i] = (unsigned char)c;
    }
    return dst;
}

/* a * b in double, rounded to nearest even; subnormal operands and results are taken as zero
 * (no timer or printf multiplies such values). */
KG_LIBCALL double __hexagon_muldf3(double a, double b)
{
    union { double d; uint64_t u; } x = {a}, y = {b}, r;
    const uint64_t sign = (x.u ^ y.u) & (1ull << 63), fraction = (1ull << 52) - 1;
    const int ex = (int)(x.u >> 52) & 0x7ff, ey = (int)(y.u >> 52) & 0x7ff;
    if (ex == 0x7ff || ey == 0x7ff) { /* NaN stays NaN; infinity times zero is NaN; else infinity */
        const int nan = (ex == 0x7ff && (x.u & fraction)) || (ey == 0x7ff && (y.u & fraction)) ||
                        (ex == 0 && ey == 0x7ff) || (ey == 0 && ex == 0x7ff);
        r.u = nan ? 0x7ff8000000000000ull : sign | 0x7ff0000000000000ull;
        return r.d;
    }
    if (ex == 0 || ey == 0) {
        r.u = sign;
        return r.d;
    }
    const uint64_t mx = (x.u & fraction) | (1ull << 52), my = (y.u & fraction) | (1ull << 52);
    /* the 106-bit product hi:lo from 32-bit halves */
    const uint64_t xl = mx & 0xffffffffu, xh = mx >> 32, yl = my & 0xffffffffu, yh = my >> 32;
    const uint64_t ll = xl * yl, lh = xl * yh, hl = xh * yl, hh = xh * yh;
    const uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32), lo = (mid << 32) | (ll & 0xffffffffu);
    int e = ex + ey - 1023;
    if (hi >> 41) { /* the product's leading one at bit 105, else at 104: move it there */
        e += 1;
    } else {
        hi = (hi << 1) | (lo >> 63);
        lo <<= 1;
    }
    uint64_t m = (hi << 11) | (lo >> 53); /* 53 bits, the leading one included */
    const uint64_t rest = lo << 11;
    if (rest > (1ull << 63) || (rest == (1ull << 63) && (m & 1))) {
        m += 1;
        if (m >> 53) {
            m >>= 1;
            e += 1;
        }
    }
    r.u = e >= 0x7ff ? sign | 0x7ff0000000000000ull : e <= 0 ? sign : sign | ((uint64_t)e << 52) | (m & fraction);
    return r.d;
}

/* x rounded to an integer in the current rounding mode (round half to even by default), as
 * C's nearbyintf: below 2^23 in magnitude, adding and subtracting 2^23 leaves no fraction
 * bits, so the addition rounds once; from 2^23 on (and NaN, infinities) x is an integer
 * already. The sign is kept apart so that -0.3 gives -0, as nearbyintf does. */
KG_LIBCALL float nearbyintf(float x)
{
    const float two23 = 8388608.0f;
    const float magnitude = __builtin_fabsf(x);
    if (!(magnitude < two23)) {
        return x;
    }
    const float sum = magnitude + two23; /* IEEE arithmetic: (m + 2^23) - 2^23 is not m, and no compiler may fold it */
    return __builtin_copysignf(sum - two23, x);
}

KG_LIBCALL void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d < s) {
        for (size_t i = 0; i < n; i++) {
            d[i] = s[i];
        }
    } else {
        for (size_t i = n; i > 0; i--) {
            d[i - 1] = s[i - 1];
        }
    }
    return dst;
}

/* Shift-and-subtract long division, starting at the numerator's leading one bit
 * (cl0 is one instruction). Division by zero is undefined in C; here it returns
 * all ones instead of trapping. */
static uint64_t kg_udivmod64(uint64_t num, uint64_t den, uint64_t *rem)
{
    if (den == 0) {
        *rem = num;
        return ~(uint64_t)0;
    }
    uint64_t quot = 0;
    uint64_t r = 0;
    int bit = num == 0 ? -1 : 63 - __builtin_clzll(num);
    for (; bit >= 0; bit--) {
        r = (r << 1) | ((num >> bit) & 1u);
        quot <<= 1;
        if (r >= den) {
            r -= den;
            quot |= 1u;
        }
    }
    *rem = r;
    return quot;
}

static uint32_t kg_udivmod32(uint32_t num, uint32_t den, uint32_t *rem)
{
    if (den == 0) {
        *rem = num;
        return ~(uint32_t)0;
    }
    uint32_t quot = 0;
    uint32_t r = 0;
    int bit = num == 0 ? -1 : 31 - __builtin_clz(num);
    for (; bit >= 0; bit--) {
        r = (r << 1) | ((num >> bit) & 1u);
        quot <<= 1;
        if (r >= den) {
            r -= den;
            quot |= 1u;
        }
    }
    *rem = r;
    return quot;
}

KG_LIBCALL uint32_t __hexagon_udivsi3(uint32_t a, uint32_t b)
{
    uint32_t r;
    return kg_udivmod32(a, b, &r);
}

KG_LIBCALL uint32_t __hexagon_umodsi3(uint32_t a, uint32_t b)
{
    uint32_t r;
    kg_udivmod32(a, b, &r);
    return r;
}

/* Signed forms truncate toward zero, as C requires: divide magnitudes, then give the
 * quotient the sign of a ^ b and the remainder the sign of a. */
KG_LIBCALL int32_t __hexagon_divsi3(int32_t a, int32_t b)
{
    uint32_t r;
    uint32_t ua = a < 0 ? 0u - (uint32_t)a : (uint32_t)a;
    uint32_t ub = b < 0 ? 0u - (uint32_t)b : (uint32_t)b;
    uint32_t q = kg_udivmod32(ua, ub, &r);
    return (int32_t)((a < 0) != (b < 0) ? 0u - q : q);
}

KG_LIBCALL int32_t __hexagon_modsi3(int32_t a, int32_t b)
{
    uint32_t r;
    uint32_t ua = a < 0 ? 0u - (uint32_t)a : (uint32_t)a;
    uint32_t ub = b < 0 ? 0u - (uint32_t)b : (uint32_t)b;
    kg_udivmod32(ua, ub, &r);
    return (int32_t)(a < 0 ? 0u - r : r);
}

KG_LIBCALL uint64_t __hexagon_udivdi3(uint64_t a, uint64_t b)
{
    uint64_t r;
    return kg_udivmod64(a, b, &r);
}

KG_LIBCALL uint64_t __hexagon_umoddi3(uint64_t a, uint64_t b)
{
    uint64_t r;
    kg_udivmod64(a, b, &r);
    return r;
}

KG_LIBCALL int64_t __hexagon_divdi3(int64_t a, int64_t b)
{
    uint64_t r;
    uint64_t ua = a < 0 ? 0u - (uint64_t)a : (uint64_t)a;
    uint64_t ub = b < 0 ? 0u - (uint64_t)b : (uint64_t)b;
    uint64_t q = kg_udivmod64(ua, ub, &r);
    return (int64_t)((a < 0) != (b < 0) ? 0u - q : q);
}

KG_LIBCALL int64_t __hexagon_moddi3(int64_t a, int64_t b)
{
    uint64_t r;
    uint64_t ua = a < 0 ? 0u - (uint64_t)a : (uint64_t)a;
    uint64_t ub = b < 0 ? 0u - (uint64_t)b : (uint64_t)b;
    kg_udivmod64(ua, ub, &r);
    return (int64_t)(a < 0 ? 0u - r : r);
}
