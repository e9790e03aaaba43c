"""Dispatch SPIR-V compute shaders on a Vulkan device through the `vulkan` (cffi) binding.

The device probing and the binding's lifetime rules they rely on are described in device.py.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ToolchainError
from ..gpu.program import DeviceRunner
from .device import (
    DeviceInfo,
    Scope,
    create_instance,
    import_vulkan,
    physical_devices,
    pick_device,
    vk_errors,
)

# Every device guarantees 128 bytes of push constants. Declaring and pushing the whole
# range, zero-padded, keeps any shader whose push block fits valid even when the
# caller passes fewer bytes.
PUSH_CONSTANT_BYTES = 128
# lavapipe cannot be interrupted; the bound turns a runaway kernel into an error.
DEFAULT_TIMEOUT_S = 600.0
SpecValue = int | float | bool | np.generic
# How a stage binds a buffer (Stage.kinds): a storage buffer (the default), a uniform
# buffer (at most the device's maxUniformBufferRange bytes) or a uniform texel buffer of
# 4-component texels of the array's dtype (GLSL samplerBuffer + texelFetch), or of 3 ("texel3": one RGB pixel of
# a 3-channel tensor per fetch). lavapipe loads the last ones through gathers instead of its per-lane
# storage-buffer loop.
BINDING_KINDS = ("storage", "uniform", "texel", "texel3")
TEXEL_KINDS = {"texel": 4, "texel3": 3}  # components per texel
_TEXEL_FORMATS = {"float32": "VK_FORMAT_R32G32B32A32_SFLOAT", "float16": "VK_FORMAT_R16G16B16A16_SFLOAT"}
_TEXEL3_FORMATS = {"float32": "VK_FORMAT_R32G32B32_SFLOAT", "float16": "VK_FORMAT_R16G16B16_SFLOAT"}


@dataclass(frozen=True, slots=True)
class Stage:
    """One dispatch of a sequence: binding j of set 0 is buffers[bindings[j]]."""

    spirv: bytes
    bindings: tuple[int, ...]
    groups: tuple[int, int, int]
    spec_constants: Mapping[int, SpecValue] | None = None
    push_constants: bytes = b""
    entry: str = "main"
    kinds: tuple[str, ...] = ()  # one of BINDING_KINDS per binding; () = all storage

    def __post_init__(self) -> None:
        object.__setattr__(self, "bindings", tuple(int(b) for b in self.bindings))
        kinds = tuple(self.kinds) or ("storage",) * len(self.bindings)
        object.__setattr__(self, "kinds", kinds)
        if len(kinds) != len(self.bindings) or any(k not in BINDING_KINDS for k in kinds):
            raise ToolchainError(f"kinds must name one of {BINDING_KINDS} per binding, got {kinds}")
        object.__setattr__(self, "groups", tuple(int(g) for g in self.groups))
        if len(self.groups) != 3 or min(self.groups) < 1:
            raise ToolchainError(f"groups must be three positive ints, got {self.groups}")
        if len(self.spirv) % 4 or len(self.spirv) < 20:
            raise ToolchainError(f"not a SPIR-V module ({len(self.spirv)} bytes)")


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: arrays have no single truth value
class RunResult:
    outputs: tuple[np.ndarray, ...]  # same dtypes and shapes as the buffers passed in
    gpu_times_ns: tuple[float, ...]  # one per repeat; NaN when the queue has no timestamps
    # Per repeat, one time per stage (stamped before each dispatch and after the last), so
    # a probe and a kernel in one sequence are timed under the same load: bench pairs them.
    stage_times_ns: tuple[tuple[float, ...], ...] = ()


def pack_spec_constants(
        values: Mapping[int, SpecValue]) -> tuple[list[tuple[int, int, int]], bytes]:
    """(constant_id, offset, size) entries and the data block they index.

    Python ints become 32-bit (signed if negative), floats float32, bools VkBool32;
    pass a numpy scalar (np.float16, np.int64, ...) for another width.
    """
    entries: list[tuple[int, int, int]] = []
    data = b""
    for constant_id, value in sorted(values.items()):
        if isinstance(value, np.generic):
            raw = value.tobytes()
        elif isinstance(value, bool):
            raw = struct.pack("<I", value)
        elif isinstance(value, int) and -(2**31) <= value < 2**32:
            raw = struct.pack("<i" if value < 0 else "<I", value)
        elif isinstance(value, float):
            raw = struct.pack("<f", value)
        else:
            raise ToolchainError(f"spec constant {constant_id}={value!r}: use a 32-bit int, "
                                 "a float or a numpy scalar")
        entries.append((int(constant_id), len(data), len(raw)))
        data += raw
    return entries, data


def _check(stages: Sequence[Stage], buffers: Sequence[np.ndarray], repeat: int) -> None:
    if not stages or repeat < 1:
        raise ToolchainError(f"need a stage and repeat >= 1, got {len(stages)} stages, "
                             f"repeat={repeat}")
    for i, stage in enumerate(stages):
        if any(not 0 <= b < len(buffers) for b in stage.bindings):
            raise ToolchainError(f"stage {i} binds buffers {stage.bindings}, "
                                 f"but only {len(buffers)} were given")
    if any(np.asarray(a).dtype.hasobject for a in buffers):
        raise ToolchainError("object arrays cannot be copied to a Vulkan buffer")
    for i, stage in enumerate(stages):
        for b, kind in zip(stage.bindings, stage.kinds):
            if kind in TEXEL_KINDS and np.asarray(buffers[b]).dtype.name not in _TEXEL_FORMATS:
                raise ToolchainError(f"stage {i}: texel buffers hold {sorted(_TEXEL_FORMATS)}, "
                                     f"not {np.asarray(buffers[b]).dtype}")


@dataclass(frozen=True, slots=True)
class _Dispatch:
    pipeline: Any
    layout: Any
    descriptor_set: Any  # None when the stage binds no buffer
    push: Any  # cffi view of the whole declared push-constant range
    groups: tuple[int, int, int]


class VulkanRunner(DeviceRunner):
    """Owns one Vulkan instance, device, queue and command pool; use as a context manager.

    Each run creates its buffers, pipelines and query pool, submits one command buffer,
    waits on a fence and destroys what it created, so runs share no state.
    """

    def __init__(self, device: int | str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self._vk = import_vulkan()
        self._timeout_ns = int(timeout_s * 1e9)
        self._scope = Scope()
        self._closed = False
        try:
            self._open(device)
        except BaseException:
            self._scope.close()
            raise

    def _open(self, device: int | str | None) -> None:
        vk, scope = self._vk, self._scope
        phys = pick_device(physical_devices(vk, create_instance(vk, scope)), device)
        self.info: DeviceInfo = phys.info
        self._mask = phys.timestamp_mask
        f11 = scope.hold(vk.VkPhysicalDeviceVulkan11Features(
            **phys.enable["VkPhysicalDeviceVulkan11Features"]))
        f12 = scope.hold(vk.VkPhysicalDeviceVulkan12Features(
            pNext=f11, **phys.enable["VkPhysicalDeviceVulkan12Features"]))
        core = scope.hold(vk.VkPhysicalDeviceFeatures(**phys.enable["VkPhysicalDeviceFeatures"]))
        queue_info = scope.hold(vk.VkDeviceQueueCreateInfo(
            queueFamilyIndex=phys.queue_family, queueCount=1, pQueuePriorities=[1.0]))
        create = scope.hold(vk.VkDeviceCreateInfo(pNext=f12, pQueueCreateInfos=[queue_info],
                                                  pEnabledFeatures=core))
        with vk_errors(vk, f"device creation on {self.info.name}"):
            self._device = vk.vkCreateDevice(phys.handle, create, None)
            scope.on_close(lambda: vk.vkDestroyDevice(self._device, None))
            self._queue = vk.vkGetDeviceQueue(self._device, phys.queue_family, 0)
            pool_info = scope.hold(vk.VkCommandPoolCreateInfo(queueFamilyIndex=phys.queue_family))
            self._pool = vk.vkCreateCommandPool(self._device, pool_info, None)
            scope.on_close(lambda: vk.vkDestroyCommandPool(self._device, self._pool, None))
        memory = vk.vkGetPhysicalDeviceMemoryProperties(phys.handle)
        self._memory_types = [int(memory.memoryTypes[i].propertyFlags)
                              for i in range(memory.memoryTypeCount)]

    def close(self) -> None:
        """Destroy the command pool, device and instance; safe to call twice."""
        self._closed = True
        self._scope.close()

    def run(self, spirv: bytes, buffers: Sequence[np.ndarray], groups: tuple[int, int, int], *,
            spec_constants: Mapping[int, SpecValue] | None = None, push_constants: bytes = b"",
            repeat: int = 1, entry: str = "main", kinds: tuple[str, ...] = ()) -> RunResult:
        """One shader, binding i of set 0 = buffers[i]. Buffers are not reset between
        repeats, so a kernel updating in place (y += ...) applies `repeat` times."""
        stage = Stage(spirv, tuple(range(len(buffers))), groups, spec_constants,
                      push_constants, entry, kinds)
        return self.run_sequence([stage], buffers, repeat=repeat)

    def run_sequence(self, stages: Sequence[Stage], buffers: Sequence[np.ndarray], *,
                     repeat: int = 1) -> RunResult:
        """All stages in one command buffer with a compute->compute barrier between any
        two dispatches; each repeat is timed from before its first to after its last, and
        each stage from before its dispatch to before the next one (stage_times_ns)."""
        if self._closed:
            raise ToolchainError("VulkanRunner is closed")
        _check(stages, buffers, repeat)
        arrays = [np.asarray(a) for a in buffers]
        run = Scope()
        try:
            with vk_errors(self._vk, f"run on {self.info.name}"):
                uses = [{k for s in stages for b, k in zip(s.bindings, s.kinds) if b == i}
                        for i in range(len(arrays))]
                mapped = [self._buffer(run, np.ascontiguousarray(a).tobytes(), use)
                          for a, use in zip(arrays, uses)]
                dispatches = [self._dispatch(run, s, [mapped[b] for b in s.bindings],
                                             [arrays[b].dtype.name for b in s.bindings])
                              for s in stages]
                stamps = (len(dispatches) + 1) * repeat
                queries = self._create(run, "QueryPool", self._vk.VkQueryPoolCreateInfo(
                    queryType=self._vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=stamps))
                self._submit(run, self._record(run, dispatches, queries, repeat))
                per_stage = self._times(queries, repeat, len(dispatches))
                outputs = tuple(
                    np.frombuffer(view, a.dtype, a.size).reshape(a.shape).copy()
                    for (_, view), a in zip(mapped, arrays, strict=True))
            return RunResult(outputs, tuple(sum(t) for t in per_stage), per_stage)
        finally:
            run.close()

    def _create(self, run: Scope, kind: str, info: Any) -> Any:
        """vkCreate<kind>, destroyed with the run; `info` is kept alive until then."""
        vk, dev = self._vk, self._device
        handle = getattr(vk, f"vkCreate{kind}")(dev, run.hold(info), None)
        run.on_close(lambda: getattr(vk, f"vkDestroy{kind}")(dev, handle, None))
        return handle

    def _buffer(self, run: Scope, data: bytes, kinds: set[str]) -> tuple[Any, memoryview]:
        """A buffer holding `data` usable as every kind in `kinds`, and its mapping (read
        back after the run)."""
        vk, dev = self._vk, self._device
        size = max(len(data), 4)  # zero-sized buffers are invalid
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
        if "uniform" in kinds:
            usage |= vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT
        if kinds & set(TEXEL_KINDS):
            usage |= vk.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT
        buf = self._create(run, "Buffer", vk.VkBufferCreateInfo(
            size=size, usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE))
        need = vk.vkGetBufferMemoryRequirements(dev, buf)
        # Host-visible and coherent, so copies need no staging buffer or flush. All of
        # lavapipe's memory is; on a discrete GPU kernels would then read host memory.
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        kinds = [i for i, flags in enumerate(self._memory_types)
                 if need.memoryTypeBits >> i & 1 and flags & want == want]
        if not kinds:
            raise ToolchainError(f"{self.info.name} has no host-visible coherent memory")
        alloc = run.hold(vk.VkMemoryAllocateInfo(allocationSize=need.size,
                                                 memoryTypeIndex=kinds[0]))
        mem = vk.vkAllocateMemory(dev, alloc, None)
        run.on_close(lambda: vk.vkFreeMemory(dev, mem, None))
        vk.vkBindBufferMemory(dev, buf, mem, 0)
        view = memoryview(vk.vkMapMemory(dev, mem, 0, size, 0))

        def unmap() -> None:
            view.release()
            vk.vkUnmapMemory(dev, mem)

        run.on_close(unmap)
        view[:len(data)] = data
        return buf, view

    def _dispatch(self, run: Scope, stage: Stage, bufs: list[tuple[Any, memoryview]],
                  dtypes: list[str]) -> _Dispatch:
        vk, dev = self._vk, self._device
        compute = vk.VK_SHADER_STAGE_COMPUTE_BIT
        types = {"storage": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                 "uniform": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
                 "texel": vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                 "texel3": vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER}
        module = self._create(run, "ShaderModule", vk.VkShaderModuleCreateInfo(
            codeSize=len(stage.spirv), pCode=stage.spirv))
        slots = [vk.VkDescriptorSetLayoutBinding(binding=j, descriptorType=types[kind],
                                                 descriptorCount=1, stageFlags=compute)
                 for j, kind in enumerate(stage.kinds)]
        set_layout = self._create(run, "DescriptorSetLayout",
                                  vk.VkDescriptorSetLayoutCreateInfo(pBindings=slots or None))
        push = stage.push_constants
        push += bytes(max(PUSH_CONSTANT_BYTES - len(push), -len(push) % 4))
        if len(push) > self.info.max_push_constant_bytes:
            raise ToolchainError(f"{len(push)} push-constant bytes exceed the device's "
                                 f"{self.info.max_push_constant_bytes}")
        push_range = vk.VkPushConstantRange(stageFlags=compute, offset=0, size=len(push))
        layout = self._create(run, "PipelineLayout", vk.VkPipelineLayoutCreateInfo(
            pSetLayouts=[set_layout], pPushConstantRanges=[push_range]))

        entries, data = pack_spec_constants(stage.spec_constants or {})
        spec = None
        if entries:
            maps = [vk.VkSpecializationMapEntry(constantID=c, offset=o, size=s)
                    for c, o, s in entries]
            spec = run.hold(vk.VkSpecializationInfo(
                pMapEntries=maps, dataSize=len(data), pData=run.hold(vk.ffi.from_buffer(data))))
        name = run.hold(vk.ffi.new("char[]", stage.entry.encode()))  # must outlive creation
        shader = run.hold(vk.VkPipelineShaderStageCreateInfo(
            stage=compute, module=module, pName=name, pSpecializationInfo=spec))
        info = run.hold(vk.VkComputePipelineCreateInfo(stage=shader, layout=layout))
        with vk_errors(vk, f"pipeline creation (entry point {stage.entry!r})"):
            pipeline = vk.vkCreateComputePipelines(dev, None, 1, [info], None)[0]
        run.on_close(lambda: vk.vkDestroyPipeline(dev, pipeline, None))

        dset = None
        if bufs:
            sizes = [vk.VkDescriptorPoolSize(type=types[k], descriptorCount=stage.kinds.count(k))
                     for k in BINDING_KINDS if k in stage.kinds]
            pool = self._create(run, "DescriptorPool",
                                vk.VkDescriptorPoolCreateInfo(maxSets=1, pPoolSizes=sizes))
            alloc = run.hold(vk.VkDescriptorSetAllocateInfo(descriptorPool=pool,
                                                            pSetLayouts=[set_layout]))
            dset = vk.vkAllocateDescriptorSets(dev, alloc)[0]
            writes = [self._write(run, dset, j, kind, types[kind], buf, dtype)
                      for j, (kind, buf, dtype) in enumerate(zip(stage.kinds, bufs, dtypes))]
            vk.vkUpdateDescriptorSets(dev, len(writes), writes, 0, None)
        # from_buffer, not ffi.new("uint8_t[]", push): that appends a NUL byte, and
        # lavapipe silently accepts the resulting 129-byte push.
        return _Dispatch(pipeline, layout, dset, run.hold(vk.ffi.from_buffer(push)), stage.groups)

    def _write(self, run: Scope, dset: Any, j: int, kind: str, dtype_code: int,
               buf: tuple[Any, memoryview], dtype: str) -> Any:
        vk = self._vk
        handle, view = buf
        if kind == "uniform" and view.nbytes > self.info.max_uniform_buffer_bytes:
            raise ToolchainError(f"binding {j}: a {view.nbytes}-byte uniform buffer exceeds the "
                                 f"device's {self.info.max_uniform_buffer_bytes}")
        if kind in TEXEL_KINDS:
            texel = TEXEL_KINDS[kind] * np.dtype(dtype).itemsize
            texels = view.nbytes // texel
            if texels > self.info.max_texel_buffer_elements:
                raise ToolchainError(f"binding {j}: {texels} texels exceed the device's "
                                     f"{self.info.max_texel_buffer_elements}")
            formats = _TEXEL3_FORMATS if kind == "texel3" else _TEXEL_FORMATS
            texel_view = self._create(run, "BufferView", self._vk.VkBufferViewCreateInfo(
                buffer=handle, format=getattr(vk, formats[dtype]), offset=0,
                range=texels * texel))
            return run.hold(vk.VkWriteDescriptorSet(
                dstSet=dset, dstBinding=j, descriptorCount=1, descriptorType=dtype_code,
                pTexelBufferView=[texel_view]))
        # The explicit range: the binding defines VK_WHOLE_SIZE as -1, which cffi rejects.
        return run.hold(vk.VkWriteDescriptorSet(
            dstSet=dset, dstBinding=j, descriptorCount=1, descriptorType=dtype_code,
            pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=handle, offset=0, range=view.nbytes)]))

    def _barrier(self, run: Scope, cmd: Any, dst_stage: int, dst_access: int) -> None:
        vk = self._vk
        barrier = run.hold(vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                              dstAccessMask=dst_access))
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, dst_stage, 0,
                                1, [barrier], 0, None, 0, None)

    def _record(self, run: Scope, dispatches: list[_Dispatch], queries: Any, repeat: int) -> Any:
        vk, dev = self._vk, self._device
        alloc = run.hold(vk.VkCommandBufferAllocateInfo(
            commandPool=self._pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))
        cmd = vk.vkAllocateCommandBuffers(dev, alloc)[0]
        run.on_close(lambda: vk.vkFreeCommandBuffers(dev, self._pool, 1, [cmd]))
        vk.vkBeginCommandBuffer(cmd, run.hold(vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)))
        n = len(dispatches) + 1  # stamps per repeat
        vk.vkCmdResetQueryPool(cmd, queries, 0, n * repeat)
        compute, bind = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_BIND_POINT_COMPUTE
        read_write = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
        for r in range(repeat):
            # Every stamp at the compute stage, after the barrier: a stamp waits for the
            # dispatches before it, so a stage's start is not stamped while the previous
            # one still runs.
            for j, d in enumerate(dispatches):
                if j or r:
                    self._barrier(run, cmd, compute, read_write)
                vk.vkCmdWriteTimestamp(cmd, compute, queries, n * r + j)
                vk.vkCmdBindPipeline(cmd, bind, d.pipeline)
                if d.descriptor_set is not None:
                    vk.vkCmdBindDescriptorSets(cmd, bind, d.layout, 0, 1, [d.descriptor_set],
                                               0, None)
                vk.vkCmdPushConstants(cmd, d.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                      len(d.push), d.push)
                vk.vkCmdDispatch(cmd, *d.groups)
            vk.vkCmdWriteTimestamp(cmd, compute, queries, n * r + n - 1)
        # Shader writes must be made visible to the host before the mappings are read.
        self._barrier(run, cmd, vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkEndCommandBuffer(cmd)
        return cmd

    def _submit(self, run: Scope, cmd: Any) -> None:
        vk = self._vk
        fence = self._create(run, "Fence", vk.VkFenceCreateInfo())
        submit = run.hold(vk.VkSubmitInfo(pCommandBuffers=[cmd]))
        vk.vkQueueSubmit(self._queue, 1, [submit], fence)
        try:
            vk.vkWaitForFences(self._device, 1, [fence], vk.VK_TRUE, self._timeout_ns)
        except vk.VkTimeout:
            run.abandon()  # the device still uses the run's objects and the device itself
            self._scope.abandon()
            self.close()
            raise ToolchainError(f"{self.info.name} did not finish within "
                                 f"{self._timeout_ns / 1e9:g} s; the runner is closed") from None

    def _times(self, queries: Any, repeat: int, stages: int) -> tuple[tuple[float, ...], ...]:
        """Per repeat, the time of each stage in ns (NaN without timestamps)."""
        if not self.info.timestamps:
            return ((float("nan"),) * stages,) * repeat
        vk, n = self._vk, stages + 1
        stamps = vk.ffi.new("uint64_t[]", n * repeat)
        vk.vkGetQueryPoolResults(self._device, queries, 0, n * repeat, 8 * n * repeat, stamps, 8,
                                 vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
        return tuple(tuple(float(((stamps[n * r + j + 1] - stamps[n * r + j]) & self._mask)
                                 * self.info.timestamp_period_ns) for j in range(stages))
                     for r in range(repeat))

