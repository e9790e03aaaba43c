/* divide.c: integer division by run-time values, which clang turns into calls to the
 * __hexagon_{u,}{div,mod}{si,di}3 helpers that kg_libcalls.c provides.
 *
 * Usage: divide <pairs32.bin> <pairs64.bin> <out.bin>
 *   pairs32  uint32 [KG_N][2]: numerator, denominator (nonzero)
 *   pairs64  uint64 [KG_N][2]: numerator, denominator (nonzero)
 *   out      uint32 [KG_N][4] then uint64 [KG_N][4]: the pairs divided and reduced as
 *            unsigned, then as signed (two's complement) numbers: q, r, q, r
 */
#include "kg_runtime.h"

static uint32_t pairs32[KG_N][2];
static uint64_t pairs64[KG_N][2];
static struct {
    uint32_t r32[KG_N][4];
    uint64_t r64[KG_N][4];
} out;

int main(int argc, char **argv)
{
    if (argc != 4) {
        kg_die("usage: divide pairs32.bin pairs64.bin out.bin", argc);
    }
    int rc = kg_read_file(argv[1], pairs32, sizeof pairs32);
    if (rc != 0) {
        kg_die("cannot read pairs32", rc);
    }
    rc = kg_read_file(argv[2], pairs64, sizeof pairs64);
    if (rc != 0) {
        kg_die("cannot read pairs64", rc);
    }
    for (int i = 0; i < KG_N; i++) {
        uint32_t a = pairs32[i][0], b = pairs32[i][1];
        out.r32[i][0] = a / b;
        out.r32[i][1] = a % b;
        out.r32[i][2] = (uint32_t)((int32_t)a / (int32_t)b);
        out.r32[i][3] = (uint32_t)((int32_t)a % (int32_t)b);
        uint64_t c = pairs64[i][0], d = pairs64[i][1];
        out.r64[i][0] = c / d;
        out.r64[i][1] = c % d;
        out.r64[i][2] = (uint64_t)((int64_t)c / (int64_t)d);
        out.r64[i][3] = (uint64_t)((int64_t)c % (int64_t)d);
    }
    rc = kg_write_file(argv[3], &out, sizeof out);
    if (rc != 0) {
        kg_die("cannot write output", rc);
    }
    return 0;
}
