"""kernelgen: convolution kernels for Hexagon HVX, OpenCL textures, Vulkan compute and portable C.

    import kernelgen
    config = kernelgen.load_config("configs/seed000_3x3.yaml")   # or YAML text
    files = kernelgen.generate(config, "c")                     # {file name: text}
    assert kernelgen.validate(config, "c").passed

The functions live in kernelgen.public and load on first use: this module imports nothing, so that core
modules can read __version__ without pulling in the targets. kernelgen.api has the lower-level calls.
"""
import importlib
import sys
import types

__version__ = "0.1.0"

PUBLIC = ("load_config", "plan", "generate", "validate", "bench")
__all__ = ["__version__", *PUBLIC]


class _Package(types.ModuleType):
    """kernelgen.plan, .validate and .bench are also modules of the package; importing one of them would
    bind the module to the package's attribute, so the functions of the API keep the names here."""

    def __getattribute__(self, name: str):
        if name in PUBLIC:
            return getattr(importlib.import_module("kernelgen.public"), name)
        return super().__getattribute__(name)

    def __dir__(self) -> list[str]:
        return sorted(__all__)


sys.modules[__name__].__class__ = _Package
