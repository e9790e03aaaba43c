"""What `bench --sweep` tries for the opencl target: tile x work-group permutations of the config's variant
and kind of filter loads (gpu/profiles.py's OpenCL spaces; the core's sweep runs and ranks them)."""
from __future__ import annotations

from ...config import Config
from ..gpu.api import OPENCL
from ..gpu.profiles import OPENCL_SWEEPS
from ..gpu.sweep import permutations
from .options import opencl_options
from .plan import variant_of


def sweep_variants(config: Config) -> list[tuple[str, Config]]:
    """Tiles x work-group sizes for the config's variant and kind of filter loads (bench --sweep)."""
    variant, kind = variant_of(config)
    return permutations(OPENCL, config, opencl_options(config), OPENCL_SWEEPS[kind], variant=variant)
