"""kernelgen: convolution kernels for Hexagon HVX, OpenCL textures, Vulkan compute and portable C.

    import kernelgen
    config = kernelgen.load_config("configs/seed000_3x3.yaml")   # or YAML text
    files = kernelgen.generate(config, "c")                     # {file name: text}
    assert kernelgen.validate(config, "c").passed

Everything here is kernelgen.api's (its __all__). The package's modules plan.py and measure/ share names with the
functions `plan`, `validate` and `bench`: the functions win, because api imports those modules before the names
below are bound, and a module imported again later does not rebind the package's attribute.
"""
from .api import *  # noqa: F401,F403 - the public API
from .api import __all__ as _api_all
from .version import __version__

__all__ = ["__version__", *_api_all]
