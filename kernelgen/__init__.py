"""kernelgen: convolution kernels for Hexagon HVX, OpenCL textures, Vulkan compute and portable C.

    import kernelgen
    config = kernelgen.load_config("configs/seed000_3x3.yaml")   # or YAML text
    files = kernelgen.generate(config, "c")                     # {file name: text}
    assert kernelgen.validate(config, "c").passed

Everything here is kernelgen.api's (its __all__). No module of the package takes the name of one of these functions
(the planner's records are plan_types.py, the measuring loops sit in the package measure/), so `kernelgen.plan` is
always the function and `import kernelgen.plan_types` always the module.
"""
from .api import *  # noqa: F401,F403 - the public API
from .api import __all__ as _api_all
from .version import __version__

__all__ = ["__version__", *_api_all]
