/* A host program of the example's own: packs a deterministic input and filters with the
   generated helpers, runs the generated kernel, unpacks and prints a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "example_conv.h"

/* Deterministic values in [-1, 1): a 32-bit LCG, so every machine prints the same checksum. */
static float next_value(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / 8388608.0f - 1.0f;
}

static float *filled(size_t count, uint32_t *state)
{
    float *values = malloc(count * sizeof *values);
    for (size_t i = 0; values && i < count; ++i)
        values[i] = next_value(state) * 0.25f;
    return values;
}

int main(void)
{
    uint32_t state = 12345u;
    float *input = filled(EXAMPLE_CONV_INPUT_LOGICAL_ELEMENTS, &state);
    float *filter1 = filled(EXAMPLE_CONV_FILTER1_LOGICAL_ELEMENTS, &state);
    float *filter2 = filled(EXAMPLE_CONV_FILTER2_LOGICAL_ELEMENTS, &state);
    float *packed_input = calloc(EXAMPLE_CONV_INPUT_ELEMENTS, sizeof(float));
    float *packed_filter1 = calloc(EXAMPLE_CONV_FILTER1_ELEMENTS, sizeof(float));
    float *packed_filter2 = calloc(EXAMPLE_CONV_FILTER2_ELEMENTS, sizeof(float));
    float *packed_output = calloc(EXAMPLE_CONV_OUTPUT_ELEMENTS, sizeof(float));
    float *output = calloc(EXAMPLE_CONV_OUTPUT_LOGICAL_ELEMENTS, sizeof(float));
    float *workspace = calloc(EXAMPLE_CONV_WORKSPACE_ELEMENTS, sizeof(float));
    if (!input || !filter1 || !filter2 || !packed_input || !packed_filter1 || !packed_filter2 || !packed_output ||
        !output || !workspace) {
        fputs("out of memory\n", stderr);
        return 1;
    }
    example_conv_pack_input(input, packed_input);
    example_conv_pack_filter1(filter1, packed_filter1);
    example_conv_pack_filter2(filter2, packed_filter2);
    example_conv(packed_input, packed_filter1, packed_filter2, packed_output, workspace);
    example_conv_unpack_output(packed_output, output);
    double sum = 0.0, abs_sum = 0.0;
    for (size_t i = 0; i < EXAMPLE_CONV_OUTPUT_LOGICAL_ELEMENTS; ++i) {
        sum += output[i];
        abs_sum += output[i] < 0 ? -output[i] : output[i];
    }
    printf("example_conv: %d outputs, sum %.4f, sum of |x| %.4f, output[0] %.6f\n",
           EXAMPLE_CONV_OUTPUT_LOGICAL_ELEMENTS, sum, abs_sum, output[0]);
    free(input); free(filter1); free(filter2); free(packed_input); free(packed_filter1); free(packed_filter2);
    free(packed_output); free(output); free(workspace);
    return 0;
}
