"""The Vulkan devices the loader sees, through the `vulkan` (cffi) binding, which is imported
on first use, never at import time.

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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ...errors import ToolchainError
from ..gpu.binding import import_binding

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
    return import_binding("vulkan", "python package 'vulkan' is missing: pip install 'kernelgen[vulkan]'",
                          loader=("Vulkan", "apt-get install libvulkan1 mesa-vulkan-drivers"))


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
    cpu: bool = False  # VK_PHYSICAL_DEVICE_TYPE_CPU (lavapipe): its memory is the host's, behind the host's caches


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
        max_texel_buffer_elements=int(p.limits.maxTexelBufferElements), timestamps=bits > 0,
        cpu=p.deviceType == vk.VK_PHYSICAL_DEVICE_TYPE_CPU)
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
