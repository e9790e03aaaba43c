"""ONNX's Sigmoid, g = 1 / (1 + exp(-v)), and SiLU (swish) v * g, which PyTorch exports as a Sigmoid and a Mul of
the conv's result by it (EfficientNet's and RegNetY's activation; their squeeze-excite gate is a Sigmoid alone).

uint8 applies them as a table of the conv's 256 bytes, as onnxruntime does (QLinearSigmoid builds one; a QDQ SiLU
quantizes the gate, then QLinearMul multiplies the centred bytes): the gate exact (float64) and rounded once to its
bytes. onnxruntime's own table comes from MLAS's logistic, a float32 rational approximation measured within
1.76e-7 of the exact value (4 million float32 inputs in [-20, 20], onnxruntime 1.32 on x86), so an entry whose
exact value lies that close to a rounding boundary may round the other way there: table_slack says how far that
moves the table (0 for most scales: bit-exact), and validation allows it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .activation import Activation
from .mul import qlinear_mul
from .statements import Assign, Lit, Var, op

V, G = Var("v"), Var("g")
# The exp the kernels call is their library's, not correctly rounded: within 3 + 2|x| ulps in Vulkan's precision
# rules (GLSL exp), 3 ulps in OpenCL's full profile, under 1 in glibc's expf. Its error reaches the gate scaled by
# 1 - g, and e^-|v| (3 + 2|v|) is at most 3, so with the add's and the divide's roundings (a divide within 2.5 ulps
# in Vulkan's rules) the gate is within this many units of roundoff of 1 / (1 + exp(-v)), with room to spare.
GATE_ROUNDOFFS = 8.0
# The largest slope of v * sigmoid(v) (at v ~ 2.40), rounded up; sigmoid's own is 1/4 (at 0).
SILU_SLOPE = 1.1
# MLAS's logistic within this of 1 / (1 + e^-v) (measured 1.76e-7, the module's docstring), with room
LOGISTIC_ERROR = 2.5e-7


@dataclass(frozen=True, slots=True, kw_only=True)
class Sigmoid(Activation):
    """g = 1 / (1 + exp(-v)) (Sigmoid), and v * g when `times_value` (SiLU). Kernels compute them in float32 in this
    order: -v, its exp, + 1, 1 / that, and the product."""

    times_value: bool = False  # silu
    KEY: ClassVar[str] = "sigmoid"
    DOC: ClassVar[str] = "'sigmoid' (1 / (1 + exp(-x))), 'silu' (x * sigmoid(x), also called swish)"
    ONNX: ClassVar[tuple[str, ...]] = ("Sigmoid",)
    UINT8: ClassVar[str] = "table"

    @property
    def name(self) -> str:
        return "silu" if self.times_value else "sigmoid"

    def statements(self) -> tuple[Assign, ...]:
        return (Assign("g", op("mul", V, Lit(-1.0)), declare=True), Assign("g", op("exp", G)),
                Assign("g", op("add", G, Lit(1.0))), Assign("g", op("div", Lit(1.0), G)),
                Assign("v", op("mul", V, G) if self.times_value else G))

    def lipschitz(self) -> float:
        return SILU_SLOPE if self.times_value else 0.25

    def own_error(self, size: np.ndarray, unit_roundoff: float, underflow: float) -> np.ndarray:
        """The gate within GATE_ROUNDOFFS units of roundoff (it is at most 1); silu's product: |v| times that, and
        one rounding of |v * g| <= |v|."""
        gate_error = GATE_ROUNDOFFS * unit_roundoff + underflow
        if not self.times_value:
            return np.full_like(np.asarray(size, dtype=np.float64), gate_error)
        return size * (gate_error + unit_roundoff) + underflow

    @property
    def takes_gate_quant(self) -> bool:
        """SiLU multiplies by the gate, which a QDQ model quantizes first (quant: gate_scale, gate_zero_point)."""
        return self.times_value

    def byte_table(self, s_conv: float, z_conv: int, s_out: float, z_out: int,
                   gate: tuple[float, int] | None = None) -> tuple[int, ...]:
        """The conv's bytes dequantized in float32 (DequantizeLinear), the exact gate rounded once: sigmoid's to
        the output; SiLU's to `gate`'s bytes then multiplied as QLinearMul does (qlinear_mul, at
        f32(f32(s_conv * s_gate) / s_out)), or without `gate` v * g rounded once."""
        return tuple(int(b) for b in self._table(s_conv, z_conv, s_out, z_out, gate, 0.0))

    def table_slack(self, s_conv: float, z_conv: int, s_out: float, z_out: int,
                    gate: tuple[float, int] | None = None) -> int:
        """The most any entry moves when the gate is off by LOGISTIC_ERROR either way, as onnxruntime's may be."""
        exact = self._table(s_conv, z_conv, s_out, z_out, gate, 0.0)
        return max(int(np.abs(self._table(s_conv, z_conv, s_out, z_out, gate, shift) - exact).max())
                   for shift in (-LOGISTIC_ERROR, LOGISTIC_ERROR))

    def _table(self, s_conv: float, z_conv: int, s_out: float, z_out: int, gate: tuple[float, int] | None,
               shift: float) -> np.ndarray:
        """The 256 output bytes (int64) with every gate moved by `shift`."""
        centred = np.arange(256, dtype=np.int64) - z_conv
        v = (centred.astype(np.float32) * np.float32(s_conv)).astype(np.float64)
        g = np.clip(1.0 / (1.0 + np.exp(-v)) + shift, 0.0, 1.0)
        if not self.times_value:
            return _quantized(g, s_out, z_out)
        if gate is None:
            return _quantized(v * g, s_out, z_out)
        s_gate, z_gate = gate
        f32 = np.float32
        with np.errstate(all="ignore"):
            scale = float(f32(f32(f32(s_conv) * f32(s_gate)) / f32(s_out)))
        return qlinear_mul(centred * (_quantized(g, s_gate, z_gate) - z_gate), scale, z_out).astype(np.int64)

    @classmethod
    def from_onnx(cls, op_type: str, attributes: dict) -> str | dict | None:
        return "sigmoid"


def _quantized(y: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """QuantizeLinear of exact values: rint(y / scale) + zero_point, saturated to [0, 255]."""
    return np.clip(np.rint(y / float(np.float32(scale))) + zero_point, 0, 255).astype(np.int64)


SIGMOID = Sigmoid()
SILU = Sigmoid(times_value=True)
Sigmoid.SPELLINGS = {"sigmoid": SIGMOID, "silu": SILU}
