"""A device's compute and bandwidth roofs: what the importer's fusion estimate (onnx/fusion.py) divides by."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Roofs:
    flops_per_second: float
    bytes_per_second: float  # to and from main memory
    source: str  # where the numbers come from
