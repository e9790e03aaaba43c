"""The c micro-kernel's speed by tile shape, for `schedule: auto` (planner/tile_speed.py reads it). Its shape rules
are microkernel.py's and tiles.py's: the numbers come from there, the load cost from a measurement here."""
from __future__ import annotations

from ...roofs import TileSpeed
from .microkernel import ACCUMULATORS, HALF, LANES

# FMA issue slots one load of the tile's inner loop costs, fitted to ResNet18's layer1.0 pair (2 x 3x3 64->64 on
# 56x56, rows_outer, h_split 7, h_block 2; /tmp/tiles48/exp, `kernelgen bench --target c --repeat 5`, warm CPU time
# against the FMA probe's rate, loaded 2-core AVX-512 host): k_block 8 / 16 / 32 at full width ran at 0.38 / 0.50 /
# 0.47 of the peak (useful FLOPs), k_block 8 / 16 at w_split 1 (stripes of 8 columns) 0.40 / 0.50, at w_split 2
# 0.37 / 0.51. Executed FLOPs x the tile tails' idle pixels x (1 + LOAD_SLOTS x loads per FMA) gives those times
# with LOAD_SLOTS 0.92 to 1.25 (1.0 +- 6% but one); the 1 also carries what is not the tile (the caches' reads, the
# stores, the epilogue). 28 stripes ran as fast as 4 there: no per-stripe charge.
LOAD_SLOTS = 1.0

C_TILE_SPEED = TileSpeed(lanes=LANES, half_lanes=HALF, accumulators=ACCUMULATORS, wide_vectors=2, load_slots=LOAD_SLOTS,
                         source="c micro-kernel (targets/c/tile_speed.py)")
