/* counters.c: QEMU's execution counters around known loops, for tests/test_hexagon_harness.py.
 *
 * Prints one kg_counters line per region: "empty" (two reads back to back), "hvx"
 * (KG_N vrmpy accumulations over vectors loaded from memory) and "scalar" (KG_N
 * volatile loads and adds, no HVX).
 */
#include "kg_runtime.h"

#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

/* Not static and volatile sinks: otherwise clang sees all-zero inputs and unused
 * results, and deletes the loops being measured. */
HVX_Vector data[KG_N];
volatile int32_t scalar_data[KG_N];
volatile HVX_Vector hvx_sink;
volatile int32_t scalar_sink;

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    kg_counters_t before = kg_read_counters();
    kg_counters_t after = kg_read_counters();
    kg_report_counters("empty", before, after);

    before = kg_read_counters();
    HVX_Vector acc = Q6_V_vzero();
    for (int i = 0; i < KG_N; i++) {
        acc = Q6_Vw_vrmpyacc_VwVubRb(acc, data[i], 0x01010101);
    }
    hvx_sink = acc;
    after = kg_read_counters();
    kg_report_counters("hvx", before, after);

    before = kg_read_counters();
    int32_t sum = 0;
    for (int i = 0; i < KG_N; i++) {
        sum += scalar_data[i];
    }
    scalar_sink = sum;
    after = kg_read_counters();
    kg_report_counters("scalar", before, after);
    return 0;
}
