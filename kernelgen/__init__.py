"""kernelgen: convolution kernels for Hexagon HVX, OpenCL textures, Vulkan compute and portable C.

    import kernelgen
    config = kernelgen.load_config("configs/seed000_3x3.yaml")   # or YAML text
    files = kernelgen.generate(config, "c")                     # {file name: text}
    assert kernelgen.validate(config, "c").passed

Everything here is kernelgen.api's (its __all__). The package's modules plan.py and measure/ share names with the
functions `plan`, `validate` and `bench`: the functions win, because api imports those modules before the names
below are bound, and a module imported again later does not rebind the package's attribute.
"""
__version__ = "0.1.0"

from .api import *  # noqa: E402,F401,F403 - the public API, after __version__ (modules read it while loading)
from .api import __all__ as _api_all  # noqa: E402

__all__ = ["__version__", *_api_all]
