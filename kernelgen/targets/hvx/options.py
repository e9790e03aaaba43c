"""The `hvx:` block of a config, and the Hexagon facts its defaults come from."""
from __future__ import annotations

from typing import Literal, Union

from pydantic import Field

from ...config import Config, options_of
from ...config.model import Count, StrictModel
from ...roofs import Roofs

NAME = "hvx"

# VTCM budget assumed when the config gives no hvx.vtcm_bytes: typical sizes of each
# generation's parts (256 KiB before v68, then 4-8 MiB); set hvx.vtcm_bytes for a device.
VTCM_DEFAULT_BYTES = {"v66": 256 * 1024, "v67": 256 * 1024, "v68": 4 * 1024 * 1024, "v69": 8 * 1024 * 1024,
                      "v71": 8 * 1024 * 1024, "v73": 8 * 1024 * 1024}
# HVX floating point (qf32) exists from v68 on.
QF32_ARCHES = ("v68", "v69", "v71", "v73")


class HvxModel(StrictModel):
    """Options of the `hvx` target (issue: Hexagon HVX)."""

    arch: Literal["v66", "v67", "v68", "v69", "v71", "v73"] = Field(
        default="v73", description="one of: v66, v67, v68, v69, v71, v73")
    vtcm_bytes: Union[Count, None] = Field(
        default=None, description="a positive int: the VTCM budget in bytes (default depends on arch)")
    pixels: Union[Count, None] = Field(
        default=None, description="a positive multiple of 4: output pixels sharing each filter vector (default 8; "
                                  "4 for uint8 when every output width is 1-4 past a multiple of 8; a dense uint8 "
                                  "conv picks 4-8 from its row width unless this is set)")
    float_compute: Literal["scalar", "qf32"] = Field(
        default="scalar", description="'scalar' or 'qf32': which float32 kernel validate checks (qf32 needs "
                                      "v68+ and is compile-only under QEMU 7.2)")


def default_budget(options: HvxModel) -> tuple[int, str]:
    """`schedule: auto`: the VTCM of the configured arch (or hvx.vtcm_bytes), and where that came from."""
    budget = options.vtcm_bytes or VTCM_DEFAULT_BYTES[options.arch]
    return budget, f"hvx VTCM ({options.arch}{'' if options.vtcm_bytes else ' default'})"


def hvx_options(config: Config) -> HvxModel:
    return options_of(config, NAME)


# The importer's fusion estimate on hvx (onnx/fusion.py ranks groupings with it; only the balance of compute and
# bandwidth matters there, not the clock). uint8: 256 multiply-adds per packet, the vrmpy limit the dense uint8
# kernel is measured against (issue 30: 178-196 reached); float: one 32-lane qf32 multiply-add per packet; one
# packet per cycle at an assumed 1 GHz; main memory to VTCM at an assumed 10 GB/s. Estimates, not measurements:
# no device is here to measure them.
HVX_ROOFS = Roofs(flops_per_second=64e9, int8_ops_per_second=512e9, bytes_per_second=10e9,
                  source="hvx estimate: 256 uint8 MACs or 32 qf32 FMAs per packet at an assumed 1 GHz, an assumed "
                         "10 GB/s from DDR to VTCM")
