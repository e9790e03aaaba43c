"""What `bench --sweep` tries on a GPU target: every per-work-item tile x work-group size of a profile's sweep
space (profiles.py), each a key a resumed sweep matches and the config with those two options set (the core's
sweep runs and ranks them)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...config import Config, with_options
from .api import GpuApi
from .profiles import SweepSpace


def permutations(api: GpuApi, config: Config, options: BaseModel, space: SweepSpace,
                 **keep: Any) -> list[tuple[str, Config]]:
    """`keep`: further options every variant sets (opencl: the variant the config's own plan chose)."""
    (tile_key, tile_label), (size_key, size_label) = api.sweep_tile, api.sweep_size
    return [(f"{tile_label}={list(tile)} {size_label}={list(size)}",
             with_options(config, api.name, options.model_copy(update={tile_key: list(tile), size_key: list(size),
                                                                       **keep})))
            for tile in space.tiles for size in space.sizes]
