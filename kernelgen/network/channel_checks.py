"""The manifest's checks of the steps that move channels without computing, which kernelgen runs as copies:
`concat: channels`, `slice: {start, stop}` and `shuffle: {groups}` (network/channel_copy.py). Each problem goes to
`fail(keys, message)` at its key; the tensors are the manifest's, already known to exist."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence


class Tensor(Protocol):  # manifest.Tensor, as these checks read it
    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None
    zero_point: int | None

Fail = Callable[[tuple, str], None]


def check_channel_step(kind: str, k: int, inputs: Sequence[Tensor], outputs: Sequence[Tensor], fail: Fail,
                       start: int = 0, stop: int = 0, groups: int = 0) -> None:
    """NCHW images of one batch, height and width and one dtype (a uint8 input of another scale or zero point than
    the output is requantized: channel_copy.requantize_table); a concat's channels adding up to its output's, a
    slice's range inside its input, a shuffle's groups dividing its channels."""
    spelled = {"concat": "concat: channels", "slice": "slice", "shuffle": "shuffle"}[kind]
    if len(outputs) != 1 or (kind != "concat" and len(inputs) != 1):
        fail(("steps", k), f"expected {'one input and ' if kind != 'concat' else ''}one output for {spelled}, got "
                           f"{len(inputs)} and {len(outputs)}")
        return
    result = outputs[0]
    for where, tensor in (*((("inputs", i), t) for i, t in enumerate(inputs)), (("outputs", 0), result)):
        if len(tensor.shape) != 4:
            fail(("steps", k, *where), f"expected an NCHW image for {spelled}, got {tensor.name!r} of shape "
                                       f"{list(tensor.shape)}")
            return
        if tensor.dtype != result.dtype:
            fail(("steps", k, *where), f"dtype mismatch: {tensor.name!r} is {tensor.dtype}, the {kind}'s output "
                                       f"{result.name!r} {result.dtype} (a {kind} copies)")
        elif tensor.dtype == "uint8" and None in (tensor.scale, tensor.zero_point):
            fail(("steps", k, *where), f"expected a scale and zero point on {tensor.name!r} (a uint8 {kind} "
                                       f"requantizes the inputs whose differ from its output's)")
    n, _, h, w = result.shape
    for i, tensor in enumerate(inputs):
        if (tensor.shape[0], *tensor.shape[2:]) != (n, h, w):
            fail(("steps", k, "inputs", i), f"shape mismatch: {tensor.name!r} is {list(tensor.shape)}; the output's "
                                            f"batch, height and width are {[n, h, w]}")
    have = inputs[0].shape[1]
    if kind == "concat":
        channels = sum(t.shape[1] for t in inputs)
        if channels != result.shape[1]:
            fail(("steps", k, "outputs", 0), f"shape mismatch: the inputs' channels add up to {channels}, the output "
                                             f"{result.name!r} has {result.shape[1]}")
    elif kind == "slice":
        if not 0 <= start < stop <= have:
            fail(("steps", k, "slice"), f"expected 0 <= start < stop <= {have} (the channels of {inputs[0].name!r}), "
                                        f"got start {start}, stop {stop}")
        elif stop - start != result.shape[1]:
            fail(("steps", k, "outputs", 0), f"shape mismatch: channels {start}..{stop - 1} are {stop - start}, the "
                                             f"output {result.name!r} has {result.shape[1]}")
    else:
        if have % groups:
            fail(("steps", k, "shuffle", "groups"), f"expected a divisor of {have} (the channels of "
                                                    f"{inputs[0].name!r}), got {groups}")
        elif result.shape[1] != have:
            fail(("steps", k, "outputs", 0), f"shape mismatch: a shuffle keeps its {have} channels, the output "
                                             f"{result.name!r} has {result.shape[1]}")
