"""A uint8 global average pool in vectors: each row of the window summed 4 pixels (one 128-byte vector) at a time
in halfwords, the rows in words, and onnxruntime's float32 rounding of the sum done in integers (FloatSplit, as the
convs do) when the scale allows it, else the scalar requantization of the 32 sums."""
from __future__ import annotations

from dataclasses import dataclass

from ...quant_float import FloatRequant
from .requantizer import FloatSplit

# A row's halfword lane takes two bytes per vector: 128 vectors (512 columns) stay below 2^16.
MAX_ROW_VECTORS = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class VectorAvg:
    whole_columns: int  # columns of the row read as whole 4-pixel vectors
    tail: int  # the row's last 1..3 columns, a vector with its other lanes zeroed (0: none)
    split: FloatSplit | None  # the float32 rounding in integers; None: the scalar requantization

    @property
    def row_vectors(self) -> int:
        return self.whole_columns // 4 + (1 if self.tail else 0)

    @classmethod
    def of(cls, columns: int, floats: tuple[FloatRequant, ...]) -> "VectorAvg | None":
        """A pool whose window rows are `columns` wide; None when a row's sums could overflow a halfword."""
        if -(-columns // 4) > MAX_ROW_VECTORS:
            return None
        split = FloatSplit.of(floats[:1]) if floats else None
        return cls(whole_columns=columns - columns % 4, tail=columns % 4,
                   split=split if isinstance(split, FloatSplit) else None)
