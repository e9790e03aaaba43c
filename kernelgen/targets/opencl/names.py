"""The names the opencl kernels declare, in one place: the Python that writes addresses, guards and stores and
the template that declares and uses the variables both spell them through these (conv.cl.j2 reads them as
`b.names`), so a rename cannot leave one side behind."""
from __future__ import annotations


class KernelNames:
    """One work-item's variables: pixel p of its tile, accumulator vector v, filter lane l, axis h or w."""

    @staticmethod
    def accumulator(pixel: int, vector: int) -> str:
        return f"acc{pixel}_{vector}"

    @staticmethod
    def raw_index(axis: str, i: int) -> str:
        """Row (h) or column (w) i of the tile's input window before clamping into the tensor."""
        return f"r{axis}{i}"

    @staticmethod
    def index(axis: str, i: int) -> str:
        """The same, clamped into the tensor (where it can fall in the padding)."""
        return f"i{axis}{i}"

    @staticmethod
    def mask(pixel: int) -> str:
        """Whether pixel p's input lies inside the tensor (its loads read zero otherwise)."""
        return f"m{pixel}"

    @staticmethod
    def input_base(pixel: int) -> str:
        return f"xb{pixel}"

    @staticmethod
    def input_vector(pixel: int) -> str:
        return f"x{pixel}"

    @staticmethod
    def filter_vector(lane: int, vector: int) -> str:
        return f"w{lane}_{vector}"

    @staticmethod
    def group_filter_vector(vector: int) -> str:
        return f"w_{vector}"

    @staticmethod
    def output_base(pixel: int) -> str:
        return f"ob{pixel}"

    @staticmethod
    def bias_vector(vector: int) -> str:
        return f"bias_{vector}"


NAMES = KernelNames()
