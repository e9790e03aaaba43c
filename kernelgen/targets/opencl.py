"""OpenCL C for pyopencl (PoCL here): one kernel per conv2d, tensors in image2d textures
(layouts with an axis separator) or in flat buffers with float8/float16 vector math."""
from __future__ import annotations

from typing import Any

from .base import OutputFile, Target


def _launch_plan(config: Any, plan: Any) -> dict[str, Any]:
    """The OpenCL plan (tiles, NDRange, index text) the templates render as `ocl`."""
    from ..opencl_plan import plan_opencl  # imported on use: opencl_plan imports config, which imports targets


    return {"ocl": plan_opencl(config, plan)}


OPENCL = Target(
    name="opencl",
    summary="OpenCL C (pyopencl/PoCL): image2d textures or float8/16 buffers, one kernel per conv2d",
    files=(OutputFile(pattern="{name}.cl", template="opencl/kernels.cl.j2"),
           OutputFile(pattern="{name}.launch.json", template="opencl/launch.json.j2")),
    dtypes=("float32", "float16"),
    context=_launch_plan,
)
