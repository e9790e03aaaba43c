"""Device profiles: the limits a GPU or CPU device puts on a kernel, each number with the public source it
comes from. Targets take their defaults from a profile (`vulkan: {device: rdna2}`), never from what an
emulator happens to tolerate; `kernelgen devices` prints them."""
from __future__ import annotations

from dataclasses import dataclass, field

MESA_RADV = "measured here: Mesa 22.3.6 RADV, RADV_FORCE_FAMILY=navi21 null device, vkGetPhysicalDeviceProperties"
MESA_LVP = "measured here: Mesa 22.3.6 lavapipe (llvmpipe, LLVM 15), vkGetPhysicalDeviceProperties"
POCL = "measured here: PoCL 3.1 (Debian 12, pthread device), clGetDeviceInfo"
FREEDRENO = "Mesa src/freedreno/common/a7xx_gpu.py (A7XX: cs_shared_mem_size, reg_size_vec4, threadsize)"
PANFROST = "Mesa src/panfrost (pan_subgroup_size, panfrost_max_thread_count) and panvk physical-device limits"
CPU = "none: a CPU device, whose registers are the host's"
FREEDRENO6 = "Mesa src/freedreno/common/freedreno_devices.py (a6xx: cs_shared_mem_size, reg_size_vec4, threadsize)"
IR3_WAVES = ("ir3 (src/freedreno/ir3/ir3.c, ir3_get_reg_dependent_max_waves): waves per core = reg_size_vec4 / "
             "vec4 registers x 2")
MOBILE_STATS = "measured here with `kernelgen stats` (Mesa 25.0.7 Turnip/PanVK over their noop DRM shims)"
STATS = "measured here with `kernelgen stats` (ACO): 8+ waves per SIMD at <= 128 VGPRs"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceProfile:
    name: str
    description: str
    subgroup: int  # invocations that run in lockstep (wave, warp, SIMD width)
    register_budget: int | None  # 32-bit registers per invocation that keep the target occupancy (None: a CPU)
    local_memory_bytes: int  # shared (workgroup-local) memory per workgroup
    max_workgroup: int  # invocations per workgroup
    max_image: tuple[int, int]  # image2d width x height
    fp16_arithmetic: bool
    int64: bool
    vector_width: int  # preferred float vector width (CPU SIMD lanes; 4 for a GPU's vec4 registers)
    textures: bool  # OpenCL: activations whose layout has an axis separator go to image2d textures by default
    texture_filters: bool  # OpenCL texture variant: filters in image2d textures too (else float vector buffers)
    sources: dict[str, str] = field(default_factory=dict)  # field -> where the number comes from


PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (
    DeviceProfile(name="lavapipe", description="Mesa's CPU Vulkan driver (the device on hosts without a GPU)",
                  subgroup=8, register_budget=None, local_memory_bytes=32768, max_workgroup=1024,
                  max_image=(16384, 16384), fp16_arithmetic=True, int64=True, vector_width=8,
                  textures=False, texture_filters=False,
                  sources={"subgroup": MESA_LVP + " (256-bit LLVM vectors)", "register_budget": CPU,
                           "textures": "not an OpenCL device", "texture_filters": "not an OpenCL device",
                           "local_memory_bytes": MESA_LVP,
                           "max_workgroup": MESA_LVP, "max_image": MESA_LVP, "fp16_arithmetic": MESA_LVP,
                           "int64": MESA_LVP, "vector_width": MESA_LVP}),
    DeviceProfile(name="pocl-cpu", description="PoCL's pthread OpenCL device", subgroup=16, register_budget=None,
                  local_memory_bytes=2097152, max_workgroup=4096, max_image=(8192, 8192), fp16_arithmetic=False,
                  int64=True, vector_width=16, textures=False, texture_filters=False,
                  sources={"subgroup": "no subgroups: the preferred float vector width (" + POCL + ") stands in",
                           "textures": "measured here (benchmarks/real_gpus.py, 1x1 conv 64x64x128 -> 128): the buffer "
                                       "variant 220-235 GFLOP/s, the texture variant 76-79 (its best tile)",
                           "texture_filters": "measured here (benchmarks/real_gpus.py, same conv): the texture variant "
                                              "with filters in textures 0.04-0.08 of the buffer variant's GFLOP/s, with "
                                              "float16 filter buffers 0.36; PoCL samples each texel in software",
                           "register_budget": CPU,
                           "local_memory_bytes": POCL, "max_workgroup": POCL, "max_image": POCL,
                           "fp16_arithmetic": POCL + " (no cl_khr_fp16)", "int64": POCL, "vector_width": POCL}),
    DeviceProfile(name="rdna2", description="AMD RDNA2 (Radeon RX 6000; Samsung Xclipse 920 is RDNA2 too)",
                  subgroup=64, register_budget=128, local_memory_bytes=65536, max_workgroup=1024,
                  max_image=(16384, 16384), fp16_arithmetic=True, int64=True, vector_width=4,
                  textures=False, texture_filters=False,
                  sources={"subgroup": MESA_RADV + " (wave64 compute)", "register_budget": STATS,
                           "textures": "assumed (no AMD OpenCL device here): buffers, cached like images",
                           "texture_filters": "assumed (no AMD OpenCL device here): buffers, read through the "
                                              "vector L0 cache as fast as images",
                           "local_memory_bytes": MESA_RADV, "max_workgroup": MESA_RADV, "max_image": MESA_RADV,
                           "fp16_arithmetic": MESA_RADV + " (shaderFloat16)", "int64": MESA_RADV + " (shaderInt64)",
                           "vector_width": "vec4: 4 VGPRs per vec4 accumulator"}),
    DeviceProfile(name="adreno-7xx", description="Qualcomm Adreno 7xx (Snapdragon 8 Gen 1-3)", subgroup=64,
                  register_budget=96, local_memory_bytes=32768, max_workgroup=1024, max_image=(16384, 16384),
                  fp16_arithmetic=True, int64=False, vector_width=4, textures=True, texture_filters=True,
                  sources={"subgroup": FREEDRENO + " (threadsize_base 64; double threadsize 128)",
                           "textures": "TVM's Adreno conv2d schedules (python/tvm/topi/adreno) keep activations in "
                                       "textures (the global.texture scope): the texture cache and its 2-D locality",
                           "texture_filters": "TVM's Adreno conv2d schedules (python/tvm/topi/adreno) keep weights "
                                              "in textures (the global.texture-weight scope): the texture cache",
                           "register_budget": IR3_WAVES + "; a7xx reg_size_vec4 = 96: 8 waves at <= 24 vec4 "
                                                          "registers = 96 32-bit registers, our target occupancy; "
                                                          + MOBILE_STATS,
                           "local_memory_bytes": FREEDRENO + " (cs_shared_mem_size = 32 * 1024)",
                           "max_workgroup": "assumed (not verified on a device): 1024, the common Vulkan limit",
                           "max_image": "OpenCL image2d limit of Adreno-class GPUs (kernelgen opencl default notes)",
                           "fp16_arithmetic": FREEDRENO + " (storage_16bit, fp16 ALUs)",
                           "int64": "no shaderInt64 in the profile: wide_store (64-bit words) is off",
                           "vector_width": "vec4 registers"}),
    DeviceProfile(name="adreno-6xx", description="Qualcomm Adreno 6xx (Snapdragon 845-888: A630, A660)",
                  subgroup=64, register_budget=84, local_memory_bytes=32768, max_workgroup=1024,
                  max_image=(16384, 16384), fp16_arithmetic=True, int64=False, vector_width=4, textures=True,
                  texture_filters=True,
                  sources={"subgroup": FREEDRENO6 + " (threadsize_base 64; double threadsize 128)",
                           "textures": "as adreno-7xx (TVM's Adreno schedules cover both generations)",
                           "texture_filters": "as adreno-7xx (TVM's Adreno schedules cover both generations)",
                           "register_budget": IR3_WAVES + "; a6xx gen4 (A660) reg_size_vec4 = 64, gen1 (A618, "
                                                          "A630) 96: 6 waves on A660 (8 on A630) at <= 21 vec4 "
                                                          "registers = 84 32-bit registers, what a 3x3 kernel's "
                                                          "filter slice takes at 1x2x4 (8 waves would need the "
                                                          "filter loaded at each use: 1.9x ir3's instructions); "
                                                          + MOBILE_STATS,
                           "local_memory_bytes": FREEDRENO6 + " (cs_shared_mem_size = 32 * 1024)",
                           "max_workgroup": "assumed (not verified on a device): 1024, the common Vulkan limit",
                           "max_image": "OpenCL image2d limit of Adreno-class GPUs (kernelgen opencl default notes)",
                           "fp16_arithmetic": FREEDRENO6 + " (storage_16bit from gen3, fp16 ALUs)",
                           "int64": "no shaderInt64 in the profile: wide_store (64-bit words) is off",
                           "vector_width": "vec4 registers"}),
    DeviceProfile(name="mali-valhall", description="Arm Mali Valhall (G57, G77, G710, G715)", subgroup=16,
                  register_budget=32, local_memory_bytes=32768, max_workgroup=1024, max_image=(16384, 16384),
                  fp16_arithmetic=True, int64=False, vector_width=4, textures=False, texture_filters=False,
                  sources={"subgroup": PANFROST + " (pan_subgroup_size: 16 from arch 9)",
                           "textures": "assumed (no Mali OpenCL device here): buffers, as TVM's Mali schedules use",
                           "texture_filters": "assumed (no Mali OpenCL device here): Arm's guides favour buffers "
                                              "for compute on Valhall",
                           "register_budget": PANFROST + " (panfrost_max_thread_count: more than 32 work "
                                                         "registers halves the threads, 1024 -> 512); "
                                                         + MOBILE_STATS + ": G610 shaderdb '2 threads'",
                           "local_memory_bytes": PANFROST + " (maxComputeSharedMemorySize = 32768)",
                           "max_workgroup": PANFROST + " (1024 threads at <= 32 registers)",
                           "max_image": PANFROST + " (framebuffer limit 1 << 14)",
                           "fp16_arithmetic": "Valhall FP16 arithmetic", "int64": "no shaderInt64 in the profile: "
                                                                                   "wide_store is off",
                           "vector_width": "vec4 registers"}),
)}


def profile(name: str) -> DeviceProfile:
    return PROFILES[name]
