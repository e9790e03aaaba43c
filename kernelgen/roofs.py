"""A device's compute and bandwidth roofs: what the importer's fusion estimate (onnx/fusion.py) divides by."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Roofs:
    flops_per_second: float  # float32 arithmetic
    bytes_per_second: float  # to and from main memory
    source: str  # where the numbers come from
    int8_ops_per_second: float | None = None  # uint8 x int8 multiply-adds, 2 ops each (None: as float)

    def ops_per_second(self, dtype: str) -> float:
        return self.int8_ops_per_second if dtype == "uint8" and self.int8_ops_per_second else self.flops_per_second
