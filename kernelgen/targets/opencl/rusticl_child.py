"""The child process of rusticl_stats.py: build one OpenCL program on rusticl's only device (a noop-shimmed
Adreno or Mali), so that its compiler prints each kernel's statistics on stderr, and answer on stdout (JSON) the
device's name and, per kernel, the SIMD width the driver chose (CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE:
ir3 doubles a wave to 128 fibers where the registers allow it).

Run with the driver's environment (OCL_ICD_FILENAMES, RUSTICL_ENABLE, LD_PRELOAD of the shim, FD_GPU_ID or
PAN_GPU_ID) by rusticl_stats.mobile_cl_stats: python -m kernelgen.targets.opencl.rusticl_child SOURCE OPTIONS.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

BEGIN = "kernelgen: program build begins"  # stderr markers around the compiler's own lines
END = "kernelgen: program build ends"


def main(source: Path, options: str) -> int:
    import pyopencl as cl

    platforms = [p for p in cl.get_platforms() if p.name == "rusticl"]
    devices = platforms[0].get_devices() if platforms else []
    if len(devices) != 1:
        print(f"rusticl offers {len(devices)} devices here, expected the one RUSTICL_ENABLE names", file=sys.stderr)
        return 1
    context = cl.Context(devices)
    print(BEGIN, file=sys.stderr, flush=True)
    try:
        program = cl.Program(context, source.read_text()).build(options=options)
    except cl.RuntimeError as error:  # the build log says why (an extension the part lacks, a clang error)
        print(END, file=sys.stderr, flush=True)
        print(f"clBuildProgram failed: {str(error).strip()[-1500:]}", file=sys.stderr)
        return 1
    print(END, file=sys.stderr, flush=True)
    simd = {kernel.function_name: kernel.get_work_group_info(
        cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE, devices[0])
        for kernel in program.all_kernels()}
    print(json.dumps({"device": devices[0].name, "simd": simd}))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
