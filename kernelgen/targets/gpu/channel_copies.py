"""The channel steps a GPU network copies (a slice, a shuffle, a concat whose inputs cannot sit inside its output:
concat_alias.py) as dispatches: one per part (network/channel_copy.step_parts: a channel range of one input into
channels of the output, every g-th for a shuffle), each work-item moving one element of NCHW float32 buffers. Pure.

A part of n images of `channels` channels and h * w pixels is n * channels * h * w work-items in groups of 64 (one
element each: no loop, nothing for an emulator's loop limits to cut short), the groups laid along x and, past
65,535 of them (the spec's minimum maxComputeWorkGroupCount), y. Element i is pixel i % hw of channel
(i / hw) % channels of image i / (hw * channels); it goes from channel from + c of the input to channel to + c * step
of the output. The API's source (a GLSL shader compiled with the part's numbers as defines, an OpenCL kernel
function per part) reads like that formula; these records give the numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...network.channel_copy import step_parts
from ...network.manifest import Network, Step
from .concat_alias import Placement
from .dispatch import GpuDispatch, GpuTensor, Role, TensorKind

WORK_GROUP = 64
MAX_GROUPS = 65535  # per axis: Vulkan's and OpenCL devices' smallest allowed limit
ELEMENT_BYTES = 4  # float32: what the copies move (a float16 network's channel steps are not copied yet)


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyPart:
    name: str  # the kernel function / shader label: copy<step>_<part>
    step: int
    source: str  # the input's ONNX name
    output: str
    images: int
    hw: int
    channels: int
    from_channels: int  # the input's channels
    from_channel: int
    to_channels: int  # the output's
    to_channel: int
    to_step: int

    kind = "copy"  # (resize_parts.ResizePart: "resize")

    @property
    def elements(self) -> int:
        return self.images * self.channels * self.hw

    @property
    def dispatch(self) -> GpuDispatch:
        return element_dispatch(self.name, self.elements)

    @property
    def spans(self) -> dict[str, tuple[int, int]]:
        """The bytes of each binding it touches (from the tensor's start), where less than all: in a batch of one a
        channel range is one byte range, so the parts of one concat write apart and need no barrier between them."""
        if self.images != 1:
            return {}
        plane = self.hw * ELEMENT_BYTES
        last = self.to_channel + (self.channels - 1) * self.to_step
        return {"input": (self.from_channel * plane, (self.from_channel + self.channels) * plane),
                "output": (self.to_channel * plane, (last + 1) * plane)}

    @property
    def defines(self) -> dict[str, str]:
        """The numbers the GLSL shader is compiled with (-D), and the OpenCL function spells out."""
        return {"KG_ELEMENTS": f"{self.elements}u", "KG_ACROSS": f"{self.dispatch.groups[0]}u",
                "KG_HW": f"{self.hw}u", "KG_CHANNELS": f"{self.channels}u",
                "KG_FROM_CHANNELS": f"{self.from_channels}u", "KG_FROM": f"{self.from_channel}u",
                "KG_TO_CHANNELS": f"{self.to_channels}u", "KG_TO": f"{self.to_channel}u",
                "KG_STEP": f"{self.to_step}u"}

    def tensors(self, network: Network) -> tuple[GpuTensor, GpuTensor]:
        """The two buffers it binds, as a kernel's launch declares them."""
        return buffer_pair(network, self.source, self.output)


def element_dispatch(name: str, elements: int) -> GpuDispatch:
    """A dispatch of one work-item per element: groups of WORK_GROUP along x, and y past MAX_GROUPS of them."""
    groups = -(-elements // WORK_GROUP)
    across = min(groups, MAX_GROUPS)
    return GpuDispatch(kernel=name, tensors=("input", "output"), work_group=(WORK_GROUP, 1, 1),
                       groups=(across, -(-groups // across), 1))


def buffer_pair(network: Network, source: str, output: str) -> tuple[GpuTensor, GpuTensor]:
    """The input and output buffers such a dispatch binds, as a kernel's launch declares them."""
    return tuple(GpuTensor(name=name, role=Role(name), elements=math.prod(network.tensors[t].shape),
                           kind=TensorKind.BUFFER) for name, t in (("input", source), ("output", output)))


def copied_steps(network: Network, placement: Placement) -> tuple[Step, ...]:
    """The channel steps the GPU network copies: every slice and shuffle, and the concats not placed."""
    return tuple(s for s in network.steps if s.kind in ("slice", "shuffle") or s.index in placement.copied)


def copy_parts(network: Network, step: Step) -> tuple[CopyPart, ...]:
    out = network.tensors[step.outputs[0]]
    n, to_channels, h, w = out.shape
    return tuple(CopyPart(name=f"copy{step.index}_{k}", step=step.index, source=source, output=out.name, images=n,
                          hw=h * w, channels=channels, from_channels=network.tensors[source].shape[1],
                          from_channel=first, to_channels=to_channels, to_channel=to, to_step=to_step)
                 for k, (source, first, to, channels, to_step) in enumerate(step_parts(network, step)))


def copy_refusal(network: Network, placement: Placement, element_bytes) -> str:
    """Why a copied step cannot be dispatched ("" when every one can): its tensors must be NCHW float32 buffers."""
    resized = tuple(s for s in network.steps if s.resize is not None)
    for step in (*copied_steps(network, placement), *resized):
        for name in (*step.inputs, *step.outputs):
            tensor = network.tensors[name]
            if (tensor.layout or "NCHW") != "NCHW" or element_bytes(name) != ELEMENT_BYTES:
                what = "(a resize) is computed" if step.resize is not None else f"({step.kind} of channels) is copied"
                return (f"step {step.index} {what} on the device, which takes NCHW float32 buffers; {name!r} is "
                        f"{tensor.layout or 'NCHW'} in {element_bytes(name)}-byte elements")
    return ""
