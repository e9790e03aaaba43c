"""The config of a group `kernelgen import` made, as a record: what the planner costs (config_of: a `Config` built
from its keys, no YAML text) and what config_text.py writes to the file. Float groups hold NCHW tensors as ONNX
stores them, or NHWC between two kernels that compute channels innermost (layouts.py); uint8 groups (quant set)
HVX's blocked layouts and the model's own scales and zero points."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import Config, config_from_data
from ..config.model import Catalog
from ..layout import listed_of_logical, listed_order

CANDIDATE = "<candidate group>"  # the path a candidate group's problems name: it has no file


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """A side input: a tensor from outside the group (an Add's other branch, a Mul's factors)."""

    name: str  # as the config names it
    tensor: str  # the ONNX tensor
    shape: tuple[int, int, int, int]  # NCHW, as ONNX holds it
    scale: float | None = None  # uint8: as the op reading it dequantizes it
    zero_point: int | None = None
    layout: str | None = None  # None: the group's input layout


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupQuant:
    """A uint8 group's top-level `quant:` (its input's quantization, its weights' type)."""

    input_scale: float
    input_zero_point: int
    weight_dtype: str  # int8 or uint8
    weight_zero_point: int
    requantization: str = "float32"  # onnxruntime's; fixed_point where a float32 scale is past what a kernel takes


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One entry of the config's `ops:` list: its kind and its keys, in the order the file lists them."""

    kind: str  # conv2d, maxpool, avgpool, global_avgpool, mul
    keys: tuple[tuple[str, Any], ...] = ()  # values as loading the YAML gives them (ints, floats, lists, mappings)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    name: str
    model: str  # the ONNX file, relative to the configs' folder
    input_shape: tuple[int, ...]  # NCHW ([N, C]: a 1x1 image)
    layout: str  # of the input, and of the output and side inputs that name none of their own
    ops: tuple[Op, ...]
    targets: tuple[str, ...]
    sides: tuple[Side, ...] = ()
    quant: GroupQuant | None = None  # None: a float32 config
    schedule: str | None = None  # "auto": fitted to the targets' budget; None: the default schedule
    nodes: tuple[str, ...] = ()  # source.nodes; () for a candidate group being costed: planned, never run
    output_layout: str | None = None  # None: `layout`

    @property
    def dtype(self) -> str:
        return "float32" if self.quant is None else "uint8"

    def data(self) -> dict[str, Any]:
        """The config's keys as loading its YAML file gives them, in the file's order."""
        n, c, h, w = (*self.input_shape, 1, 1)[:4]
        data: dict[str, Any] = {"name": self.name}
        if self.quant is not None:
            data["dtype"] = "uint8"
        data["input"] = {"shape": _listed((n, c, h, w), self.layout), "layout": self.layout}
        if self.sides:
            data["side_inputs"] = {side.name: _side_keys(side, side.layout or self.layout) for side in self.sides}
        if self.quant is not None:
            q = self.quant
            data["quant"] = {"input_scale": q.input_scale, "input_zero_point": q.input_zero_point,
                             "weight_dtype": q.weight_dtype, "weight_zero_point": q.weight_zero_point,
                             "requantization": q.requantization}
        data["ops"] = [{op.kind: {key: _plain(value) for key, value in op.keys}} for op in self.ops]
        data["output"] = {"layout": self.output_layout or self.layout}
        if self.schedule is not None:
            data["schedule"] = self.schedule
        data["targets"] = list(self.targets)
        if self.nodes:
            source: dict[str, Any] = {"onnx": self.model, "nodes": list(self.nodes)}
            if self.sides:
                source["sides"] = {side.name: side.tensor for side in self.sides}
            data["source"] = source
        return data


def config_of(group: GroupConfig, catalog: Catalog, path: str = CANDIDATE) -> Config:
    """The group's checked `Config`, as loading its file would give (ConfigError when it cannot be one)."""
    return config_from_data(group.data(), path, catalog)


def _side_keys(side: Side, layout: str) -> dict[str, Any]:
    keys: dict[str, Any] = {"shape": _listed(side.shape, layout), "layout": layout}
    if side.scale is not None:
        keys |= {"scale": side.scale, "zero_point": side.zero_point}
    return keys


def _listed(nchw: tuple[int, ...], layout: str) -> list[int]:
    """An NCHW shape as the config lists it for `layout`: in its letters' order (NCHW as ONNX holds it)."""
    n, c, h, w = nchw
    return list(listed_of_logical((n, h, w, c), listed_order(layout)))


def _plain(value: Any) -> Any:
    """A key's value as YAML loads it: tuples as lists, mappings as dicts."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
