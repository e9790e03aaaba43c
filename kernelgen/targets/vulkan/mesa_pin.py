"""The pinned Mesa build whose Adreno (Turnip) and Mali (PanVK) compilers judge kernels without the hardware
(issue 31), and where `make mesa-compilers` (tools/mesa_compilers.py) puts it.

Bookworm's mesa-vulkan-drivers ships neither driver nor the noop DRM shims that fake their kernel drivers, so
they are built from Debian trixie's source package. The pin is the package version and the sha256 of its
files on deb.debian.org: the build folder's name carries the version, so a new pin builds afresh and an old
build is never taken for a new one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEBIAN_VERSION = "25.0.7-2+deb13u1"
UPSTREAM_VERSION = "25.0.7"
POOL_URL = "http://deb.debian.org/debian/pool/main/m/mesa/"
DSC_NAME = f"mesa_{DEBIAN_VERSION}.dsc"
DSC_SHA256 = "c3605bc68cd140db19523c1b80ecd4aa1d77d5b528f15902995ef9ddbbc8f07e"
ORIG_NAME = f"mesa_{UPSTREAM_VERSION}.orig.tar.xz"
ORIG_SHA256 = "592272df3cf01e85e7db300c449df5061092574d099da275d19e97ef0510f8a6"  # as the .dsc lists it


@dataclass(frozen=True, slots=True, kw_only=True)
class MesaDriver:
    """One Vulkan driver of the build and the noop shim that stands in for its kernel driver."""
    name: str  # the driver's name in Mesa (meson's vulkan-drivers choice)
    tool: str  # what `kernelgen targets` lists it as (mesa:<tool>) and tests require
    compiler: str  # what reports call it
    library: str  # path of the driver inside the meson build folder
    shim: str  # path of the noop DRM shim inside the meson build folder

    def installed_library(self) -> Path:
        return install_dir() / "lib" / Path(self.library).name

    def installed_shim(self) -> Path:
        return install_dir() / "lib" / Path(self.shim).name

    def icd_json(self) -> Path:
        return install_dir() / "icd" / f"{self.name}.json"


TURNIP = MesaDriver(name="freedreno", tool="turnip", compiler="turnip (Adreno ir3)",
                    library="src/freedreno/vulkan/libvulkan_freedreno.so",
                    shim="src/freedreno/drm-shim/libfreedreno_noop_drm_shim.so")
PANVK = MesaDriver(name="panfrost", tool="panvk", compiler="panvk (Mali Valhall)",
                   library="src/panfrost/vulkan/libvulkan_panfrost.so",
                   shim="src/panfrost/drm-shim/libpanfrost_noop_drm_shim.so")
DRIVERS = (TURNIP, PANVK)
INSTALL_COMMAND = "make mesa-compilers"


def cache_root() -> Path:
    """kernelgen's cache folder: $KERNELGEN_CACHE_DIR, else $XDG_CACHE_HOME/kernelgen, else ~/.cache/kernelgen
    (the same root the SPIR-V cache uses)."""
    root = os.environ.get("KERNELGEN_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kernelgen")
    return Path(root)


def install_dir() -> Path:
    return cache_root() / f"mesa-{DEBIAN_VERSION}"


def stamp_path() -> Path:
    """Written last by the build: its presence means every driver, shim and ICD file is in place."""
    return install_dir() / "installed"


def is_installed(driver: MesaDriver) -> bool:
    return stamp_path().is_file() and all(p.is_file() for p in (driver.installed_library(),
                                                                driver.installed_shim(), driver.icd_json()))
