"""`<network>.weights`: every weight a network's kernels take, packed by the target in each kernel's physical
layout, in one versioned little-endian file a program loads at run time (nothing at run time reads ONNX).

    offset  0  magic "KGWEIGHT"
            8  u32 format version (FORMAT)
           12  u32 byte-order mark 0x01020304 (a big-endian reader sees 0x04030201)
           16  32-byte SHA-256 digest: what the build is (below)
           48  u64 offset of the table of contents, u64 its bytes
           64  u64 offset of the data section (a multiple of ALIGNMENT), u64 its bytes
           80  the table of contents: UTF-8 JSON, for people and tools (the C side reads the offsets network.h names)
                 {"network", "target", "tensors": [{step, kernel, tensor, initializers, dtype, shape, offset, nbytes}]}
      data ..  each tensor at its offset from the data section's start, a multiple of ALIGNMENT; zeros between

The file ends with the data section. The digest covers the format, the target, the manifest's and every config's
bytes, the table of contents and the data section: a program compiled with one build's network.h refuses the
weights of any other (another model, config, layout or target), naming both digests (kg_weights.h).

The targets pack (Target.pack_weights: logical weights as ONNX holds them -> what the kernel function takes); the
logical weights come from the model through onnx/weights.py, the mapping validation uses too.
"""
from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import KernelgenError
from ..files import write_if_changed_bytes
from ..onnx.weights import model_weights
from .manifest import Network

if TYPE_CHECKING:
    from ..measure.primitives import Job

ALIGNMENT = 128  # bytes: each tensor starts on an HVX vector boundary (128 bytes; two 64-byte cache lines), as the
# hvx kernels load their filters and biases: an aligned HVX load drops the address's low 7 bits
MAGIC = b"KGWEIGHT"
FORMAT = 1
BYTE_ORDER_MARK = 0x01020304
HEADER = struct.Struct("<8sII32sQQQQ")  # magic, format, byte-order mark, digest, toc offset/bytes, data offset/bytes
DTYPES = ("float32", "float16", "int8", "uint8", "int32")


class WeightsError(KernelgenError):
    """A weights file that is not one, or not this build's (exit 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightTensor:
    step: int  # the manifest step index of the kernel that takes it
    kernel: str  # the kernel's config name
    tensor: str  # the kernel function's argument name (filter1, bias1, ...)
    initializers: tuple[str, ...]  # the ONNX initializer names it was made from
    dtype: str  # numpy dtype of the packed bytes: float32, float16, int8, uint8, int32
    shape: tuple[int, ...]  # the packed (physical) shape the kernel reads
    offset: int  # bytes from the data section's start, a multiple of ALIGNMENT
    nbytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightsPlan:
    network: str
    target: str
    tensors: tuple[WeightTensor, ...]
    data_bytes: int
    digest: bytes  # SHA-256 over the manifest, every config and the packed weights: what a build is

    @property
    def digest_hex(self) -> str:
        return self.digest.hex()

    def of(self, step: int) -> dict[str, WeightTensor]:
        """A kernel step's tensors by argument name."""
        return {t.tensor: t for t in self.tensors if t.step == step}


def pack_network_weights(network: Network, jobs: Mapping[str, Job], target: Any) -> tuple[WeightsPlan, bytes]:
    """The plan and the data section: kernel by kernel in step order, each of its weights (filter1, bias1, filter2,
    ...) as `target.pack_weights` packs the model's values for the kernel's job (`jobs`: by config name)."""
    tensors: list[WeightTensor] = []
    data = bytearray()
    for step in network.kernels:
        config = step.config
        job = jobs.get(config.name)
        if job is None:
            raise KernelgenError(f"network {network.name}: no {target.name} job for kernel {config.name}")
        logical = model_weights(config)
        packed = target.pack_weights(job, {name: w.values for name, w in logical.items()})
        if set(packed) != set(logical):
            raise KernelgenError(f"the {target.name} target packed {sorted(packed)} for kernel {config.name}, "
                                 f"whose weights are {sorted(logical)}")
        for name, model in logical.items():
            array = np.ascontiguousarray(packed[name])
            if array.dtype.name not in DTYPES:
                raise KernelgenError(f"kernel {config.name}: {name} packed as {array.dtype}; a weights file holds "
                                     f"{', '.join(DTYPES)}")
            data += bytes(-len(data) % ALIGNMENT)
            tensors.append(WeightTensor(step=step.index, kernel=config.name, tensor=name,
                                        initializers=model.initializers, dtype=array.dtype.name,
                                        shape=tuple(int(n) for n in array.shape), offset=len(data),
                                        nbytes=array.nbytes))
            data += array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
    data += bytes(-len(data) % ALIGNMENT)
    plan = WeightsPlan(network=network.name, target=target.name, tensors=tuple(tensors), data_bytes=len(data),
                       digest=b"")
    digest = _digest(network, plan, bytes(data))
    return WeightsPlan(network=plan.network, target=plan.target, tensors=plan.tensors, data_bytes=plan.data_bytes,
                       digest=digest), bytes(data)


def _digest(network: Network, plan: WeightsPlan, data: bytes) -> bytes:
    h = hashlib.sha256()

    def part(chunk: bytes) -> None:  # length-prefixed: no two sequences of parts hash alike
        h.update(struct.pack("<Q", len(chunk)) + chunk)

    part(MAGIC + struct.pack("<I", FORMAT))
    part(plan.target.encode())
    part(Path(network.path).read_bytes())
    for step in network.kernels:
        part(step.config.name.encode())
        part(Path(step.config.file or step.config.path).read_bytes())
    part(_toc(plan))
    part(data)
    return h.digest()


def _toc(plan: WeightsPlan) -> bytes:
    return json.dumps({"network": plan.network, "target": plan.target, "tensors": [
        {"step": t.step, "kernel": t.kernel, "tensor": t.tensor, "initializers": list(t.initializers),
         "dtype": t.dtype, "shape": list(t.shape), "offset": t.offset, "nbytes": t.nbytes} for t in plan.tensors]},
        indent=1).encode() + b"\n"


def weights_file(plan: WeightsPlan, data: bytes) -> bytes:
    """The whole file's bytes."""
    toc = _toc(plan)
    start = HEADER.size + len(toc)
    data_offset = start + -start % ALIGNMENT
    header = HEADER.pack(MAGIC, FORMAT, BYTE_ORDER_MARK, plan.digest, HEADER.size, len(toc), data_offset, len(data))
    return header + toc + bytes(data_offset - start) + data


def write_weights(path: str | Path, plan: WeightsPlan, data: bytes) -> None:
    """Atomically (a temp file renamed), and not at all when the file already holds these bytes."""
    write_if_changed_bytes(Path(path), weights_file(plan, data))


def read_weights(path: str | Path) -> tuple[WeightsPlan, memoryview]:
    """A weights file's plan and data section, after checking its magic, format, byte order and sizes."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise WeightsError(f"{path}: cannot read: {error.strerror}") from None
    return parse_weights(raw, str(path))


def parse_weights(raw: bytes, name: str = "weights") -> tuple[WeightsPlan, memoryview]:
    if raw[:len(MAGIC)] != MAGIC:
        raise WeightsError(f"{name}: not a kernelgen weights file (expected it to start with {MAGIC.decode()})")
    if len(raw) < HEADER.size:
        raise WeightsError(f"{name}: {len(raw)} bytes, shorter than the header (a truncated or damaged file)")
    magic, version, mark, digest, toc_offset, toc_bytes, data_offset, data_bytes = HEADER.unpack_from(raw)
    if mark != BYTE_ORDER_MARK:
        raise WeightsError(f"{name}: byte-order mark {mark:#010x}, expected {BYTE_ORDER_MARK:#010x} (little-endian)")
    if version != FORMAT:
        raise WeightsError(f"{name}: weights format {version}; this kernelgen reads format {FORMAT}")
    if data_offset % ALIGNMENT or data_offset + data_bytes != len(raw) or toc_offset + toc_bytes > data_offset:
        raise WeightsError(f"{name}: {len(raw)} bytes, but its header puts the data section at {data_offset} for "
                           f"{data_bytes} bytes (a truncated or damaged file)")
    try:
        toc = json.loads(raw[toc_offset:toc_offset + toc_bytes])
        tensors = tuple(WeightTensor(step=t["step"], kernel=t["kernel"], tensor=t["tensor"],
                                     initializers=tuple(t["initializers"]), dtype=t["dtype"], shape=tuple(t["shape"]),
                                     offset=t["offset"], nbytes=t["nbytes"]) for t in toc["tensors"])
        plan = WeightsPlan(network=toc["network"], target=toc["target"], tensors=tensors, data_bytes=data_bytes,
                           digest=digest)
    except (ValueError, KeyError, TypeError) as error:
        raise WeightsError(f"{name}: its table of contents does not read: {error}") from None
    return plan, memoryview(raw)[data_offset:]


def tensor_array(data: memoryview | bytes, tensor: WeightTensor) -> np.ndarray:
    """One tensor of a data section, as the kernel reads it."""
    return np.frombuffer(data, np.dtype(tensor.dtype).newbyteorder("<"), count=int(np.prod(tensor.shape)),
                         offset=tensor.offset).reshape(tensor.shape)
