"""The c micro-kernel's speed by tile shape, for `schedule: auto` (planner/tile_speed.py reads it). Its shape rules
are microkernel.py's and tiles.py's: the numbers come from there, the load cost from a measurement here."""
from __future__ import annotations

from ...roofs import TileSpeed
from .microkernel import ACCUMULATORS, HALF, IN_PLACE_FILTER, LANES, WIDE, WIDE_ACCUMULATORS

# Fitted to ResNet18's layer1.0 pair (2 x 3x3 64->64 on 56x56, rows_outer; /tmp/tiles48/exp, `kernelgen bench
# --target c --repeat 7`, the least warm CPU time of 2-3 interleaved runs on the loaded 2-core AVX-512 host):
#   k_block 32, 12-row stripes, full width (6 x 2 tiles)            7.18 ms
#   k_block 16, 14-row stripes, full width (6 x 2)                  7.24
#   k_block 16, 12-row stripes, full width (6 x 2)                  7.49
#   k_block 32, 20-row stripes of 32 columns (6 x 2, 29% computed past the edges)     9.02
#   k_block 32, full height, stripes of 8 columns (5 x 2 and 4 x 2)                    9.51
#   k_block 8, 14-row stripes of 8 columns (10 x 1 and 8 x 1)      10.87
# Time = computed FLOPs (executed, plus the pixels the tiles compute past a stripe's edges) x (1 + LOAD_SLOTS x
# loads per FMA) x (1 + ROW_PIXELS / the stripe row's pixels) gives all six within 5% (the 1 also carries what is
# not the tile: the caches' reads, the epilogue). The loads alone (ROW_PIXELS 0) left the 8-column stripes 22% slower
# than predicted and full width 12% faster. The last op's rows past the output (a last row stripe's tail) were
# counted as computed in that fit; the loop nest skips them (a guard), and planner/tile_speed.py no longer counts
# them: the 12- and 20-row cases now estimate 4-7% less, and the pair takes the 12-row stripes, the least measured
# here (8-row ones before: 7.95 ms).
LOAD_SLOTS = 0.45
ROW_PIXELS = 3.5
# A kernel call's cost besides its tiles and traffic (`kernelgen import` adds it per group): the least kernel of
# MobileNetV3-small's network, an SE block's pool and two 1x1 convs on 1x1 (28 kFLOP, 30 KB), ran in 15-16 us.
CALL_SECONDS = 10e-6

# An NCHW tensor read into (or written back from) channels-innermost caches in 8 x 8 transposed blocks: ResNet18's
# maxpool read 4.97 MB of 56x56 NCHW planes in 0.43 ms of its 0.58 (C harness, loaded host), 11.6 GB/s against the
# roofs' 22.9, so 0.21 ms more than its traffic; in this model's units (its compute estimates run 1.42x the measured
# time: conv1 2760 us against 1.94 ms) 7 FLOPs at the peak a byte. The budget search weighs it: a 1x1 stride-2
# downsample on NCHW input (ResNet18's layer3_0) took 1 channel stripe instead of 3, 0.31 -> 0.14 ms.
TRANSPOSE_FLOPS_PER_BYTE = 7.0

# A dense tile reads an OHWI16o filter in place where the channel stripes are whole 16-channel blocks of it (tiles.py
# _block_stride); elsewhere each stripe copies its block into the filter cache, element by element (a select per
# element for the channels past the tensor). MobileNetV2's 1x1 24->144 on 56x56 at k_block 32 (144 channels reach 159):
# the copy took 15% of its 0.232 ms (perf, this host), 1.3 ns an element, where the model's estimates run 2.2x this
# host's measured times (the same op at k_block 16, read in place: 378 us estimated, 0.174 ms measured): 300 FLOPs at
# the roofs' peak an element.
FILTER_COPY_FLOPS = 300.0

C_TILE_SPEED = TileSpeed(lanes=LANES, half_lanes=HALF, accumulators=ACCUMULATORS, wide_vectors=2, load_slots=LOAD_SLOTS,
                         row_pixels=ROW_PIXELS, call_seconds=CALL_SECONDS,
                         transpose_flops_per_byte=TRANSPOSE_FLOPS_PER_BYTE, double_lanes=WIDE,
                         double_accumulators=WIDE_ACCUMULATORS, in_place_filter=IN_PLACE_FILTER,
                         filter_copy_flops=FILTER_COPY_FLOPS,
                         source="c micro-kernel (targets/c/tile_speed.py)")
