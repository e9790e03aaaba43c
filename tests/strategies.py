"""Hypothesis strategies for configs: valid ones by construction (every notation the loader
takes), and hostile ones made by breaking a valid one.

A valid config is built as a plain dict (what the YAML file holds) together with the
geometry it implies, computed here independently of kernelgen, so the tests can check the
planner against it.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import yaml
from hypothesis import settings, strategies as st

from kernelgen.layout import listed_of_logical, listed_order

# ---------------------------------------------------------------- budget

# CI runs a few hundred examples in total with a fixed seed; KERNELGEN_FUZZ_EXAMPLES=N runs N per suite.
FUZZ_EXAMPLES = int(os.environ.get("KERNELGEN_FUZZ_EXAMPLES", "0"))


def fuzz_settings(ci_examples: int) -> settings:
    """derandomize: the same examples on every CI run (a failure reproduces by rerunning);
    no example database, so a clean clone behaves as a developer's checkout does."""
    examples = FUZZ_EXAMPLES or ci_examples
    return settings(max_examples=examples, derandomize=not FUZZ_EXAMPLES, database=None, deadline=None,
                    print_blob=True)


# ---------------------------------------------------------------- valid configs

ACTIVATION_LAYOUTS = [
    "NHWC", "NCHW", "nhwc-8h8w32c", "nhwc-4c", "nchw-4c", "nchw-8h", "nhwc-8h8w", "nhwc-2h4w8c",
    {"map": "n, h, w, c -> n, c // 4, h, |, w, c % 4", "pad_value": 0},  # NCHW4c texture
    {"map": "n, h, w, c -> n, h, |, w, c // 4, c % 4", "pad_value": -1.5},  # NHWC4c texture
    {"map": "n, h, w, c -> n, h, w // 4, c, w % 4", "pad_value": 2.0},
    {"map": "n, h, w, c -> n, c, h, w"},
    {"map": "nhwc-8c", "pad_value": "undef"},
    {"map": "nchw-4h", "pad_value": 0},
    {"map": "nhwc-8c", "pad_value": 0},
]
# What each target fuses (issue 19: all of it, in float; "residual_op" is residual: K).
FEATURES = {t: {"groups", "bias", "residual", "residual_op", "activation", "pools", "sides"}
            for t in ("c", "hvx", "opencl", "vulkan")}  # issue 29: pools, mul, side inputs and the hard gates too
ACTIVATIONS = ["none", "relu", "relu6", [-0.5, 0.25], [0.1, 2.0], "hardswish", "hardsigmoid",
               {"hardsigmoid": {"alpha": 0.1666667, "beta": 0.5}}]
# the float-only kinds, which hvx does not compute (no exp or divide in qf32)
EXP_ACTIVATIONS = {"c": ["sigmoid", "silu"], "hvx": [], "opencl": ["sigmoid", "silu"], "vulkan": ["sigmoid", "silu"]}
FILTER_LAYOUTS = ["OIHW", "HWIO", "OHWI", "oihw-8i32o4i", "oihw-4o", "hwio-4i4o"]


@dataclass(frozen=True)
class ValidCase:
    data: dict  # the config as its YAML file holds it
    shapes: tuple[tuple[int, int, int, int], ...]  # logical NHWC: input, then each op's output
    flops: int  # 2 * multiply-adds of the convolutions as specified

    @property
    def text(self) -> str:
        return yaml.safe_dump(self.data, sort_keys=False)


def _pads(draw, height: int, width: int, span: tuple[int, int], stride: tuple[int, int]):
    """A pad in one of the four spellings, and its (top, left, bottom, right)."""
    form = draw(st.sampled_from(["int", "pair", "four", "same", "valid"]))
    if form == "same":
        totals = [max((math.ceil(n / s) - 1) * s + k - n, 0) for n, s, k in zip((height, width), stride, span)]
        return "same", (totals[0] // 2, totals[1] // 2, totals[0] - totals[0] // 2, totals[1] - totals[1] // 2)
    if form == "valid":
        return "valid", (0, 0, 0, 0)
    if form == "int":
        p = draw(st.integers(0, 2))
        return p, (p, p, p, p)
    if form == "pair":
        ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        return [ph, pw], (ph, pw, ph, pw)
    four = [draw(st.integers(0, 4)) for _ in range(4)]  # up to 4: wider than half a 5-wide kernel (a 5x5 with
    return four, tuple(four)  # pad 3 over 4 columns read the input's layout padding on hvx)


@st.composite
def valid_configs(draw, dtypes=("float32",), max_side: int = 12, max_channels: int = 70, chain: int = 3,
                  layouts=ACTIVATION_LAYOUTS, name: str = "fuzz", target: str = "c"):
    dtype = draw(st.sampled_from(dtypes))
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    c = draw(st.integers(1, max_channels))
    shapes = [(n, h, w, c)]
    strides: list[tuple[int, int]] = []
    ops, flops = [], 0
    sides: dict = {}
    for index in range(draw(st.integers(1, chain))):
        _, height, width, channels = shapes[-1]
        if "pools" in FEATURES[target] and draw(st.integers(0, 4)) == 0:  # a pool or a mul instead of a conv
            op, out, taps = draw(_between(n, height, width, channels, sides, layouts))
            ops.append(op)
            strides.append((1, 1) if "mul" in op or "global_avgpool" in op else tuple(op[next(iter(op))]["stride"]))
            flops += math.prod(out) * taps
            shapes.append(out)
            continue
        kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
        pad_spec, pad = _pads(draw, height, width, span, stride)
        padded = (height + pad[0] + pad[2], width + pad[1] + pad[3])
        if span[0] > padded[0] or span[1] > padded[1]:  # shrink to a kernel that fits, keeping the pad
            kernel, dilation = (1, 1), (1, 1)
            span = (1, 1)
        stride = tuple(min(s, p) for s, p in zip(stride, padded))
        out_channels = draw(st.integers(1, max_channels))
        groups = 1
        if "groups" in FEATURES[target] and draw(st.integers(0, 3)) == 0:  # grouped: depthwise, or a divisor
            groups = draw(st.sampled_from(sorted({channels, math.gcd(channels, out_channels)})))
            if groups == channels:  # depthwise, channel multiplier 1 or 2
                out_channels = channels * draw(st.integers(1, 2))
            elif out_channels % groups:
                groups = 1
        out = (n, (padded[0] - span[0]) // stride[0] + 1, (padded[1] - span[1]) // stride[1] + 1, out_channels)
        op = {"out_channels": out[3], "kernel": list(kernel), "stride": list(stride), "pad": pad_spec,
              "dilation": list(dilation), "filter_layout": draw(st.sampled_from(FILTER_LAYOUTS))}
        if groups > 1:
            op["groups"] = groups
        if index and draw(st.booleans()):
            op["output_layout"] = draw(st.sampled_from(layouts))
        if "bias" in FEATURES[target]:  # bias, residual and activation, where the target fuses them
            op["bias"] = draw(st.booleans())
        strides.append(tuple(stride))
        # a residual of this op's shape: the input, or an earlier op's output behind stride-1 ops only
        sources = (["input"] if out == shapes[0] else []) + (
            [k for k in range(1, index + 1) if shapes[k] == out and all(s == (1, 1) for s in strides[k:])]
            if "residual_op" in FEATURES[target] else [])
        if "residual" in FEATURES[target] and sources and draw(st.booleans()):
            op["residual"] = draw(st.sampled_from(sources))
        elif "sides" in FEATURES[target] and draw(st.integers(0, 5)) == 0:  # the other branch of an add
            side = f"branch{len(sides) + 1}"
            sides[side] = _tensor(out, draw(st.sampled_from(layouts)))
            op["residual"] = side
        if "activation" in FEATURES[target]:
            op["activation"] = draw(st.sampled_from(ACTIVATIONS + EXP_ACTIVATIONS[target]))
        ops.append({"conv2d": op})
        flops += 2 * math.prod(out) * channels // groups * kernel[0] * kernel[1]
        shapes.append(out)
    data = {"name": name, "dtype": dtype, "input": _tensor((n, h, w, c), draw(st.sampled_from(layouts))),
            **({"side_inputs": sides} if sides else {}),
            "ops": ops, "output": {"layout": draw(st.sampled_from(layouts))}, "targets": [target]}
    data["schedule"] = draw(_schedules(shapes[-1], max(s[3] for s in shapes[1:])))
    return ValidCase(data=data, shapes=tuple(shapes), flops=flops)


@st.composite
def _between(draw, n: int, height: int, width: int, channels: int, sides: dict, layouts):
    """An op between convs: a max or average pool (pads below the window, count_include_pad either way), a global
    average pool, or a mul by a side input of one factor per image and channel (added to `sides`). Returns (its
    list item, its output shape, operations per output element)."""
    kind = draw(st.sampled_from(["maxpool", "avgpool", "global_avgpool", "mul"]))
    if kind == "global_avgpool":
        return {kind: {}}, (n, 1, 1, channels), height * width
    if kind == "mul":
        side = f"scale{len(sides) + 1}"
        sides[side] = _tensor((n, 1, 1, channels), draw(st.sampled_from(layouts)))
        return {kind: {"by": side}}, (n, height, width, channels), 1
    kernel = (draw(st.integers(1, min(3, height + 1))), draw(st.integers(1, min(3, width + 1))))
    pad = [draw(st.integers(0, k - 1)) for k in (kernel[0], kernel[1], kernel[0], kernel[1])]
    padded = (height + pad[0] + pad[2], width + pad[1] + pad[3])
    if kernel[0] > padded[0] or kernel[1] > padded[1]:
        kernel, pad = (1, 1), [0, 0, 0, 0]
        padded = (height, width)
    stride = (min(draw(st.integers(1, 2)), padded[0]), min(draw(st.integers(1, 2)), padded[1]))
    spec = {"kernel": list(kernel), "stride": list(stride), "pad": pad}
    if kind == "avgpool":
        spec["count_include_pad"] = draw(st.booleans())
    out = (n, (padded[0] - kernel[0]) // stride[0] + 1, (padded[1] - kernel[1]) // stride[1] + 1, channels)
    return {kind: spec}, out, kernel[0] * kernel[1]


@st.composite
def hvx_uint8_configs(draw, max_side: int = 10, max_channels: int = 40, name: str = "fuzz_u8"):
    """uint8 chains for the hvx target in the neighbourhood of issue 32's crash: a stride-1 op (1x1, or 3x3 pad 1)
    with or without `residual: input`, then a grouped or depthwise op (or a dense one) with stride, dilation and
    padding drawn together; batch 1 or 2, int8 or uint8 weights at zero point 0 or not; half of them with an
    `hvx:` arch and pixels a group. NHWC8h8w32c activations and OIHW8i32o4i filters, the layouts the hvx uint8
    kernel computes on."""
    n = draw(st.integers(1, 2))
    h, w, c = draw(st.integers(1, max_side)), draw(st.integers(1, max_side)), draw(st.integers(1, max_channels))
    first = draw(st.sampled_from([(1, 0), (3, 1)]))
    op1 = {"out_channels": c, "kernel": first[0], "pad": first[1]}
    if draw(st.integers(0, 3)):  # mostly with the residual: the neighbourhood
        op1["residual"] = "input"
    op1["bias"] = draw(st.booleans())
    op1["activation"] = draw(st.sampled_from(["none", "relu", "relu6"]))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pad = draw(st.integers(0, 3))
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilation))
    if span[0] > h + 2 * pad or span[1] > w + 2 * pad:  # a kernel that fits, keeping the pad
        kernel, dilation, span = (1, 1), (1, 1), (1, 1)
    stride = (min(stride[0], h + 2 * pad), min(stride[1], w + 2 * pad))
    form = draw(st.sampled_from(["depthwise", "grouped", "dense"]))
    divisors = [g for g in range(2, c + 1) if c % g == 0]
    if form == "depthwise" or (form == "grouped" and not divisors):
        groups, out_channels = c, c * draw(st.integers(1, 2))
    elif form == "grouped":
        groups = draw(st.sampled_from(divisors))
        out_channels = groups * draw(st.integers(1, max(1, max_channels // groups)))
    else:
        groups, out_channels = 1, draw(st.integers(1, max_channels))
    op2 = {"out_channels": out_channels, "kernel": list(kernel), "stride": list(stride), "pad": pad,
           "dilation": list(dilation)}
    if groups > 1:
        op2["groups"] = groups
    op2["bias"] = draw(st.booleans())
    out = (n, (h + 2 * pad - span[0]) // stride[0] + 1, (w + 2 * pad - span[1]) // stride[1] + 1, out_channels)
    shapes = ((n, h, w, c), (n, h, w, c), out)
    flops = 2 * n * h * w * c * c * first[0] ** 2 + 2 * math.prod(out) * (c // groups) * kernel[0] * kernel[1]
    weight_dtype = draw(st.sampled_from(["int8", "uint8"]))
    zero = draw(st.sampled_from([0, 0, 3, 128 if weight_dtype == "uint8" else -7]))
    quant = {"input_scale": 0.05, "input_zero_point": draw(st.integers(90, 160)), "weight_dtype": weight_dtype,
             "weight_scale": draw(st.sampled_from([0.004, 0.01, 0.02])), "weight_zero_point": zero,
             "intermediate_scale": draw(st.sampled_from([0.05, 0.1, 0.2])),
             "intermediate_zero_point": draw(st.integers(60, 200)),
             "output_scale": draw(st.sampled_from([0.1, 0.5, 1.0])), "output_zero_point": draw(st.integers(60, 200)),
             "bias": op1["bias"] or op2["bias"]}
    data = {"name": name, "dtype": "uint8", "input": {"shape": [n, h, w, c], "layout": "nhwc-8h8w32c"},
            "quant": quant, "ops": [{"conv2d": op1}, {"conv2d": op2}], "output": {"layout": "nhwc-8h8w32c"},
            "targets": ["hvx"]}
    if draw(st.booleans()):  # the arch and the pixels a group (a padding-only window's group faulted at 12 pixels)
        data["hvx"] = {"arch": draw(st.sampled_from(["v66", "v67", "v68", "v73"])),
                       "pixels": draw(st.sampled_from([4, 8, 12, 16, 20, 24, 28]))}
    return ValidCase(data=data, shapes=shapes, flops=flops)


def _tensor(shape: tuple[int, ...], layout) -> dict:
    """An activation's keys: its logical NHWC shape listed in the layout's letter order, as configs list it."""
    order = listed_order(layout if isinstance(layout, str) else layout["map"])
    return {"shape": list(listed_of_logical(tuple(shape), order)), "layout": layout}


@st.composite
def _schedules(draw, out_shape, widest: int):
    _, out_h, out_w, out_c = out_shape
    schedule: dict = {}
    if draw(st.booleans()):
        schedule["k_block"] = draw(st.sampled_from([4, 8, 16, 32]))
    if draw(st.booleans()):
        schedule["h_block"] = draw(st.integers(1, max(out_h, 1)))
    if draw(st.booleans()):
        schedule["w_block"] = draw(st.integers(1, max(out_w, 1)))
    mode = draw(st.sampled_from(["splits", "budget", "default"]))
    if mode == "splits" and "h_block" in schedule:
        schedule["h_split"] = draw(st.integers(1, math.ceil(out_h / schedule["h_block"])))
        schedule["k_split"] = 1
    elif mode == "budget":
        schedule["budget"] = draw(st.sampled_from(["256KiB", "1MiB", 2000000]))
    extra = draw(st.sampled_from(["none", "double_buffer", "reuse"]))
    if extra == "double_buffer":
        schedule["pipeline"] = "double_buffer"
    elif extra == "reuse":
        schedule["halo"] = "reuse"
    return schedule


# ---------------------------------------------------------------- hostile configs

EXTREMES = [0, -1, 1, 2**31 - 1, 2**31, 2**63, 10**30, -(10**30), 1e39, float("nan"), float("inf"), float("-inf"),
            0.5, True, False, None, "", "x" * 300, "same", [], [0], [1, 2, 3], {}, {"map": "x"}, "undef", "auto"]
NAMES = ["int", "main", "for", "memcpy", "exit", "nan", "float4", "texture", "k" * 300, "é", "a-b", "_x", "A", ""]
BROKEN_LAYOUTS = ["nhwc-0c", "nhwc-99999999999999999999999c", "nhwc-8q", "nhw", "nhwc-8h8h8h8h8h8h", "n, h, w, c",
                  "n, h, w, c -> n, h, w, c // 0", "n, h, w, c -> n, h, w, c % 10000000000000000000000",
                  "n, h, w, c -> n, |, |, h, w, c", "n, h, w, c -> " + "(" * 80 + "n" + ")" * 80 + ", h, w, c",
                  "n, h, w, c -> n, h, w, c * c", "n, h, w, c -> n, h, w // 2, c",
                  {"map": "n, h, w, c -> n, h, (w * 7 + c * 3) // 5, c", "pad_value": 0},
                  {"map": "n, h, w, c -> n, h, w, c", "pad_value": float("nan")}, "NCHW4c", "nchw-4c4c"]


def _paths(value, prefix=()):
    """Every path into a nested dict/list, with its value."""
    yield prefix, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _replace(data, path, value):
    """data with the value at path; missing mappings on the way are created, other misses ignored
    (an earlier mutation may have dropped or replaced what the path goes through)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {**data, head: _replace(data.get(head, {}), rest, value)}
    if isinstance(data, list) and isinstance(head, int) and head < len(data):
        copy = list(data)
        copy[head] = _replace(copy[head], rest, value)
        return copy
    return data


@st.composite
def hostile_texts(draw):
    """A valid config broken in one or two places: a value swapped for an extreme one, a key dropped,
    an unknown key, a broken layout, an odd name, YAML features, or raw byte damage."""
    case = draw(valid_configs(max_side=10, max_channels=40, chain=2))
    data = case.data
    for _ in range(draw(st.integers(1, 2))):
        paths = [p for p, _ in _paths(data) if p]
        kind = draw(st.sampled_from(["extreme", "extreme", "drop", "unknown", "layout", "name", "targets"]))
        path = draw(st.sampled_from(paths))
        if kind == "extreme":
            data = _replace(data, path, draw(st.sampled_from(EXTREMES)))
        elif kind == "drop" and isinstance(_get(data, path[:-1]), dict):
            parent = dict(_get(data, path[:-1]))
            parent.pop(path[-1], None)
            data = _replace(data, path[:-1], parent)
        elif kind == "unknown" and isinstance(_get(data, path[:-1]), dict) and path[:-1]:
            data = _replace(data, path[:-1], {**_get(data, path[:-1]), "strid": 1})
        elif kind == "layout":
            key = draw(st.sampled_from([("input", "layout"), ("output", "layout"),
                                        ("ops", 0, "conv2d", "filter_layout")]))
            data = _replace(data, key, draw(st.sampled_from(BROKEN_LAYOUTS)))
        elif kind == "name":
            data = {**data, "name": draw(st.sampled_from(NAMES))}
        elif kind == "targets":
            data = {**data, "targets": draw(st.sampled_from([["vulkn"], ["hvx"], ["opencl", "vulkan"], [], "c"]))}
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    damage = draw(st.sampled_from(["none", "none", "bytes", "yaml"]))
    raw = text.encode()
    if damage == "bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\t", b"\r", b":", b"[", b"&a", b"*a"])) + raw[at:]
    elif damage == "yaml":
        raw += draw(st.sampled_from([b"base: &b {x: 1}\nextra: {<<: *b}\n", b"deep: " + b"[" * 300 + b"]" * 300 + b"\n",
                                     b"loop: &l [*l]\n", b"---\nname: second\n", b"name: twice\n"]))
    return raw


def _get(data, path):
    """The value at path, or None where an earlier mutation removed the way there."""
    for key in path:
        if isinstance(data, dict) and key in data or isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return None
    return data
