"""What an activation kind is: one frozen record per kind (activations.py, hard_gates.py, leaky_relu.py) with
everything the pipeline asks of it, so a new one is one module and one line in activation_kinds.py's table:
its config spellings, its arithmetic as statements (statements.py: every target renders them, the float reference
and the uint8 byte table evaluate them), its share of the float32 error bound and its ONNX form."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Callable, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .statements import Assign, evaluate

Problem = Callable[[tuple, str], None]
# The largest finite float32 (IEEE 754 binary32): a parameter past it cannot be stored in a kernel.
FLOAT32_MAX = 3.4028234663852886e38
# a parameter as the schema takes it: ints accepted; nan, inf, true not
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class Params(BaseModel):
    """A parametrised activation's {param: value} block: unknown keys are errors, values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class OneKind(Params):
    """{kind: {...}}: the parametrised kinds as the optional keys of one mapping (one schema branch, so an error
    speaks of the kind written, not of every other kind's missing key); the config check wants exactly one."""

    model_config = ConfigDict(extra="forbid", frozen=True,
                              json_schema_extra={"minProperties": 1, "maxProperties": 1})

    @property
    def given(self) -> list[str]:
        return [key for key in type(self).model_fields if getattr(self, key) is not None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Activation:
    """The base of every kind. `KEY`: the kind's spelling (plain, and the key of its parameter block); `SPELLINGS`:
    the plain names it takes and the record each means; `SPEC`: the schema of the block in its {KEY: {...}} form
    (None: no parameters); `ONNX`: the op types the importer folds into a conv as this kind; `UINT8`: how uint8 kernels apply
    it ("range": a clamp of the output bytes; "table": 256 bytes of the conv's own bytes, quant.py; "": it does not,
    float only)."""

    KEY: ClassVar[str] = ""
    DOC: ClassVar[str] = ""  # its spellings, for the schema's description of `activation`
    SPELLINGS: ClassVar[dict[str, "Activation"]] = {}
    SPEC: ClassVar[type[Params] | None] = None
    SPEC_DOC: ClassVar[str] = ""  # what its {KEY: {...}} block holds, for the schema
    ONNX: ClassVar[tuple[str, ...]] = ()
    UINT8: ClassVar[str] = "table"

    @property
    def name(self) -> str:
        """The kind, as a kernel's comments name it."""
        return self.KEY

    def describe(self, literal: Callable[[float], str]) -> str:
        """What a kernel's comment calls it, its parameters in the kernel's literals where they matter."""
        return self.name

    def statements(self) -> tuple[Assign, ...]:
        """Its float32 arithmetic on `v`, in the kernels' order."""
        return ()

    def reference(self, value: np.ndarray) -> np.ndarray:
        """The float reference: the statements in float64 on the float32 literals the kernels hold."""
        return evaluate(self.statements(), value, np.float64)

    def lipschitz(self) -> float:
        """The largest slope: how much an error of its input can grow through it."""
        return 1.0

    def own_error(self, size: np.ndarray, unit_roundoff: float, underflow: float) -> np.ndarray | float:
        """What its own float32 roundings add, for an input of magnitude at most `size` (elementwise)."""
        return 0.0

    def byte_table(self, s_conv: float, z_conv: int, s_out: float, z_out: int,
                   gate: tuple[float, int] | None = None) -> tuple[int, ...]:
        """uint8 "table": each of the conv's 256 bytes through the activation between DequantizeLinear and
        QuantizeLinear, as onnxruntime runs it in float32: v = (q - z) * s, the statements in float32, then
        rint(y / s_out) + z_out, saturated. `gate`: the (scale, zero point) a kind that multiplies by a gate
        quantizes the gate to first (a QDQ SiLU's); the kinds here have none."""
        f32 = np.float32
        with np.errstate(all="ignore"):
            v = (np.arange(256, dtype=np.int32) - z_conv).astype(f32) * f32(s_conv)
            y = evaluate(self.statements(), v, f32)
            q = np.rint((y / f32(s_out)).astype(f32)) + f32(z_out)
        return tuple(int(b) for b in np.clip(q, 0, 255))

    @property
    def takes_gate_quant(self) -> bool:
        """uint8: whether a config's quant may give the scale its gate is quantized to before the product."""
        return False

    def table_slack(self, s_conv: float, z_conv: int, s_out: float, z_out: int,
                    gate: tuple[float, int] | None = None) -> int:
        """How far onnxruntime's own table of this activation may lie from byte_table's, entry by entry: 0 where
        it computes the same float32 statements (the gates here)."""
        return 0

    @classmethod
    def from_params(cls, problem: Problem, keys: tuple, params: Params) -> tuple["Activation", str]:
        """The record and its report name from its checked block (the {...} of {KEY: {...}}); a value a float32
        cannot hold is a problem at `keys` (KEY's)."""
        raise NotImplementedError(cls)

    @classmethod
    def from_onnx(cls, op_type: str, attributes: dict) -> str | dict | None:
        """The config spelling of an ONNX node of one of `ONNX`'s types; None when a config cannot hold it."""
        return None


def float32_params(problem: Problem, keys: tuple, what: str, *values: float) -> None:
    """A problem at `keys` when a parameter is past what a float32 holds (a kernel literal must be one)."""
    if max(abs(v) for v in values) > FLOAT32_MAX:
        problem(keys, f"expected {what} a float32 holds, got {', '.join(f'{v:g}' for v in values)}")
