"""Vulkan toolchain: GLSL -> SPIR-V (glslangValidator, spirv-val, spirv-dis), the devices
the loader sees, and the FMA peak probe. Dispatches run in vulkan_runtime.py, whose
public names (VulkanRunner, Stage, RunResult) are re-exported here on first use.
Neither module imports the `vulkan` binding at import time.

lavapipe (Mesa's CPU driver, the device on hosts without a GPU) facts the planner must
respect, checked by tests/test_vulkan_harness.py:
- an invocation stops looping after 65,535 loop back-edges in total, silently, so a
  kernel whose per-invocation trip counts add up to more computes wrong results;
- subgroup size 8: one 256-bit register holds 8 invocations' floats.

Two facts about the binding shape the device code:
- a struct constructor keeps the memory behind its pointer fields (the `pName`
  string, arrays of nested structs) alive only while the Python struct object lives,
  so every create-info is parked in a `Scope` until the objects it made are destroyed;
- a field given a falsy value (0, False, None) is left zero, which is always the default.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from kernelgen.errors import ToolchainError
from kernelgen.toolchains.status import ToolStatus

if TYPE_CHECKING:
    from kernelgen.toolchains.vulkan_runtime import RunResult, Stage, VulkanRunner

__all__ = [
    "DeviceInfo", "FmaProbe", "RunResult", "Stage", "ToolStatus", "VulkanRunner", "available", "compile_glsl",
    "disassemble", "fma_peak_gflops", "fma_probe", "list_devices", "status",
]
_RUNTIME_NAMES = ("RunResult", "Stage", "VulkanRunner")

# glslang's vulkan1.1 target emits SPIR-V 1.3, which every Vulkan 1.1+ driver accepts.
TARGET_ENV = "vulkan1.1"
_INSTALL = {
    "glslangValidator": "apt-get install glslang-tools",
    "spirv-val": "apt-get install spirv-tools",
    "spirv-dis": "apt-get install spirv-tools",
    "python:vulkan": "pip install vulkan",
    "vulkan-device": "apt-get install libvulkan1 mesa-vulkan-drivers (lavapipe, a CPU device)",
}
_STAGES = ("comp", "vert", "frag", "geom", "tesc", "tese")
_MACRO = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOOL_TIMEOUT_S = 120
_API_1_2 = 1 << 22 | 2 << 12
# Features a generated kernel may use (f16/i8 arithmetic and storage), enabled when
# supported. Everything else stays off, robustBufferAccess included, so that
# out-of-bounds bugs are not masked and timings are not slowed by bounds checks.
_FEATURES = {
    "VkPhysicalDeviceFeatures": ("shaderInt16", "shaderInt64", "shaderFloat64"),
    "VkPhysicalDeviceVulkan11Features": (
        "storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess", "storagePushConstant16"),
    "VkPhysicalDeviceVulkan12Features": (
        "shaderFloat16", "shaderInt8", "storageBuffer8BitAccess",
        "uniformAndStorageBuffer8BitAccess", "storagePushConstant8"),
}


def import_vulkan() -> ModuleType:
    """The `vulkan` binding, or a ToolchainError saying what to install."""
    try:
        import vulkan
    except ImportError as exc:
        raise ToolchainError("python package 'vulkan' is missing: pip install vulkan") from exc
    except OSError as exc:  # the binding dlopens libvulkan.so.1 while importing
        raise ToolchainError(f"the Vulkan loader cannot be loaded ({exc}): "
                             "apt-get install libvulkan1 mesa-vulkan-drivers") from exc
    return vulkan


@contextmanager
def vk_errors(vk: ModuleType, what: str) -> Iterator[None]:
    """Turn the binding's result-code exceptions into a ToolchainError naming the step."""
    try:
        yield
    except (vk.VkError, vk.VkException) as exc:
        raise ToolchainError(f"Vulkan {what} failed: {type(exc).__name__}") from exc


class Scope:
    """Destroy callbacks, run in reverse order on close, and the cffi objects they need."""

    def __init__(self) -> None:
        self.keep: list[Any] = []
        self._undo: list[Callable[[], None]] = []

    def hold(self, obj: Any) -> Any:
        self.keep.append(obj)
        return obj

    def on_close(self, undo: Callable[[], None]) -> None:
        self._undo.append(undo)

    def abandon(self) -> None:
        """Forget the callbacks: work still in flight may use the objects, so leak them."""
        self._undo.clear()

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()
        self.keep.clear()


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    index: int  # position in the loader's device list
    name: str
    driver: str
    shader_float16: bool
    storage_16bit: bool
    subgroup_size: int
    timestamp_period_ns: float
    max_workgroup_size: tuple[int, int, int]
    max_workgroup_invocations: int
    api_version: str = ""
    shader_int8: bool = False
    shader_int64: bool = False  # 64-bit integers in shaders (the vulkan target's wide stores)
    storage_8bit: bool = False
    max_shared_memory_bytes: int = 0
    max_push_constant_bytes: int = 0
    max_uniform_buffer_bytes: int = 0
    max_texel_buffer_elements: int = 0
    timestamps: bool = False  # the chosen compute queue family has timestampValidBits > 0


@dataclass(frozen=True, slots=True)
class PhysicalDevice:
    """A device as probed: its info plus what device creation needs."""

    handle: Any
    info: DeviceInfo
    queue_family: int
    timestamp_mask: int
    enable: dict[str, dict[str, bool]]


def create_instance(vk: ModuleType, scope: Scope) -> Any:
    app = scope.hold(vk.VkApplicationInfo(pApplicationName="kernelgen", pEngineName="kernelgen",
                                          apiVersion=_API_1_2))
    create = scope.hold(vk.VkInstanceCreateInfo(pApplicationInfo=app))
    with vk_errors(vk, "instance creation (apt-get install mesa-vulkan-drivers?)"):
        instance = vk.vkCreateInstance(create, None)
    scope.on_close(lambda: vk.vkDestroyInstance(instance, None))
    return instance


def _probe(vk: ModuleType, index: int, handle: Any) -> PhysicalDevice:
    v11 = vk.VkPhysicalDeviceVulkan11Properties()
    v12 = vk.VkPhysicalDeviceVulkan12Properties(pNext=v11)
    props2 = vk.VkPhysicalDeviceProperties2(pNext=v12)
    vk.vkGetPhysicalDeviceProperties2(handle, props2)
    f11 = vk.VkPhysicalDeviceVulkan11Features()
    f12 = vk.VkPhysicalDeviceVulkan12Features(pNext=f11)
    features2 = vk.VkPhysicalDeviceFeatures2(pNext=f12)
    vk.vkGetPhysicalDeviceFeatures2(handle, features2)
    found = {"VkPhysicalDeviceFeatures": features2.features,
             "VkPhysicalDeviceVulkan11Features": f11, "VkPhysicalDeviceVulkan12Features": f12}
    enable = {name: {f: bool(getattr(found[name], f)) for f in fields}
              for name, fields in _FEATURES.items()}

    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(handle)
    compute = [i for i, q in enumerate(families) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
    if not compute:
        raise ToolchainError(f"Vulkan device {index} has no compute queue")
    # Prefer a compute family that can write timestamps: they are how runs are timed.
    family = max(compute, key=lambda i: families[i].timestampValidBits > 0)
    bits = int(families[family].timestampValidBits)

    p = props2.properties
    size = p.limits.maxComputeWorkGroupSize
    info = DeviceInfo(
        index=index, name=vk.ffi.string(p.deviceName).decode(),
        driver=f"{vk.ffi.string(v12.driverName).decode()} {vk.ffi.string(v12.driverInfo).decode()}",
        shader_float16=bool(f12.shaderFloat16), storage_16bit=bool(f11.storageBuffer16BitAccess),
        subgroup_size=int(v11.subgroupSize), timestamp_period_ns=float(p.limits.timestampPeriod),
        max_workgroup_size=(int(size[0]), int(size[1]), int(size[2])),
        max_workgroup_invocations=int(p.limits.maxComputeWorkGroupInvocations),
        api_version=f"{p.apiVersion >> 22}.{p.apiVersion >> 12 & 0x3FF}.{p.apiVersion & 0xFFF}",
        shader_int8=bool(f12.shaderInt8), storage_8bit=bool(f12.storageBuffer8BitAccess),
        shader_int64=bool(features2.features.shaderInt64),
        max_shared_memory_bytes=int(p.limits.maxComputeSharedMemorySize),
        max_push_constant_bytes=int(p.limits.maxPushConstantsSize),
        max_uniform_buffer_bytes=int(p.limits.maxUniformBufferRange),
        max_texel_buffer_elements=int(p.limits.maxTexelBufferElements), timestamps=bits > 0)
    return PhysicalDevice(handle, info, family, (1 << bits) - 1, enable)


def physical_devices(vk: ModuleType, instance: Any) -> list[PhysicalDevice]:
    """Devices offering Vulkan 1.2 (every current desktop driver and lavapipe do); the
    1.1/1.2 property and feature structs this module reads need it."""
    with vk_errors(vk, "device enumeration"):
        handles = vk.vkEnumeratePhysicalDevices(instance)
        return [_probe(vk, i, h) for i, h in enumerate(handles)
                if vk.vkGetPhysicalDeviceProperties(h).apiVersion >= _API_1_2]


def list_devices() -> tuple[DeviceInfo, ...]:
    """Every Vulkan 1.2 device the loader sees, in loader order."""
    vk = import_vulkan()
    scope = Scope()
    try:
        return tuple(p.info for p in physical_devices(vk, create_instance(vk, scope)))
    finally:
        scope.close()


def pick_device(devices: list[PhysicalDevice], device: int | str | None) -> PhysicalDevice:
    if not devices:
        raise ToolchainError("no Vulkan 1.2 device found: apt-get install mesa-vulkan-drivers "
                             "(lavapipe, a CPU device)")
    matches = [p for p in devices if device is None or device == p.info.index
               or isinstance(device, str) and device.lower() in p.info.name.lower()]
    if not matches:
        names = ", ".join(f"{p.info.index}: {p.info.name}" for p in devices)
        raise ToolchainError(f"no Vulkan device {device!r}; devices are {names}")
    return matches[0]


def _run_tool(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one tool in `cwd`; a missing executable becomes a ToolchainError with a hint."""
    if shutil.which(argv[0]) is None:
        raise ToolchainError(f"{argv[0]} not found: {_INSTALL[argv[0]]}")
    try:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                              timeout=_TOOL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"{argv[0]} did not finish within {_TOOL_TIMEOUT_S} s") from exc


def _tool_version(name: str, flag: str) -> ToolStatus:
    hint = _INSTALL[name]
    if shutil.which(name) is None:
        return ToolStatus(name, False, "", hint)
    try:
        out = subprocess.run([name, flag], capture_output=True, text=True,
                             timeout=_TOOL_TIMEOUT_S, check=False).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return ToolStatus(name, False, f"does not run: {exc}", hint)
    return ToolStatus(name, True, (out.strip().splitlines() or [""])[0], hint)


def _binding_status() -> ToolStatus:
    hint = _INSTALL["python:vulkan"]
    try:
        version = importlib.metadata.version("vulkan")
        import_vulkan()
    except importlib.metadata.PackageNotFoundError:
        return ToolStatus("python:vulkan", False, "", hint)
    except ToolchainError as exc:  # installed, but libvulkan.so.1 is missing
        return ToolStatus("python:vulkan", False, str(exc), hint)
    return ToolStatus("python:vulkan", True, version, hint)


def _device_status() -> ToolStatus:
    hint = _INSTALL["vulkan-device"]
    try:
        devices = list_devices()
    except ToolchainError as exc:
        return ToolStatus("vulkan-device", False, str(exc), hint)
    if not devices:
        return ToolStatus("vulkan-device", False, "no Vulkan 1.2 device", hint)
    first = devices[0]
    return ToolStatus("vulkan-device", True,
                      f"{first.name}; {first.driver}; Vulkan {first.api_version}", hint)


def status() -> tuple[ToolStatus, ...]:
    """glslangValidator, spirv-val, spirv-dis, the `vulkan` package and the first device.

    Never raises: a failed probe is reported as not found, with the reason as version.
    """
    return (_tool_version("glslangValidator", "-dumpfullversion"),
            _tool_version("spirv-val", "--version"),
            _tool_version("spirv-dis", "--version"),
            _binding_status(),
            _device_status())


def available() -> bool:
    """Whether compile_glsl, disassemble and VulkanRunner can all work here."""
    return all(s.found for s in status())


def compile_glsl(source: str, *, stage: str = "comp",
                 defines: dict[str, str] | None = None) -> bytes:
    """GLSL source -> validated SPIR-V bytes, cached on disk by content (like ccache).

    `kernelgen build` compiles every shader for its SPIR-V golden; the cache keeps repeated
    builds within the tool's speed budget. The key covers the source, stage, defines and the
    compiler's version, so a new glslang never serves stale SPIR-V.
    """
    key = hashlib.sha256(repr((source, stage, sorted((defines or {}).items()), _glslang_version())).encode())
    cached = _cache_dir() / f"{key.hexdigest()}.spv"
    try:
        return cached.read_bytes()
    except OSError:
        pass
    spirv = _compile_uncached(source, stage=stage, defines=defines)
    try:
        from ..files import write_if_changed_bytes

        write_if_changed_bytes(cached, spirv)
    except OSError:
        pass  # a read-only cache folder only costs speed
    return spirv


def _cache_dir() -> Path:
    root = os.environ.get("KERNELGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelgen")
    return Path(root) / "spirv"


@functools.lru_cache(maxsize=1)
def _glslang_version() -> str:
    done = subprocess.run(["glslangValidator", "--version"], capture_output=True, text=True) \
        if shutil.which("glslangValidator") else None
    return done.stdout.strip() if done else ""


def _compile_uncached(source: str, *, stage: str, defines: dict[str, str] | None) -> bytes:
    """Compiles in a temporary directory under the fixed name kernel.<stage>, so that error
    messages ("ERROR: kernel.comp:3: 'y' : undeclared identifier") do not depend on it."""
    if stage not in _STAGES:
        raise ToolchainError(f"unknown shader stage {stage!r}; expected {', '.join(_STAGES)}")
    bad = [name for name in defines or {} if not _MACRO.match(name)]
    if bad:
        raise ToolchainError(f"invalid macro names {bad}")
    flags = [f"-D{name}={value}" for name, value in sorted((defines or {}).items())]
    with tempfile.TemporaryDirectory(prefix="kernelgen-glsl-") as tmp:
        cwd = Path(tmp)
        (cwd / f"kernel.{stage}").write_text(source, encoding="utf-8")
        done = _run_tool(["glslangValidator", "-V", "--target-env", TARGET_ENV, *flags,
                          "-o", "kernel.spv", f"kernel.{stage}"], cwd)
        if done.returncode != 0:
            raise ToolchainError(f"glslangValidator failed:\n{(done.stdout + done.stderr).strip()}")
        checked = _run_tool(["spirv-val", "--target-env", TARGET_ENV, "kernel.spv"], cwd)
        if checked.returncode != 0:
            raise ToolchainError(f"spirv-val rejected the SPIR-V:\n"
                                 f"{(checked.stdout + checked.stderr).strip()}")
        return (cwd / "kernel.spv").read_bytes()


def disassemble(spirv: bytes) -> str:
    """spirv-dis text without the header comments.

    The header names the generator's version, so leaving it out keeps goldens stable
    across glslang releases that emit the same code.
    """
    with tempfile.TemporaryDirectory(prefix="kernelgen-spv-") as tmp:
        cwd = Path(tmp)
        (cwd / "kernel.spv").write_bytes(spirv)
        done = _run_tool(["spirv-dis", "--no-color", "--no-header", "-o", "kernel.spvasm",
                          "kernel.spv"], cwd)
        if done.returncode != 0:
            raise ToolchainError(f"spirv-dis failed:\n{(done.stdout + done.stderr).strip()}")
        return (cwd / "kernel.spvasm").read_text(encoding="utf-8")


# The FMA peak probe. llvmpipe runs 8 invocations per 256-bit register, so one vec4
# accumulator occupies 4 registers: 2 accumulators give 8 independent FMA chains
# (enough to cover 4-cycle latency on 2 FMA ports) and still fit 16 registers with m
# and c; 8 accumulators spilled and measured less than half the rate.
_FMA_ACCUMULATORS = 2
_FMA_UNROLL = 64  # FMAs per accumulator per loop trip, written out in the source
_FMA_TRIPS = 256  # loop trips (back-edges) per invocation: far below lavapipe's 65,535
_FMA_LOCAL_SIZE = 64
_FMA_GROUPS = 128  # 2.1 GFLOP per dispatch: about 27 ms at lavapipe's ~79 GFLOP/s


def _fma_source(accumulators: int, unroll: int) -> str:
    init = [f"    vec4 a{j} = x + vec4({j + 1}.0 / 64.0);" for j in range(accumulators)]
    chain = [f"        a{j} = fma(a{j}, m, c);" for _ in range(unroll) for j in range(accumulators)]
    total = " + ".join(f"a{j}" for j in range(accumulators))
    # m, c and the trip count are push constants so that nothing can be folded at
    # compile time; with m < 1 the values converge to c / (1 - m), never denormal.
    return "\n".join([
        "#version 450",
        "layout(local_size_x_id = 0) in;",
        "layout(std430, binding = 0) writeonly buffer Out { vec4 result[]; };",
        "layout(push_constant) uniform Push { float m; float c; uint trips; } p;",
        "void main() {",
        "    uint gid = gl_GlobalInvocationID.x;",
        "    vec4 x = vec4(float(gid & 255u) / 4096.0);",
        "    vec4 m = vec4(p.m);",
        "    vec4 c = vec4(p.c);",
        *init,
        "    for (uint i = 0u; i < p.trips; ++i) {",
        *chain,
        "    }",
        f"    result[gid] = {total};",
        "}",
        "",
    ])


@dataclass(frozen=True, slots=True)
class FmaProbe:
    """The FMA-chain shader as one stage of a sequence, so that a benchmark can dispatch it
    right before a kernel and compare both under the same load (a CPU device shares its
    cores with whatever else runs)."""

    stage: Stage  # binds buffers[binding] of the sequence: `buffer`
    buffer: np.ndarray
    flops: int  # per dispatch, 2 per lane FMA


def fma_probe(binding: int = 0) -> FmaProbe:
    from kernelgen.toolchains.vulkan_runtime import Stage

    spirv = compile_glsl(_fma_source(_FMA_ACCUMULATORS, _FMA_UNROLL))
    invocations = _FMA_LOCAL_SIZE * _FMA_GROUPS
    push = np.array([0.999, 0.001], np.float32).tobytes() + np.uint32(_FMA_TRIPS).tobytes()
    stage = Stage(spirv, (binding,), (_FMA_GROUPS, 1, 1), {0: _FMA_LOCAL_SIZE}, push)
    flops = invocations * _FMA_TRIPS * _FMA_UNROLL * _FMA_ACCUMULATORS * 4 * 2
    return FmaProbe(stage, np.zeros((invocations, 4), np.float32), flops)


def fma_peak_gflops(runner: VulkanRunner, *, repeat: int = 7) -> float:
    """Sustained vec4 FMA rate in GFLOP/s (2 FLOPs per lane), the median of `repeat`
    timed dispatches after a warm-up one that absorbs first-dispatch costs (on
    lavapipe the first dispatch of a pipeline is tens of ms slower)."""
    if not runner.info.timestamps:
        raise ToolchainError(f"{runner.info.name} cannot write timestamps; no peak to measure")
    probe = fma_probe()
    result = runner.run_sequence([probe.stage], [probe.buffer], repeat=repeat + 1)
    if not np.isfinite(result.outputs[0]).all():
        raise ToolchainError("the FMA probe produced non-finite values")
    return probe.flops / statistics.median(result.gpu_times_ns[1:])


def __getattr__(name: str) -> Any:
    # vulkan_runtime imports this module, so its names are fetched on first use.
    if name in _RUNTIME_NAMES:
        from kernelgen.toolchains import vulkan_runtime

        return getattr(vulkan_runtime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
