"""The child process of mobilestats.py: one compute pipeline from one SPIR-V module on the first Vulkan device
the loader offers (the driver the environment points at, over its noop DRM shim), and on stdout, as JSON, the
pipeline-executable statistics the driver reports (empty when it has none: PanVK prints shaderdb to stderr).

Not VulkanRunner: that takes Vulkan 1.2 devices only (it reads the 1.1/1.2 property structs), and PanVK 25.0.7
advertises 1.1. Creating a pipeline needs nothing past 1.0 plus the statistics extension.

    python -m kernelgen.targets.vulkan.pipeline_child MODULE.spv KIND...   (KIND: storage, uniform, texel or texel3)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .device import Scope, import_vulkan, vk_errors
from .runtime import PUSH_CONSTANT_BYTES

STATISTICS_EXTENSION = "VK_KHR_pipeline_executable_properties"
API_1_1 = (1 << 22) | (1 << 12)


def compile_statistics(spirv: bytes, kinds: list[str]) -> dict[str, float]:
    vk = import_vulkan()
    scope = Scope()
    try:
        app = scope.hold(vk.VkApplicationInfo(pApplicationName="kernelgen", pEngineName="kernelgen",
                                              apiVersion=API_1_1))
        with vk_errors(vk, "instance creation"):
            instance = vk.vkCreateInstance(scope.hold(vk.VkInstanceCreateInfo(pApplicationInfo=app)), None)
        scope.on_close(lambda: vk.vkDestroyInstance(instance, None))
        handles = vk.vkEnumeratePhysicalDevices(instance)
        if not handles:
            raise SystemExit("no Vulkan device: the driver did not load over its shim")
        device, statistics = _device(vk, scope, handles[0])
        pipeline = _pipeline(vk, scope, device, spirv, kinds, statistics)
        return _statistics(vk, device, pipeline) if statistics else {}
    finally:
        scope.close()


def _device(vk: Any, scope: Scope, handle: Any) -> tuple[Any, bool]:
    """A device with one queue, the core features the driver has (float16 kernels need 16-bit storage, which
    Mesa's compilers take from the SPIR-V's capabilities), and the statistics extension where offered."""
    offered = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(handle, None)}
    statistics = STATISTICS_EXTENSION in offered
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(handle)
    family = next(i for i, q in enumerate(families) if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
    queue = scope.hold(vk.VkDeviceQueueCreateInfo(queueFamilyIndex=family, queueCount=1, pQueuePriorities=[1.0]))
    wanted = scope.hold(vk.VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR(pipelineExecutableInfo=True)) \
        if statistics else None
    create = scope.hold(vk.VkDeviceCreateInfo(
        pNext=wanted, pQueueCreateInfos=[queue], pEnabledFeatures=vk.vkGetPhysicalDeviceFeatures(handle),
        ppEnabledExtensionNames=[STATISTICS_EXTENSION] if statistics else None))
    with vk_errors(vk, "device creation"):
        device = vk.vkCreateDevice(handle, create, None)
    scope.on_close(lambda: vk.vkDestroyDevice(device, None))
    return device, statistics


def _pipeline(vk: Any, scope: Scope, device: Any, spirv: bytes, kinds: list[str], statistics: bool) -> Any:
    compute = vk.VK_SHADER_STAGE_COMPUTE_BIT
    types = {"storage": vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "uniform": vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
             "texel": vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, "texel3": vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER}
    module = vk.vkCreateShaderModule(device, scope.hold(vk.VkShaderModuleCreateInfo(
        codeSize=len(spirv), pCode=spirv)), None)
    scope.on_close(lambda: vk.vkDestroyShaderModule(device, module, None))
    slots = [vk.VkDescriptorSetLayoutBinding(binding=j, descriptorType=types[kind], descriptorCount=1,
                                             stageFlags=compute) for j, kind in enumerate(kinds)]
    set_layout = vk.vkCreateDescriptorSetLayout(device, scope.hold(vk.VkDescriptorSetLayoutCreateInfo(
        pBindings=slots or None)), None)
    scope.on_close(lambda: vk.vkDestroyDescriptorSetLayout(device, set_layout, None))
    push = vk.VkPushConstantRange(stageFlags=compute, offset=0, size=PUSH_CONSTANT_BYTES)
    layout = vk.vkCreatePipelineLayout(device, scope.hold(vk.VkPipelineLayoutCreateInfo(
        pSetLayouts=[set_layout], pPushConstantRanges=[push])), None)
    scope.on_close(lambda: vk.vkDestroyPipelineLayout(device, layout, None))
    name = scope.hold(vk.ffi.new("char[]", b"main"))
    stage = scope.hold(vk.VkPipelineShaderStageCreateInfo(stage=compute, module=module, pName=name))
    flags = vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if statistics else 0
    info = scope.hold(vk.VkComputePipelineCreateInfo(flags=flags, stage=stage, layout=layout))
    with vk_errors(vk, "pipeline creation"):
        pipeline = vk.vkCreateComputePipelines(device, None, 1, [info], None)[0]
    scope.on_close(lambda: vk.vkDestroyPipeline(device, pipeline, None))
    return pipeline


def _statistics(vk: Any, device: Any, pipeline: Any) -> dict[str, float]:
    """The first executable's statistics (a compute pipeline has one), by name."""
    statistics = vk.vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR")
    executable = vk.VkPipelineExecutableInfoKHR(pipeline=pipeline, executableIndex=0)
    return {_text(vk, stat.name): _number(vk, stat) for stat in statistics(device, executable)}


def _number(vk: Any, stat: Any) -> float:
    if stat.format == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        return float(stat.value.b32)
    if stat.format == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        return float(stat.value.i64)
    if stat.format == vk.VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        return float(stat.value.u64)
    return float(stat.value.f64)


def _text(vk: Any, name: Any) -> str:
    """The binding hands char arrays back as str through its wrapper, or as cdata."""
    return name if isinstance(name, str) else vk.ffi.string(name).decode()

if __name__ == "__main__":
    print(json.dumps(compile_statistics(Path(sys.argv[1]).read_bytes(), sys.argv[2:])))
