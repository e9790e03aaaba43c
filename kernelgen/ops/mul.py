"""mul: squeeze-excite's per-channel scaling, each channel of the op's input times a side input's value for its
image and channel ([n, 1, 1, c]). A filterless op with a 1x1 window; uint8 as onnxruntime's QLinearMul."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Union

import numpy as np
from pydantic import Field

from .fields import LayoutSpec, Name, PoolQuantModel, StrictModel, output_layout_field
from .op import Checker, OpKind, Requantizers, Shape
from .pools import channelwise


class MulModel(StrictModel):
    by: Name = Field(description="the name of a side input of shape [n, 1, 1, c]: each channel of the op's input "
                                 "times its value (squeeze-excite's scaling)")
    quant: Union[PoolQuantModel, None] = Field(
        default=None, description="dtype uint8: {output_scale: ..., output_zero_point: ...} (onnxruntime's "
                                  "QLinearMul: (q - z_in) * (f - z_f) times s_in * s_f / s_out, plus z_out, rounded "
                                  "once)")
    output_layout: Union[LayoutSpec, None] = output_layout_field()


def qlinear_mul(product: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """onnxruntime's QLinearMul after the exact product of the centred bytes: f32(f32(product) * S), plus the output
    zero point in float32 (MLAS adds it before rounding), rounded half to even, saturated to bytes (uint8)."""
    with np.errstate(all="ignore"):
        y = (np.asarray(product).astype(np.float32) * np.float32(scale)).astype(np.float32)
        y = (y + np.float32(zero_point)).astype(np.float32)
    return np.clip(np.rint(y), 0, 255).astype(np.uint8)


@dataclass(frozen=True, slots=True)
class MulOp(OpKind):
    KEY: ClassVar[str] = "mul"
    MODEL: ClassVar[type] = MulModel
    DOC: ClassVar[str] = "{by: <side input>}: each channel times a side input's value for it (squeeze-excite)"

    def check(self, checker: Checker, keys: tuple, model: MulModel, last: bool, input_layout: Any, in_shape: Shape
              ) -> dict[str, Any] | None:
        n, _, _, channels = in_shape
        sides = {side.name: side.shape for side in checker.sides}
        want = (n, 1, 1, channels)
        if model.by not in sides or sides[model.by] != want:
            got = f"{list(sides[model.by])}" if model.by in sides else "no such side input"
            checker.problem((*keys, "by"), f"expected a side input of shape {list(want)} (one value per image and "
                                           f"channel; side_inputs: {', '.join(sides) or 'none declared'}), got "
                                           f"{model.by!r}: {got}")
            return None
        return channelwise(self, checker, keys, model, last, input_layout, in_shape, (1, 1), (1, 1), 0,
                           scale_by=model.by)

    def reference(self, x: np.ndarray, w: np.ndarray | None, op: Any, sides: Mapping[str, np.ndarray] | None
                  ) -> np.ndarray:
        return x.astype(np.float64) * sides[op.scale_by].astype(np.float64)  # [n, 1, 1, c] over every pixel

    def error_bound(self, op: Any, w: np.ndarray | None, b: np.ndarray | None, values: list[np.ndarray],
                    errors: list[np.ndarray], unit_roundoff: float, underflow: float,
                    sides: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
        """One rounding of the product; the side input is exact as given."""
        factor = np.abs(sides[op.scale_by].astype(np.float64))
        result = self.reference(values[-1], None, op, sides)
        return result, factor * errors[-1] + unit_roundoff * np.abs(result) + underflow

    def reference_uint8(self, op: Any, sources: list[np.ndarray], j: int, w: np.ndarray | None,
                        b: np.ndarray | None, oq: Any, sides: Mapping[str, np.ndarray] | None, rq: Requantizers
                        ) -> np.ndarray:
        """QLinearMul: the exact product of the centred bytes, requantized once."""
        product = (sources[j].astype(np.int64) - oq.z_in) * (np.asarray(sides[op.scale_by]).astype(np.int64) - oq.z_w)
        if not oq.float_requants:
            return rq.requantize(product, oq.requants, oq.z_out)
        return qlinear_mul(product, oq.float_requants[0].scale, oq.z_out)  # z_out added in float32, as MLAS does
