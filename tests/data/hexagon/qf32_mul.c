/* qf32_mul.c: HVX floating point, v68 and later only. QEMU 7.2 cannot run it; the
 * harness tests only compile it and read the assembly. */
#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

HVX_Vector kg_mul_sf(HVX_Vector a, HVX_Vector b)
{
    return Q6_Vsf_equals_Vqf32(Q6_Vqf32_vmpy_VsfVsf(a, b));
}
