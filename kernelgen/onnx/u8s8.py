"""Which onnxruntime session is an exact oracle for a quantized model on this host, and why.

onnxruntime's default CPU session fuses DequantizeLinear -> Conv / Gemm -> QuantizeLinear into QLinearConv / QGemm,
the integer operators a deployment runs, and kernelgen's uint8 kernels compute what those compute. On x86 without
VNNI, though, its uint8 x int8 products go through vpmaddubsw, which adds each pair of products in 16 bits and
saturates once weights pass +-64 against full-range bytes (quantize_static's default int8 weights reach 127): the
default session is then wrong, not the kernel. onnxruntime documents that and its cure, the session config entry
`session.x64quantprecision` (onnxruntime_session_options_config_keys.h): the int8 weights of QLinearConv, QGemm and
MatMulInteger become uint8 (+128, zero point +128) and the products are widened to 16 bits before any sum, which is
exact. Measured here (AMD EPYC, AVX2, no VNNI, onnxruntime 1.32): a 3x3 conv over 64 channels with weights up to
127 differs from the exact integer result in 2737 of 3200 bytes by up to 58 by default, in 0 with that entry.

The alternative, graph optimizations off (DequantizeLinear -> float32 Conv -> QuantizeLinear, as the ONNX spec
writes it), does not saturate but is not integer-exact either: the float32 sum of dequantized products rounds, and
where the exact value lies within that rounding of a half the byte goes the other way (1 of 3200 bytes in the same
conv, by 1). So the u8u8 session is the oracle here: the operators a deployment runs, exact, compared bit for bit.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Iterable

import numpy as np

# |w| up to 64: a pair of products 255 * 64 * 2 = 32640 still fits the int16 sums of x86's vpmaddubsw.
PAIR_SAFE_WEIGHT = 64
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
PRECISION_ENTRY = "session.x64quantprecision"  # onnxruntime: U8U8 products instead of U8S8 on AVX2 / AVX-512


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def widest_int8(weights: Iterable[np.ndarray | None]) -> int:
    """The largest |w| among the int8 arrays (None: an op without weights, a pool or a mul; other dtypes: not
    multiplied as int8)."""
    return max((int(np.abs(w.astype(np.int32)).max(initial=0)) for w in weights
                if w is not None and w.dtype == np.int8), default=0)


def u8s8_saturation(weights: Iterable[np.ndarray | None], flags: set[str] | None = None) -> str:
    """Why onnxruntime's default uint8 x int8 convolution is wrong on this host for these weights, or "".

    On x86 without VNNI, onnxruntime's uint8 x int8 kernels (MLAS, vpmaddubsw) add each pair of products in 16
    bits, which saturates once weights pass +-64 against full-range bytes: onnxruntime's quantization guide
    documents it and recommends reduce_range (7-bit weights) or uint8 weights there."""
    flags = cpu_flags() if flags is None else flags
    if platform.machine().lower() not in ("x86_64", "amd64") or any(f in flags for f in VNNI_FLAGS):
        return ""
    widest = widest_int8(weights)
    if widest <= PAIR_SAFE_WEIGHT:
        return ""
    return (f"this x86 CPU has no VNNI: onnxruntime's default uint8 x int8 convolution adds pairs of products in 16 "
            f"bits and saturates with weights beyond +-{PAIR_SAFE_WEIGHT}; these reach {widest}")


@dataclass(frozen=True, slots=True)
class QuantOracle:
    """The onnxruntime session a quantized check runs: how `oracles` names it, why it was chosen over the default
    (empty for the default), and its session config entries. compared False: no onnxruntime session is exact here
    (x86 without VNNI and without AVX2, where onnxruntime's precision mode has no effect): numpy alone decides."""

    name: str = "onnxruntime"
    why: str = ""
    entries: tuple[tuple[str, str], ...] = ()
    compared: bool = True

    @property
    def text(self) -> str:
        """The oracle and, when it is not the default session, why: what the output says decided."""
        return f"{self.name} ({self.why})" if self.why else self.name


DEFAULT = QuantOracle()


def quant_oracle(weights: Iterable[np.ndarray | None], flags: set[str] | None = None) -> QuantOracle:
    """onnxruntime's default session where it is exact (ARM, x86 with VNNI, int8 weights within +-64, uint8
    weights); its u8u8 precision mode where the default saturates and AVX2 is there to run that mode; else none."""
    flags = cpu_flags() if flags is None else flags
    saturates = u8s8_saturation(weights, flags)
    if not saturates:
        return DEFAULT
    if "avx2" not in flags:
        return QuantOracle(why=f"not compared: {saturates}, and without AVX2 its precision mode "
                               f"({PRECISION_ENTRY}) has no effect", compared=False)
    return QuantOracle(name="onnxruntime u8u8", entries=((PRECISION_ENTRY, "1"),),
                       why=f"{PRECISION_ENTRY}: exact uint8 x uint8 products, because {saturates}")


def allowed_difference(oq, in_float: tuple[str, ...] = ()) -> tuple[int, str]:
    """How far one op's bytes may lie from onnxruntime's on the same input (oq: its quant.OpQuant; in_float: the
    float32 arithmetic onnxruntime's optimized graph kept for it, oracle.OpRun), and what form the op's arithmetic
    takes. 0 for a float32 requantization: onnxruntime's own (f32(acc * f32 scale), one rounding, quant_float.py).
    1 for a fixed-point requantization (TFLite's: a 31-bit multiplier rounds the product once more), for a residual
    add, which kernelgen computes in fixed point as TFLite does while onnxruntime's QLinearAdd rounds as its
    platform does (float with FMA on x86, fixed point on ARM), and for an op onnxruntime did not fuse into its
    integer operator (a hand-built QDQ conv with a float bias and a Clip: a float32 sum of dequantized products):
    each rounds the same real value once, so they part only where it lies within a rounding of a half, by one."""
    allowed, form = _allowed(oq, in_float)
    if oq.table_slack > allowed:  # a sigmoid's table: onnxruntime's comes from MLAS's approximate logistic
        return oq.table_slack, (f"{form}; a table of onnxruntime's approximate logistic may round entries near a "
                                f"half the other way (within {oq.table_slack})")
    return allowed, form


def _allowed(oq, in_float: tuple[str, ...]) -> tuple[int, str]:
    if in_float:
        return 1, f"onnxruntime kept it in float32 ({', '.join(in_float)})"
    if oq.add is not None:
        return 1, "a residual add" + ("" if oq.float_requants else ", fixed-point requantization")
    if oq.float_requants:
        return 0, "float32 requantization"
    return 1, "fixed-point requantization"
