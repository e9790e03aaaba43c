"""The pools, ONNX's MaxPool, AveragePool and GlobalAveragePool: filterless ops whose output channel k is input
channel k's window. A max never takes a padded position (ONNX: padding is never the maximum); a mean divides by
the whole window (count_include_pad) or by its positions inside the input. A global average pool is an average
pool over the whole image (its chain op's kind is avgpool)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Union

import numpy as np
from pydantic import Field, StrictBool

from .activation import FLOAT32_MAX
from .fields import IntPair, LayoutSpec, OpQuantModel, PadSpec, PoolQuantModel, StrictModel, output_layout_field
from .op import Checker, OpKind, Requantizers, Shape


class MaxPoolModel(StrictModel):
    kernel: IntPair = Field(description="a positive int or [h, w]: the window")
    stride: IntPair = Field(default=1, description="a positive int or [h, w]")
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], 'same' or "
                                                "'valid'; padded positions are never the maximum (ONNX MaxPool)")
    output_layout: Union[LayoutSpec, None] = output_layout_field()


class AvgPoolModel(MaxPoolModel):
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], 'same' or "
                                                "'valid'")
    count_include_pad: StrictBool = Field(
        default=False, description="true or false: divide by the whole window (true) or by its positions inside "
                                   "the input (false, ONNX AveragePool's default)")
    quant: Union[PoolQuantModel, None] = Field(
        default=None, description="dtype uint8 (pad 0: every window whole): {output_scale: ..., output_zero_point: "
                                  "...} (onnxruntime's QLinearAveragePool: the byte sum requantized by s_in / "
                                  "(s_out * pixels))")


class GlobalAvgPoolModel(StrictModel):
    quant: Union[PoolQuantModel, None] = Field(
        default=None, description="dtype uint8: {output_scale: ..., output_zero_point: ...} (onnxruntime's "
                                  "QLinearGlobalAveragePool: the byte sum requantized by s_in / (s_out * pixels))")
    output_layout: Union[LayoutSpec, None] = output_layout_field()


def channelwise(op_kind: OpKind, checker: Checker, keys: tuple, model: Any, last: bool, input_layout: Any,
                in_shape: Shape, kernel: tuple[int, int], stride: tuple[int, int], pad_spec: Any,
                scale_by: str | None = None) -> dict[str, Any] | None:
    """A filterless op's fields (config.Conv2d's keywords): output channel k from input channel k's window (groups
    equal to the channels), or None after reporting a problem."""
    n, _, _, channels = in_shape
    fitted = checker.window(keys, kernel, stride, (1, 1), pad_spec, in_shape)
    if fitted is None:
        return None
    pad, (out_h, out_w) = fitted
    # ONNX: a pad as large as the window would make windows of padding alone (no maximum; a mean over nothing)
    if max(pad[0], pad[2]) >= kernel[0] or max(pad[1], pad[3]) >= kernel[1]:
        checker.problem((*keys, "pad"), f"expected pads smaller than the {kernel[0]}x{kernel[1]} window (a window "
                                        f"of padding alone has no {op_kind.OF_PADDING_ALONE}), got {list(pad)}")
        return None
    out_shape = (n, out_h, out_w, channels)
    output_layout = checker.output_layout(keys, model.output_layout, last, input_layout, out_shape)
    if output_layout is None:
        return None
    quant = getattr(model, "quant", None)
    if quant is not None and checker.model.dtype != "uint8":
        checker.problem((*keys, "quant"), f"expected a quant block only with dtype uint8, got {checker.model.dtype}")
        return None
    return dict(quant=None if quant is None else OpQuantModel(output_scale=quant.output_scale,
                                                              output_zero_point=quant.output_zero_point),
                out_channels=channels, kernel=kernel, stride=stride, pad=pad, dilation=(1, 1), filter_layout=None,
                output_layout=output_layout, groups=channels, kind=op_kind.KIND,
                count_include_pad=bool(getattr(model, "count_include_pad", False)), scale_by=scale_by)


def windows(x: np.ndarray, op: Any, fill: float) -> tuple[np.ndarray, np.ndarray]:
    """Every window of a pool as (taps, N, OH, OW, C) with padding at `fill`, and (OH, OW) counts of the positions
    inside the input."""
    top, left, bottom, right = op.pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    inside = np.pad(np.ones(x.shape[1:3]), ((top, bottom), (left, right)))
    (sh, sw), (kh, kw) = op.stride, op.kernel
    oh, ow = (xp.shape[1] - kh) // sh + 1, (xp.shape[2] - kw) // sw + 1
    taps = np.stack([xp[:, rh: rh + (oh - 1) * sh + 1: sh, rw: rw + (ow - 1) * sw + 1: sw, :]
                     for rh in range(kh) for rw in range(kw)])
    counts = sum(inside[rh: rh + (oh - 1) * sh + 1: sh, rw: rw + (ow - 1) * sw + 1: sw]
                 for rh in range(kh) for rw in range(kw))
    return taps, counts


@dataclass(frozen=True, slots=True)
class SlidingPool(OpKind):
    """A pool whose window the config gives (kernel, stride, pad)."""

    def check(self, checker: Checker, keys: tuple, model: Any, last: bool, input_layout: Any, in_shape: Shape
              ) -> dict[str, Any] | None:
        fields = type(model).model_fields
        kernel = checker.pair((*keys, "kernel"), model.kernel, fields["kernel"].description)
        stride = checker.pair((*keys, "stride"), model.stride, fields["stride"].description)
        return channelwise(self, checker, keys, model, last, input_layout, in_shape, kernel, stride, model.pad)


@dataclass(frozen=True, slots=True)
class MaxPoolOp(SlidingPool):
    """A max moves no value further than the largest error in its window; uint8 bytes keep their quantization."""

    KEY: ClassVar[str] = "maxpool"
    MODEL: ClassVar[type] = MaxPoolModel
    DOC: ClassVar[str] = "a max pool: {kernel: ..., stride: ..., pad: ...}"
    SKIPS_PADDING: ClassVar[bool] = True
    OF_PADDING_ALONE: ClassVar[str] = "maximum"
    TAP: ClassVar[tuple[str, str]] = ("acc[ki] = x > acc[ki] ? x : acc[ki];", "acc[ki] = max(acc[ki], x)")
    STEP: ClassVar[str] = "max"
    ACC_INIT: ClassVar[tuple[float, str]] = (-FLOAT32_MAX, "-FLT_MAX")
    KEEPS_QUANT: ClassVar[bool] = True

    def reference(self, x: np.ndarray, w: np.ndarray | None, op: Any, sides: Mapping[str, np.ndarray] | None
                  ) -> np.ndarray:
        return windows(x, op, -np.inf)[0].max(axis=0)

    def error_bound(self, op: Any, w: np.ndarray | None, b: np.ndarray | None, values: list[np.ndarray],
                    errors: list[np.ndarray], unit_roundoff: float, underflow: float,
                    sides: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        result = self.reference(values[-1], None, op, sides)
        return result, windows(errors[-1], op, 0.0)[0].max(axis=0)

    def reference_uint8(self, op: Any, sources: list[np.ndarray], j: int, w: np.ndarray | None,
                        b: np.ndarray | None, oq: Any, sides: Mapping[str, np.ndarray] | None, rq: Requantizers
                        ) -> np.ndarray:
        return self.reference(sources[j], None, op, sides).astype(np.uint8)


@dataclass(frozen=True, slots=True)
class AvgPoolOp(SlidingPool):
    """A mean of n values is a sum of n terms (gamma_n of their magnitudes, over n) and one division (a rounding of
    the result), plus the mean of the inputs' errors. uint8: every window whole (pad 0; onnxruntime's
    QLinearAveragePool and QLinearGlobalAveragePool): sum(a) - n * za, requantized."""

    KEY: ClassVar[str] = "avgpool"
    MODEL: ClassVar[type] = AvgPoolModel
    DOC: ClassVar[str] = "an average pool: {kernel: ..., stride: ..., pad: ..., count_include_pad: ...}"
    UINT8: ClassVar[bool] = True
    OF_PADDING_ALONE: ClassVar[str] = "mean"
    TAP: ClassVar[tuple[str, str]] = ("acc[ki] += x;", "acc[ki] += x")
    MEAN: ClassVar[bool] = True

    def check(self, checker: Checker, keys: tuple, model: Any, last: bool, input_layout: Any, in_shape: Shape
              ) -> dict[str, Any] | None:
        fields = SlidingPool.check(self, checker, keys, model, last, input_layout, in_shape)
        if fields is not None and checker.model.dtype == "uint8" and any(fields["pad"]):
            checker.problem((*keys, "pad"), f"expected pad 0 with dtype uint8 (every window whole: one divisor "
                                            f"for the byte sums), got {list(fields['pad'])}")
            return None
        return fields

    def reference(self, x: np.ndarray, w: np.ndarray | None, op: Any, sides: Mapping[str, np.ndarray] | None
                  ) -> np.ndarray:
        taps, counts = windows(x, op, 0.0)
        divisor = op.kernel[0] * op.kernel[1] if op.count_include_pad else counts[None, :, :, None]
        return taps.sum(axis=0) / divisor

    def error_bound(self, op: Any, w: np.ndarray | None, b: np.ndarray | None, values: list[np.ndarray],
                    errors: list[np.ndarray], unit_roundoff: float, underflow: float,
                    sides: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        value, error = values[-1], errors[-1]
        result = self.reference(value, None, op, sides)
        n = op.kernel[0] * op.kernel[1]
        gamma = n * unit_roundoff / (1 - n * unit_roundoff)
        bound = (gamma * self.reference(np.abs(value) + error, None, op, sides)
                 + self.reference(error, None, op, sides) + unit_roundoff * np.abs(result) + (n + 1) * underflow)
        return result, bound

    def reference_uint8(self, op: Any, sources: list[np.ndarray], j: int, w: np.ndarray | None,
                        b: np.ndarray | None, oq: Any, sides: Mapping[str, np.ndarray] | None, rq: Requantizers
                        ) -> np.ndarray:
        pixels = op.kernel[0] * op.kernel[1]
        acc = np.rint(self.reference(sources[j], None, op, sides) * pixels).astype(np.int64) - pixels * oq.z_in
        return rq.requantize_op(acc, oq, oq.z_out)


@dataclass(frozen=True, slots=True)
class GlobalAvgPoolOp(AvgPoolOp):
    """The mean of each channel over the whole image: an average pool whose window is the image."""

    KEY: ClassVar[str] = "global_avgpool"
    KIND: ClassVar[str] = "avgpool"
    MODEL: ClassVar[type] = GlobalAvgPoolModel
    DOC: ClassVar[str] = "{}: the mean of each channel over the whole image (a 1x1 output)"
    FORM: ClassVar[str] = "{}"
    UINT8: ClassVar[bool] = True

    def check(self, checker: Checker, keys: tuple, model: Any, last: bool, input_layout: Any, in_shape: Shape
              ) -> dict[str, Any] | None:
        _, height, width, _ = in_shape
        return channelwise(self, checker, keys, model, last, input_layout, in_shape, (height, width), (1, 1), 0)
