"""kernelgen: convolution kernels for Hexagon HVX, OpenCL textures, Vulkan compute and portable C.

The Python API is `kernelgen.api` (load_config, plan, generate, validate, bench). This module
imports nothing, so that core modules can read __version__ without pulling in the targets.
"""

__version__ = "0.1.0"
