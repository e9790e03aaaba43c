"""conv2d: dense, grouped and depthwise (groups equal to the input channels), and the classifier's FC form (ONNX's
Gemm on a flattened 1x1 image: a 1x1 conv with the Gemm's rows as its filters, onnx/layers.py). Each output
channel k sums its group's input channels over the window, times the filter, then the epilogue (bias, residual,
activation)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, Mapping, Protocol, Union

import numpy as np
from pydantic import Field, StrictBool

from .activation_kinds import ACTIVATION_DOC, ActivationSpec
from .activations import IDENTITY
from .fields import (LAYOUT_HELP, Count, IntPair, LayoutSpec, Name, OpQuantModel, PadSpec, StrictModel,
                     output_layout_field)
from .op import Checker, OpKind, Requantizers, Shape, epilogue, residual_of

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


class Conv2dModel(StrictModel):
    out_channels: Count = Field(description="a positive int")
    kernel: IntPair = Field(default=1, description="a positive int or [h, w]")
    stride: IntPair = Field(default=1, description="a positive int or [h, w]")
    pad: PadSpec = Field(default=0, description="a non-negative int, [h, w], [top, left, bottom, right], "
                                                "'same' or 'valid'")
    dilation: IntPair = Field(default=1, description="a positive int or [h, w]")
    groups: Count = Field(default=1, description="a positive int dividing the input and output channels: "
                                                 "channels split into that many independent convs (groups equal "
                                                 "to the input channels: depthwise)")
    bias: StrictBool = Field(default=False, description="true or false: add one value per output channel (a "
                                                        "kernel argument like the filter)")
    residual: Union[Literal["input"], Count, Name, None] = Field(
        default=None, description="'input' (add the chain's input), K (add the output of op K, an earlier op, "
                                  "1-based) or the name of a side input (the other branch of a two-branch add): a "
                                  "residual of the same shape, added after the bias")
    activation: ActivationSpec = Field(
        default="none", description=ACTIVATION_DOC + ", applied after the bias and the residual")
    quant: Union[OpQuantModel, None] = Field(
        default=None, description="dtype uint8: {weight_scale: number or [one per output channel], output_scale: "
                                  "..., output_zero_point: ...}")
    filter_layout: LayoutSpec = Field(
        default="OIHW", description=LAYOUT_HELP + " (default: OIHW, or the layout a target's kernels read for the "
                                                  "dtype: oihw-8i32o4i for hvx uint8)")
    output_layout: Union[LayoutSpec, None] = output_layout_field()


def conv2d(x: np.ndarray, w: np.ndarray, op: Any) -> np.ndarray:
    """NHWC x OIHW -> NHWC in float64; zero padding, stride, dilation and groups as the op says
    (w is [K, C / groups, kh, kw]: output channel k reads the input channels of group k // (K / groups))."""
    if op.groups > 1:
        kg, cg = w.shape[0] // op.groups, x.shape[3] // op.groups
        return np.concatenate([_dense(x[..., g * cg:(g + 1) * cg], w[g * kg:(g + 1) * kg], op)
                               for g in range(op.groups)], axis=3)
    return _dense(x, w, op)


def _dense(x: np.ndarray, w: np.ndarray, op: Any) -> np.ndarray:
    top, left, bottom, right = op.pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    (sh, sw), (dh, dw), (kh, kw) = op.stride, op.dilation, op.kernel
    n, h, wd, _ = xp.shape
    oh = (h - op.span[0]) // sh + 1
    ow = (wd - op.span[1]) // sw + 1
    out = np.zeros((n, oh, ow, w.shape[0]), dtype=np.float64)
    w64 = w.astype(np.float64)
    for rh in range(kh):
        for rw in range(kw):
            window = xp[:, rh * dh: rh * dh + (oh - 1) * sh + 1: sh, rw * dw: rw * dw + (ow - 1) * sw + 1: sw, :]
            out += window @ w64[:, :, rh, rw].T
    return out


def conv2d_acc(x: np.ndarray, w: np.ndarray, zx: int, zw: int, op: Any, bias: np.ndarray | None) -> np.ndarray:
    """int64 sum((x - zx) * (w - zw)) (+ bias); padding is zx, i.e. 0 after centering."""
    centered = x.astype(np.int64) - zx
    acc = conv2d(centered.astype(np.float64), (w.astype(np.int64) - zw).astype(np.float64), op)
    # float64 sums of integers below 2^53 are exact.
    acc = np.rint(acc).astype(np.int64)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    if acc.min() < INT32_MIN or acc.max() > INT32_MAX:
        raise ValueError("accumulator exceeds int32")
    return acc


class Conv2dChecker(Checker, Protocol):
    """What a conv's check asks of the config's checker besides every op's: its filter's layout and the epilogue
    keys (config/epilogue.py)."""

    def filter_layout(self, keys: tuple, model: Conv2dModel, filter_shape: Shape) -> tuple[Any, str] | None: ...
    def activation(self, keys: tuple, spec: Any) -> Any: ...
    def residual(self, keys: tuple, spec: Any, stride: tuple[int, int], out_shape: Shape) -> int | str | None: ...


@dataclass(frozen=True, slots=True)
class Conv2dOp(OpKind):
    KEY: ClassVar[str] = "conv2d"
    MODEL: ClassVar[type] = Conv2dModel
    DOC: ClassVar[str] = "a conv2d op: {out_channels: ..., kernel: ..., ...}"
    FILTER: ClassVar[bool] = True
    FLOPS_PER_TAP: ClassVar[int] = 2

    def check(self, checker: Conv2dChecker, keys: tuple, c: Conv2dModel, last: bool, input_layout: Any,
              in_shape: Shape) -> dict[str, Any] | None:
        fields = Conv2dModel.model_fields
        out_channels = checker.positive((*keys, "out_channels"), c.out_channels, fields["out_channels"].description)[0]
        kernel = checker.pair((*keys, "kernel"), c.kernel, fields["kernel"].description)
        stride = checker.pair((*keys, "stride"), c.stride, fields["stride"].description)
        dilation = checker.pair((*keys, "dilation"), c.dilation, fields["dilation"].description)
        n, height, width, channels = in_shape
        fitted = checker.window(keys, kernel, stride, dilation, c.pad, in_shape)
        if fitted is None:
            return None
        pad, (out_h, out_w) = fitted
        out_shape = (n, out_h, out_w, out_channels)
        if channels % c.groups or out_channels % c.groups:
            checker.problem((*keys, "groups"), f"expected a divisor of the {channels} input and {out_channels} "
                                               f"output channels, got {c.groups}")
            return None
        filter_shape = (out_channels, channels // c.groups, kernel[0], kernel[1])
        if not (checker.fits(keys, out_shape, "its output")
                and checker.fits((*keys, "kernel"), filter_shape, "its filter")):
            return None
        filtered = checker.filter_layout(keys, c, filter_shape)
        output_layout = checker.output_layout(keys, c.output_layout, last, input_layout, out_shape)
        if filtered is None or filtered[0] is None or output_layout is None:
            return None
        act = checker.activation((*keys, "activation"), c.activation)
        residual = checker.residual((*keys, "residual"), c.residual, stride, out_shape)
        uint8 = checker.model.dtype == "uint8"
        if uint8 and act.step.UINT8 == "table" and (c.quant is None or c.quant.conv_scale is None
                                                    or c.quant.conv_zero_point is None):
            checker.problem((*keys, "activation"), f"expected quant: {{conv_scale: ..., conv_zero_point: ...}} on the "
                                                   f"op with a {act.name} on dtype uint8 (the conv's own bytes, which "
                                                   f"a table maps through the {act.name} to the output's), got none")
        elif uint8 and c.quant is not None and (c.quant.gate_scale is None) != (c.quant.gate_zero_point is None):
            checker.problem((*keys, "quant"), "expected gate_scale and gate_zero_point together (the scale and zero "
                                              "point the silu's gate is quantized to), got one of them")
        elif uint8 and c.quant is not None and c.quant.gate_scale is not None and not act.step.takes_gate_quant:
            checker.problem((*keys, "quant", "gate_scale"), f"expected gate_scale only with a silu on dtype uint8 (the "
                                                            f"gate it multiplies by), got it with {act.name}")
        elif uint8 and act.step.UINT8 == "table" and residual is not None:
            checker.problem((*keys, "activation"), f"expected none, relu, relu6 or a clamp after a residual add with "
                                                   f"dtype uint8 (the add's bytes through a {act.name} table: not "
                                                   f"generated yet), got {act.name}")
        if c.quant is not None and (not uint8 or isinstance(c.quant.weight_scale, list)
                                    and len(c.quant.weight_scale) not in (1, out_channels)):
            checker.problem((*keys, "quant") if not uint8 else (*keys, "quant", "weight_scale"),
                            "expected a quant block only with dtype uint8" if not uint8 else
                            f"expected one weight scale, or one per output channel ({out_channels}), got "
                            f"{len(c.quant.weight_scale)}")
        return dict(out_channels=out_channels, kernel=kernel, stride=stride, pad=pad, dilation=dilation,
                    filter_layout=filtered[0], output_layout=output_layout, groups=c.groups,
                    bias=c.bias or uint8 and checker.model.quant.bias,  # quant.bias: every op (the older key)
                    residual=residual, act=act.step, activation=act.name, quant=c.quant,
                    filter_layout_by=filtered[1])

    def reference(self, x: np.ndarray, w: np.ndarray | None, op: Any, sides: Mapping[str, np.ndarray] | None
                  ) -> np.ndarray:
        return conv2d(x, w, op)

    def error_bound(self, op: Any, w: np.ndarray | None, b: np.ndarray | None, values: list[np.ndarray],
                    errors: list[np.ndarray], unit_roundoff: float, underflow: float,
                    sides: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        """A dot product of n terms accumulated in floating point errs by at most gamma_n * sum |x_i * w_i| with
        gamma_n = n*u / (1 - n*u) (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5), with
        or without FMA; the input's error passes through |W|. A bias and a residual are one more term each of the
        sum (|b|, |residual| added to the magnitude); the activation scales the bound by its slope and adds its own
        roundings (a clamp is exact)."""
        value, error = values[-1], errors[-1]
        n_terms = w.shape[1] * w.shape[2] * w.shape[3] + (1 if op.bias else 0) + (1 if op.residual is not None else 0)
        gamma = n_terms * unit_roundoff / (1 - n_terms * unit_roundoff)
        magnitude = conv2d(np.abs(value) + error, np.abs(w), op)
        if op.bias:
            magnitude = magnitude + np.abs(b.astype(np.float64))
        inherited = conv2d(error, np.abs(w), op)
        if op.residual is not None:  # the stored residual: its own error passes through, its size is one more term
            carried = 0.0 if isinstance(op.residual, str) else errors[op.residual]
            magnitude = magnitude + np.abs(residual_of(op, values, sides)) + carried
            inherited = inherited + carried
        error = gamma * magnitude + inherited + (n_terms + 1) * underflow
        pre = conv2d(value, w, op)
        # the activation moves an error of its input by at most its slope and adds its own float32 steps, for an
        # input of the kernel's size (a clamp: exact, the error passes through)
        size = np.abs(epilogue(pre, replace(op, act=IDENTITY), b, values, sides)) + error
        value = epilogue(pre, op, b, values, sides)
        return value, op.act.lipschitz() * error + op.act.own_error(size, unit_roundoff, underflow)

    def reference_uint8(self, op: Any, sources: list[np.ndarray], j: int, w: np.ndarray | None,
                        b: np.ndarray | None, oq: Any, sides: Mapping[str, np.ndarray] | None, rq: Requantizers
                        ) -> np.ndarray:
        acc = conv2d_acc(sources[j], w, oq.z_in, oq.z_w, op, b)
        if oq.table:  # the conv's own bytes, then the gate's table
            return np.array(oq.table, dtype=np.uint8)[rq.requantize_op(acc, oq, oq.z_conv)]
        if oq.add is None:
            return rq.requantize_op(acc, oq, oq.z_out, oq.q_min, oq.q_max)
        conv = rq.requantize_op(acc, oq, oq.z_conv)
        return rq.quantized_add(conv, np.asarray(residual_of(op, sources, sides)), oq.add, oq.z_out, oq.q_min,
                                oq.q_max)

