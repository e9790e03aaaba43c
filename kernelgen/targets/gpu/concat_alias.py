"""Concat steps of a GPU network, at no cost where it can be: each input of a `concat: channels` step is placed
inside the output's device region, at its channels' bytes, so the kernel producing it writes the concatenation
directly and no copy is dispatched. Pure.

NCHW with a batch of one keeps an image's channels one after another, so a channel range of the output is one
contiguous byte range: the input tensor itself. That needs, checked here from the manifest:
- every tensor of the step NCHW (what `kernelgen import` writes for the GPU targets) with a batch of one;
- each input in one concat only, once, and not the network's own input or output (those live in their own
  allocations, which the host fills and reads);
- each input's byte offset in the output a multiple of the regions' binding alignment (a Vulkan storage buffer's
  offset, an OpenCL sub-buffer's origin): GoogLeNet's and SqueezeNet's branches are (every channel count a multiple
  of 16 at 14x14, of 64 at 7x7); DenseNet's is not, and every layer's output is an input of each later layer's Concat.
A concat that fails one of them is copied instead (channel_copies.py: a dispatch per input), and the placement says
why. A concat of concats nests: an inner output's inputs sit inside the outer output. Overlapping regions need
nothing more: the plan's barriers follow the regions' byte ranges, so a kernel reading the output waits for every
kernel that wrote a part of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...network.manifest import Network, Step


@dataclass(frozen=True, slots=True)
class Alias:
    tensor: str  # a concat step's input
    within: str  # the tensor whose region holds it: the outermost concat's output
    offset: int  # bytes from that region's start


@dataclass(frozen=True, slots=True)
class Placement:
    aliases: dict[str, Alias]  # each placed concat input, by name
    copied: dict[int, str]  # each concat step that is copied instead, by index: why its inputs cannot be placed


def concat_aliases(network: Network, element_bytes: Callable[[str], int], alignment: int) -> Placement:
    """Each placeable concat input's place inside its (outermost placed) concat's output; the concats that are
    copied instead, and why. `element_bytes`: a tensor's device element size (its kernels' storage type)."""
    direct: dict[str, tuple[str, int]] = {}  # input -> (the concat's output, byte offset in it)
    copied = {}
    outputs: dict[str, Step] = {}  # a placed concat's output -> its step
    for step in (s for s in network.steps if s.concat):
        placed: dict[str, tuple[str, int]] = {}
        prefix = _prefix(step, direct, outputs)
        why = _refusal(network, step, element_bytes, alignment, direct, placed, prefix)
        if why:
            copied[step.index] = f"concat step {step.index} cannot be placed in device memory without a copy: {why}"
        else:
            direct |= placed
            outputs[step.outputs[0]] = step
    aliases = {}
    for name in direct:
        within, offset = direct[name]
        while within in direct:  # a concat of concats: up to the outermost output
            outer, more = direct[within]
            within, offset = outer, offset + more
        aliases[name] = Alias(tensor=name, within=within, offset=offset)
    return Placement(aliases=aliases, copied=copied)


def _prefix(step: Step, direct: dict[str, tuple[str, int]], outputs: dict[str, Step]) -> Step | None:
    """The placed concat whose inputs begin this one's, in order, and whose output is placed nowhere else yet:
    DenseNet's layer k concatenates what layer k - 1 did and one tensor more, so each concat's output is the
    first bytes of the next one's, and the whole block's features sit once, in the last concat's region."""
    if not step.inputs or step.inputs[0] not in direct:
        return None
    within = direct[step.inputs[0]][0]
    while within in direct:  # the outermost placed output holding it
        within = direct[within][0]
    earlier = outputs.get(within)
    if earlier is None or tuple(step.inputs[:len(earlier.inputs)]) != tuple(earlier.inputs):
        return None
    return earlier


def _refusal(network: Network, step: Step, element_bytes: Callable[[str], int], alignment: int,
             direct: dict[str, tuple[str, int]], placed: dict[str, tuple[str, int]], prefix: Step | None) -> str:
    out = network.tensors[step.outputs[0]]
    size = element_bytes(out.name)
    offset = 0
    inputs = step.inputs
    if prefix is not None:  # its output, holding its inputs, is this one's first bytes
        inputs = (prefix.outputs[0], *step.inputs[len(prefix.inputs):])
    for name in inputs:
        tensor = network.tensors[name]
        if any((t.layout or "NCHW") != "NCHW" for t in (tensor, out)):
            return f"{name!r} or {out.name!r} is not held NCHW (the GPU targets' import writes NCHW)"
        if out.shape[0] != 1:
            return f"a batch of {out.shape[0]}: an image's channels are one byte range only in a batch of one"
        if name in network.inputs or name in network.outputs:
            return f"{name!r} is the network's own input or output, which the host fills or reads in place"
        if name in direct or name in placed:
            return (f"{name!r} is an input of two concats (or twice of one): its bytes can sit in one place only "
                    f"(DenseNet's layers feed every later layer's Concat)")
        if element_bytes(name) != size:
            return f"{name!r} and {out.name!r} are stored in elements of different sizes"
        if offset % alignment:
            return (f"{name!r} would start {offset} bytes into {out.name!r}, not a multiple of the {alignment}-byte "
                    f"alignment a region's binding needs")
        placed[name] = (out.name, offset)
        offset += math.prod(tensor.shape) * size
    return ""
