"""A one-time calibration of lavapipe's default invocation tiles on one host, kept in the user's cache.

lavapipe's defaults (gpu/profiles.py) were fitted on one CPU, and what a tile costs depends on the host: its
vector registers (16 with AVX2, 32 with AVX-512VL at the same 256-bit width), its L1d (the 1x1's multiply-add
region touches ~43 KiB of stack: it fits a 48 KiB L1d, not a 32 KiB one) and its FP pipes against the probe's
mul + add chains. benchmarks/lavapipe_calibrate.py times each kind of conv's candidate tiles against the FMA probe
here and stores the winners under the host's key (lavapipe_host.LavapipeHost.key: CPU model, driver, width,
flags); `load` reads them back for the same host only.

Generated code never reads this file by itself: `kernelgen build` emits the profile's defaults on every host (the
goldens stay the same everywhere). A calibration is applied by writing its tile into the config's `vulkan:`
block (the script prints it), so what is built is what the config says."""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .lavapipe_host import LavapipeHost
from .mesa_pin import cache_root

FORMAT = 1
# The kinds of conv whose default tiles differ (vulkan/defaults.py default_tile_for) and the tiles a calibration
# tries for each, the default on its workload first (the strided RGB conv's 32 channels shrink 4x16x8 to 4x16x4):
# for 1x1 and stride-1 convs the 32-pixel one-chunk tiles whose trips fit the L1i (profiles.LAVAPIPE_TRIP_CAP) and
# the unrolled 128-accumulator tile they replaced; for strided convs 4x16x4, its 64-accumulator half and 4x8x8.
CANDIDATES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "pointwise": ((1, 32, 4), (2, 16, 4), (4, 8, 16)),
    "square": ((1, 32, 4), (2, 16, 4), (8, 8, 8)),
    "strided": ((4, 16, 4), (8, 8, 4), (4, 8, 8)),
}


@dataclass(frozen=True, slots=True)
class Calibration:
    host: str  # LavapipeHost.describe() of the host it was measured on
    key: str  # LavapipeHost.key()
    tiles: dict[str, tuple[int, int, int]]  # kind of conv -> best [oh, ow, oc]
    ratios: dict[str, dict[str, float]]  # kind -> "oh,ow,oc" -> median ratio to the FMA probe


def cache_path(host: LavapipeHost) -> Path:
    digest = hashlib.sha256(host.key().encode()).hexdigest()[:16]
    return cache_root() / "lavapipe" / f"calibration-{digest}.json"


def load(host: LavapipeHost) -> Calibration | None:
    """This host's calibration, or None (none yet, another format, or a file for another host)."""
    try:
        data = json.loads(cache_path(host).read_text())
    except (OSError, ValueError):
        return None
    if data.get("format") != FORMAT or data.get("key") != host.key():
        return None
    return Calibration(host=data["host"], key=data["key"],
                       tiles={kind: tuple(tile) for kind, tile in data["tiles"].items()}, ratios=data["ratios"])


def store(calibration: Calibration, host: LavapipeHost) -> Path:
    """Write it atomically (temp file, rename) under the host's key."""
    path = cache_path(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "host": calibration.host, "key": calibration.key,
                       "tiles": {k: list(v) for k, v in calibration.tiles.items()}, "ratios": calibration.ratios},
                      indent=1, sort_keys=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        out.write(text + "\n")
    os.replace(out.name, path)
    return path


def best(ratios: dict[str, list[float]]) -> tuple[tuple[int, int, int], dict[str, float]]:
    """The tile ("oh,ow,oc") with the highest median ratio (ties: the earlier candidate, the profile's default
    first) and the medians by tile."""
    medians = {tile: statistics.median(values) for tile, values in ratios.items() if values}
    winner = max(medians, key=lambda tile: (medians[tile], -list(medians).index(tile)))
    return tuple(int(v) for v in winner.split(",")), medians
