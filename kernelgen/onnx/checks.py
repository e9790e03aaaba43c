"""Is an ONNX Conv (or QLinearConv) node one onnxruntime would run? Its attributes and weights checked against
the input they read, as onnxruntime's Conv checks them (conv_attributes.h: ValidateInputShape, ComputeKernelShape,
InferPadsAndOutputShape; conv.cc: the bias), before kernelgen reads the node as conv2d keys.

A model onnxruntime refuses is not one kernelgen should import: its config would plan (kernelgen's conv2d is
well defined for the shapes it was given) and then disagree with the model it came from, or with nothing,
since the oracle cannot run it. Each check returns why, with onnxruntime's own wording in parentheses, so the
importer lists the node as not imported with its reason.
"""
from __future__ import annotations

from typing import Any

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
INT32_MAX = 2 ** 31 - 1


def conv_problem(attrs: dict[str, Any], weight: tuple[int, ...], bias: tuple[int, ...] | None,
                 in_shape: tuple[int, ...]) -> str:
    """Why onnxruntime would refuse a 2-D conv with these attributes, OIHW weights of shape `weight`, a bias of
    shape `bias` (None: no bias) on an NCHW input of shape `in_shape`; "" when it would run it."""
    m, per_group, kh, kw = weight
    channels = in_shape[1]
    if min(weight) < 1:
        return f"its weights {list(weight)} are empty (a conv2d needs a channel and a tap)"
    problem = _attribute_problem(attrs, (kh, kw))
    if problem:
        return problem
    group = attrs.get("group", 1)
    if group < 1:
        return f"group {group}: expected a positive int (onnxruntime: group must be greater than 0)"
    if per_group * group != channels:
        return (f"its input has {channels} channels but its weights {list(weight)} take {per_group} per group x "
                f"group {group} = {per_group * group} (onnxruntime: input channels C is not equal to kernel channels "
                f"* group)")
    if m % group:
        return (f"its {m} output channels are not divisible by group {group} (onnxruntime: output channels M is "
                f"not divisible by group)")
    if bias is not None and tuple(bias) != (m,):
        return (f"its bias has shape {list(bias)}, expected [{m}] (onnxruntime: bias must be a 1D tensor of size "
                f"output_channels)")
    if _auto_pad(attrs) in ("NOTSET", "VALID"):
        pads = attrs.get("pads", (0, 0, 0, 0)) if _auto_pad(attrs) == "NOTSET" else (0, 0, 0, 0)
        dilation = attrs.get("dilations", (1, 1))
        span = ((kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1)
        padded = (in_shape[2] + pads[0] + pads[2], in_shape[3] + pads[1] + pads[3])
        if span[0] > padded[0] or span[1] > padded[1]:
            return (f"its {kh}x{kw} kernel with dilations {list(dilation)} spans {span[0]}x{span[1]} pixels but its "
                    f"padded input is {padded[0]}x{padded[1]} (onnxruntime: invalid input shape)")
    return ""


def _auto_pad(attrs: dict[str, Any]) -> str:
    value = attrs.get("auto_pad", "NOTSET")
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _attribute_problem(attrs: dict[str, Any], kernel: tuple[int, int]) -> str:
    """Each attribute's own type, length and sign (onnx's Conv schema and shape inference)."""
    if _auto_pad(attrs) not in AUTO_PADS:
        return (f"auto_pad {_auto_pad(attrs)}: expected one of {', '.join(AUTO_PADS)} (onnxruntime: unknown "
                f"AutoPadType string)")
    if not isinstance(attrs.get("group", 1), int):
        return f"group {attrs['group']!r}: expected an int"
    for name, size, least, rule in (("kernel_shape", 2, 1, "must only contain positive values"),
                                    ("strides", 2, 1, "must only contain positive values"),
                                    ("dilations", 2, 1, "must only contain positive values"),
                                    ("pads", 4, 0, "must not contain negative values")):
        if name not in attrs:
            continue
        values = attrs[name]
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) for v in values) or len(values) != size:
            return f"{name} {_shown(values)}: expected {size} ints (onnxruntime: attribute {name} has incorrect size)"
        if min(values) < least:
            return f"{name} {list(values)}: expected {'positive' if least else 'non-negative'} values " \
                   f"(onnxruntime: attribute {name} {rule})"
        if max(values) > INT32_MAX:
            return f"{name} {list(values)}: beyond {INT32_MAX} (kernels index with 32-bit ints)"
    if "kernel_shape" in attrs and tuple(attrs["kernel_shape"]) != kernel:
        return (f"kernel_shape {list(attrs['kernel_shape'])} does not match its {kernel[0]}x{kernel[1]} weights "
                f"(onnxruntime: kernel_shape is not compatible with W shape)")
    return ""


def _shown(values: Any) -> str:
    return str(list(values)) if isinstance(values, (list, tuple)) else repr(values)
