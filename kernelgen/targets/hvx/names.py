"""The HVX helper functions the stripe kernel calls, named in one place: kernels.py writes the calls and the
templates (conv2d_uint8.c.j2, conv2d_float32.c.j2) declare the functions, both through these (`helpers` in the templates' context)."""
from __future__ import annotations


class HelperNames:
    """One helper per stripe step; `op` is 1-based (conv2d #op), pixel sums of op 0 are the chain's input's."""

    @staticmethod
    def input_read() -> str:
        return "kg_input_read"

    @staticmethod
    def write_back() -> str:
        return "kg_write_back"

    @staticmethod
    def pixel_sums(op: int) -> str:
        return f"kg_pixel_sums_{op}"

    @staticmethod
    def filter_read(op: int, qf32: bool = False) -> str:
        return f"kg_filter_read_{op}{'_qf32' if qf32 else ''}"

    @staticmethod
    def conv(op: int, qf32: bool = False) -> str:
        return f"kg_conv_{op}{'_qf32' if qf32 else ''}"


NAMES = HelperNames()
