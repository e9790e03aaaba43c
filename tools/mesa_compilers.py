"""`make mesa-compilers`: build Mesa's Turnip (Adreno) and PanVK (Mali) Vulkan drivers and their noop DRM shims
into kernelgen's cache folder, so that `kernelgen stats --device adreno-7xx|adreno-6xx|mali-valhall` can run
their compilers without the GPUs (issue 31).

Source: Debian trixie's source package, pinned in kernelgen/targets/vulkan/mesa_pin.py. The .dsc and the
upstream tarball are downloaded from deb.debian.org's pool and checked against pinned sha256 sums. That is
chosen over `apt-get source` with a private source list because it needs no Sources index (tens of MB, signed
with keys bookworm's keyring may not hold), no dpkg-dev, and gives the same bytes every time or a clear error.
Debian's patches (the .debian.tar.xz) concern packaging and other drivers, so only the upstream tarball is used.

Build: meson (>= 1.1, from PyPI into a tool venv in the cache folder: bookworm has 1.0) with only the two
Vulkan drivers, no Gallium driver, no LLVM, the drm-shim tool; ninja builds only the four libraries. Apt
packages it needs (bison, flex, libdrm-dev, ...) are installed when run as root. A finished build writes a
stamp; with the stamp present this script only says so. When something is missing it prints one line.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelgen.targets.vulkan import mesa_pin as pin  # noqa: E402

APT_PACKAGES = ("gcc", "g++", "pkg-config", "ninja-build", "bison", "flex", "libdrm-dev", "libexpat1-dev",
                "zlib1g-dev", "python3-venv")
PIP_PACKAGES = ("meson>=1.1", "mako>=0.8", "pyyaml>=5", "packaging>=20")
MESON_OPTIONS = ("-Dvulkan-drivers=freedreno,panfrost", "-Dgallium-drivers=", "-Dtools=drm-shim",
                 "-Dllvm=disabled", "-Dplatforms=", "-Dglx=disabled", "-Degl=disabled", "-Dgbm=disabled",
                 "-Dopengl=false", "-Dgles1=disabled", "-Dgles2=disabled", "-Dvalgrind=disabled",
                 "-Dlibunwind=disabled", "-Dlmsensors=disabled", "-Dzstd=disabled", "-Dxmlconfig=disabled",
                 "-Dvideo-codecs=", "-Dbuild-tests=false", "-Dbuildtype=release", "-Db_ndebug=true",
                 "--wrap-mode=nodownload")
REQUIRED = os.environ.get("KERNELGEN_REQUIRE_TOOLCHAINS") == "1"


class Missing(Exception):
    """What stops the build, in one line."""


def main() -> int:
    if pin.stamp_path().is_file():
        print(f"mesa-compilers: Mesa {pin.DEBIAN_VERSION} (turnip, panvk, noop shims) in {pin.install_dir()}")
        return 0
    start = time.monotonic()
    try:
        _apt_packages()
        python = _tool_venv()
        source = _source()
        _build(python, source)
    except Missing as why:
        print(f"mesa-compilers: not built: {why}")
        return 1 if REQUIRED else 0
    print(f"mesa-compilers: built Mesa {pin.DEBIAN_VERSION} (turnip, panvk, noop shims) in "
          f"{time.monotonic() - start:.0f} s into {pin.install_dir()}")
    return 0


def _apt_packages(packages: tuple[str, ...] = APT_PACKAGES) -> None:
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0:
        raise Missing(f"not root; run: sudo apt-get install {' '.join(missing)}")
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        if subprocess.run(argv, env=env, capture_output=True).returncode:
            raise Missing(f"`{' '.join(argv)}` failed; run it by hand to see why")


def _tool_venv(folder: Path | None = None, packages: tuple[str, ...] = PIP_PACKAGES) -> Path:
    """meson and the Python modules Mesa's generators import, apart from the project's own venv."""
    folder = folder or pin.install_dir()
    venv = folder / "tool-venv"
    python = venv / "bin" / "python3"
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(venv)], "creating the meson venv", folder)
    _run([str(python), "-m", "pip", "install", "-q", *packages], "pip install meson mako pyyaml", folder)
    return python


def _source() -> Path:
    folder = pin.install_dir() / "src"
    tree = folder / f"mesa-{pin.UPSTREAM_VERSION}"
    if (tree / "meson.build").is_file():
        return tree
    dsc = _download(pin.DSC_NAME, pin.DSC_SHA256, folder)
    if pin.ORIG_SHA256 not in dsc.read_text():
        raise Missing(f"{pin.DSC_NAME} does not list the pinned sha256 of {pin.ORIG_NAME}")
    orig = _download(pin.ORIG_NAME, pin.ORIG_SHA256, folder)
    with tarfile.open(orig) as archive:
        archive.extractall(folder, filter="data")
    return tree


def _download(name: str, sha256: str, folder: Path) -> Path:
    target = folder / name
    if target.is_file() and _sha256(target) == sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(name + ".part")
    try:
        with urllib.request.urlopen(pin.POOL_URL + name, timeout=60) as response, partial.open("wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as error:
        raise Missing(f"cannot download {pin.POOL_URL + name} ({error}); Debian may have dropped "
                      f"{pin.DEBIAN_VERSION} from its pool: update the pin in {pin.__name__}") from None
    if _sha256(partial) != sha256:
        raise Missing(f"{name} from {pin.POOL_URL} does not match its pinned sha256")
    partial.replace(target)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build(python: Path, source: Path) -> None:
    build = pin.install_dir() / "build"
    env = os.environ | {"PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}  # Mesa runs `python3`
    if not (build / "build.ninja").is_file():
        _run([str(python.parent / "meson"), "setup", str(build), str(source), *MESON_OPTIONS], "meson setup",
             pin.install_dir(), env)
    targets = [path for driver in pin.DRIVERS for path in (driver.library, driver.shim)]
    _run(["ninja", "-C", str(build), *targets], "ninja", pin.install_dir(), env)
    for driver in pin.DRIVERS:
        lib = driver.installed_library().parent
        lib.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / driver.library, driver.installed_library())
        shutil.copy2(build / driver.shim, driver.installed_shim())
        driver.icd_json().parent.mkdir(parents=True, exist_ok=True)
        driver.icd_json().write_text(json.dumps({"file_format_version": "1.0.1", "ICD": {
            "library_path": str(driver.installed_library()), "api_version": "1.4.303"}}, indent=2) + "\n")
    pin.stamp_path().write_text(f"mesa {pin.DEBIAN_VERSION}\n")


def _run(argv: list[str], what: str, folder: Path, env: dict[str, str] | None = None) -> None:
    """Run a build step with its output in a log file; on failure, one line naming the step and the log."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "build.log"
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode:
        last = [line for line in log.read_text().splitlines() if line.strip()][-1:]
        raise Missing(f"{what} failed (log: {log}){': ' + last[0][:200] if last else ''}")


if __name__ == "__main__":
    sys.exit(main())
