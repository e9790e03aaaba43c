"""What an op kind is: one record per kind (conv2d.py, pools.py, mul.py) with everything the pipeline asks of it,
so a new kind is one module and one line in ops/__init__.py's OPS table: its config key and the schema of its
block, the meaning check that turns the block into the chain's op (config.Conv2d's fields), its window and output
shape, its useful FLOPs and filter, and its numpy references (float with an error bound, and uint8 where it has a
uint8 form). The chain's op itself stays one frozen record (config.Conv2d) whose `kind` names its entry here; the
epilogue after it (bias, residual, activation) is the same for every kind (`epilogue` below)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Protocol

import numpy as np

from .statements import evaluate

Shape = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """The sliding window an op's output pixel reads (a mul: one pixel): the planner's halo and stripe math."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)

    @property
    def span(self) -> tuple[int, int]:
        """Input rows and columns one output pixel reads: (k - 1) * dilation + 1."""
        return ((self.kernel[0] - 1) * self.dilation[0] + 1, (self.kernel[1] - 1) * self.dilation[1] + 1)

    def out_size(self, height: int, width: int) -> tuple[int, int]:
        """The output's rows and columns over an input of `height` x `width` (padded as `pad` says)."""
        (kh, kw), (sh, sw), (top, left, bottom, right) = self.span, self.stride, self.pad
        return (height + top + bottom - kh) // sh + 1, (width + left + right - kw) // sw + 1


class Checker(Protocol):
    """The config's checker as an op's check uses it (config/__init__.py's _Checker): it reports problems at a
    key path and checks what every op shares (pairs, windows, layouts, the epilogue keys)."""

    model: Any  # the validated ConfigModel
    sides: tuple  # the config's side inputs (config.SideInput)

    def problem(self, keys: tuple, message: str) -> None: ...
    def positive(self, keys: tuple, value: Any, what: str, minimum: int = 1) -> tuple[int, ...]: ...
    def pair(self, keys: tuple, value: Any, what: str) -> tuple[int, int]: ...
    def fits(self, keys: tuple, shape: tuple[int, ...], what: str) -> bool: ...
    def window(self, keys: tuple, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
               pad_spec: Any, in_shape: Shape) -> tuple[tuple[int, int, int, int], tuple[int, int]] | None: ...
    def output_layout(self, keys: tuple, spec: Any, last: bool, input_layout: Any, out_shape: Shape) -> Any: ...


@dataclass(frozen=True, slots=True)
class Requantizers:
    """The uint8 reference's requantizing steps (reference_quant.py, on quant.py's records), handed to a kind's
    uint8 reference: the kinds sit below the config and its quantization."""

    requantize: Callable[..., np.ndarray]  # (acc, requants, zero_point): the fixed-point form
    requantize_op: Callable[..., np.ndarray]  # (acc, op quant, zero_point, q_min, q_max): the config's form
    quantized_add: Callable[..., np.ndarray]  # (a, b, add, zero_point, q_min, q_max): a residual add of bytes


@dataclass(frozen=True, slots=True)
class OpKind:
    """The base of every kind. `KEY`: its config key (`- maxpool: {...}`); `KIND`: what the chain's op calls it
    (config.Conv2d.kind: a global average pool is an average pool over the whole image); `MODEL`: the schema of
    its block; `DOC`: the schema's description of the key and `FORM` how the `ops` list shows it; `FILTER`: it
    reads a filter (and may add a bias); `FLOPS_PER_TAP`: 2 for a multiply-add, 1 for a max or an add; `UINT8`:
    a config with dtype uint8 may use it."""

    KEY: ClassVar[str] = ""
    KIND: ClassVar[str] = ""  # (default: KEY)
    MODEL: ClassVar[type]
    DOC: ClassVar[str] = ""
    FORM: ClassVar[str] = "{...}"
    FILTER: ClassVar[bool] = False
    FLOPS_PER_TAP: ClassVar[int] = 1
    UINT8: ClassVar[bool] = True
    # the planner's window: positions outside the input skipped (a max: padding is never the maximum), else read
    # as the zeros the caches hold there; what a window of padding alone would lack (the check's message); a pool's
    # step per tap on acc[ki] and the value x (C, and its summary)
    SKIPS_PADDING: ClassVar[bool] = False
    OF_PADDING_ALONE: ClassVar[str] = "value"
    TAP: ClassVar[tuple[str, str]] = ("", "")
    # what every target's window does, read from here rather than from the kind's name: the operation that folds
    # a tap's x into the accumulator (statements.py's kinds, which each dialect spells: "add", "max"; a mul's one
    # tap is added, then times its side input), the accumulators' start (the value, and how reports name it: a max
    # starts below every float32 a window holds), whether the sum is divided by the window's count (a mean), and
    # whether its output bytes are input bytes (uint8: the input's quantization kept, no requantization)
    STEP: ClassVar[str] = "add"
    ACC_INIT: ClassVar[tuple[float, str]] = (0.0, "0")
    MEAN: ClassVar[bool] = False
    KEEPS_QUANT: ClassVar[bool] = False

    def __init_subclass__(cls) -> None:  # (no super(): slots=True makes the class anew)
        if "KIND" not in cls.__dict__:
            cls.KIND = cls.KEY

    def check(self, checker: Checker, keys: tuple, model: Any, last: bool, input_layout: Any, in_shape: Shape
              ) -> dict[str, Any] | None:
        """The chain op's fields (config.Conv2d's keywords) from its checked block, or None after reporting a
        problem through `checker` at `keys` (("ops", index, KEY))."""
        raise NotImplementedError(type(self))

    @staticmethod
    def window(op: Any) -> Window:
        """Its window, as the check fixed it on the chain's op."""
        return Window(kernel=op.kernel, stride=op.stride, pad=op.pad, dilation=op.dilation)

    def out_shape(self, op: Any, in_shape: Shape) -> Shape:
        n, height, width, _ = in_shape
        return (n, *self.window(op).out_size(height, width), op.out_channels)

    @staticmethod
    def taps(op: Any, in_channels: int) -> int:
        """Input values one output value reads: a group's channels times the window's positions."""
        return in_channels // op.groups * op.kernel[0] * op.kernel[1]

    def flops(self, op: Any, in_shape: Shape, out_shape: Shape) -> int:
        """Useful FLOPs: every output value's taps, each one multiply-add (2) or one max or add (1)."""
        return math.prod(out_shape) * self.taps(op, in_shape[3]) * self.FLOPS_PER_TAP

    def filter_reads(self, op: Any, in_channels: int) -> int:
        """Filter and bias values one output channel reads (the filter traffic per channel of a stripe)."""
        return self.taps(op, in_channels) + (1 if op.bias else 0) if self.FILTER else 0

    def filter_shape(self, op: Any, in_shape: Shape) -> tuple[int, int, int, int] | None:
        """Its filter's logical OIHW shape; None: it reads none."""
        return (op.out_channels, in_shape[3] // op.groups, *op.kernel) if self.FILTER else None

    def reference(self, x: np.ndarray, w: np.ndarray | None, op: Any, sides: Mapping[str, np.ndarray] | None
                  ) -> np.ndarray:
        """The op before its epilogue, in float64 in NHWC."""
        raise NotImplementedError(type(self))

    def error_bound(self, op: Any, w: np.ndarray | None, b: np.ndarray | None, values: list[np.ndarray],
                    errors: list[np.ndarray], unit_roundoff: float, underflow: float,
                    sides: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        """(reference, bound) on values[-1] (its input, whose stored value errs by at most errors[-1]) with its
        epilogue, before the store: |kernel - reference| <= bound elementwise (reference.op_error_bound adds the
        store's rounding and says more)."""
        raise NotImplementedError(type(self))

    def reference_uint8(self, op: Any, sources: list[np.ndarray], j: int, w: np.ndarray | None,
                        b: np.ndarray | None, oq: Any, sides: Mapping[str, np.ndarray] | None, rq: Requantizers
                        ) -> np.ndarray:
        """Op j (0-based) of a uint8 chain on sources[j], bit-exact (oq: its quant.OpQuant)."""
        raise NotImplementedError(type(self))


def residual_of(op: Any, sources: list[np.ndarray], sides: Mapping[str, np.ndarray] | None) -> np.ndarray:
    """What op.residual names: sources[0] the chain's input, sources[K] op K's output, or a side input by name."""
    return sides[op.residual] if isinstance(op.residual, str) else sources[op.residual]


def epilogue(value: np.ndarray, op: Any, bias: np.ndarray | None, sources: list[np.ndarray] | None = None,
             sides: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """op + bias + residual, then the activation (ResNet's and MobileNetV2's order): the op's epilogue statements
    (op.epilogue, the records every kernel renders its store from) in float64, on the float32 literals the kernels
    hold (0.1 -> 0.100000001...). sources[0] is the chain's input, sources[K] op K's output, sides the side inputs
    by name: op.residual names the one added."""
    loads = {"bias": bias} if op.bias else {}
    if op.residual is not None:
        loads["residual"] = residual_of(op, sources, sides)
    return evaluate(op.epilogue.statements, value, np.float64, loads)
