"""kernelgen: convolution kernels for Hexagon HVX, OpenCL textures, Vulkan compute and portable C."""

__version__ = "0.1.0"
