"""What `bench --sweep` tries for the opencl target: tile x work-group permutations of the config's variant
and kind of filter loads (the core's sweep runs and ranks them)."""
from __future__ import annotations

from ...config import Config, with_options
from .options import NAME, opencl_options
from .plan import variant_of

# Sweeps: tile [oh, ow, oc4] x work-group size, per kind of filter load. Vector tiles hold 2-4
# float16 accumulators per pixel (an AVX-512 core has 32 x 16-float registers); with activations
# in images, wider channel blocks spare PoCL's slow texel reads; filter texels cap every tile.
SWEEP_TILES = {"vectors": ((1, 4, 8), (1, 4, 16), (2, 4, 8), (1, 8, 8), (2, 2, 16), (1, 2, 16)),
               "vectors+images": ((1, 4, 16), (2, 2, 16), (2, 2, 32), (1, 1, 64)),
               "texels": ((1, 4, 2), (2, 2, 4), (2, 4, 2), (4, 4, 1))}
SWEEP_LOCAL = ((8, 1, 1), (16, 1, 1), (4, 2, 1))


def sweep_variants(config: Config) -> list[tuple[str, Config]]:
    """Tiles x work-group sizes for the config's variant and kind of filter loads (bench --sweep)."""
    variant, kind = variant_of(config)
    return [(f"tile={list(tile)} local={list(local)}",
             with_options(config, NAME, opencl_options(config).model_copy(
                 update={"tile": list(tile), "local_size": list(local), "variant": variant})))
            for tile in SWEEP_TILES[kind] for local in SWEEP_LOCAL]
