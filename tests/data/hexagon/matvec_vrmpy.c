/* matvec_vrmpy.c: y = W a with HVX vrmpy, for tests/test_hexagon_harness.py.
 *
 * Usage: matvec_vrmpy <weights.bin> <activations.bin> <out.bin>
 *   weights      uint8, KG_O x KG_K packed 32o4i: [KG_O/32][KG_K/4][32][4], so each
 *                (output block, input group) is one 128-byte vector whose word j holds
 *                the 4 weights of output 32*ob + j for inputs 4*kb .. 4*kb+3
 *   activations  uint8 [KG_K]
 *   out          int32 [2][KG_O]: row 0 reads the activations as uint8 (vrmpy ub*ub),
 *                row 1 reads the same bytes as int8 (vrmpy ub*b)
 */
#include "kg_runtime.h"

#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

_Static_assert(KG_O % 32 == 0, "KG_O must be a multiple of 32 (words per vector)");
_Static_assert(KG_K % 4 == 0, "KG_K must be a multiple of 4 (bytes per vrmpy word)");
#define KG_OB (KG_O / 32)
#define KG_KB (KG_K / 4)

static HVX_Vector weights[KG_OB * KG_KB];
static uint32_t activations[KG_KB]; /* 4 bytes per word, as vrmpy's Rt wants them */
static HVX_Vector out[2 * KG_OB];

int main(int argc, char **argv)
{
    if (argc != 4) {
        kg_die("usage: matvec_vrmpy weights.bin activations.bin out.bin", argc);
    }
    int rc = kg_read_file(argv[1], weights, sizeof weights);
    if (rc != 0) {
        kg_die("cannot read weights", rc);
    }
    rc = kg_read_file(argv[2], activations, sizeof activations);
    if (rc != 0) {
        kg_die("cannot read activations", rc);
    }
    memset(out, 0xA5, sizeof out); /* sentinel: an unwritten output fails the comparison */

    for (int ob = 0; ob < KG_OB; ob++) {
        HVX_Vector acc_u = Q6_V_vzero();
        HVX_Vector acc_s = Q6_V_vzero();
        for (int kb = 0; kb < KG_KB; kb++) {
            HVX_Vector w = weights[ob * KG_KB + kb];
            acc_u = Q6_Vuw_vrmpyacc_VuwVubRub(acc_u, w, activations[kb]);
            acc_s = Q6_Vw_vrmpyacc_VwVubRb(acc_s, w, activations[kb]);
        }
        out[ob] = acc_u;
        out[KG_OB + ob] = acc_s;
    }

    rc = kg_write_file(argv[3], out, sizeof out);
    if (rc != 0) {
        kg_die("cannot write output", rc);
    }
    return 0;
}
