"""The CPU a measurement ran on, from /proc/cpuinfo's first processor.

Under a hypervisor the model name is often generic: KVM shows a Cooper Lake and an Emerald Rapids Xeon both as
"Intel(R) Xeon(R) Processor", and runs on the two are not comparable (issue 50). The family, model and stepping
numbers still tell them apart (6/85 and 6/207 there), so the name kernelgen prints and keys caches by carries them."""
from __future__ import annotations

from pathlib import Path


def first_processor(text: str | None = None) -> dict[str, str]:
    """The `name: value` fields of the first processor block of /proc/cpuinfo (or `text`); {} where unreadable."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def model_text(fields: dict[str, str]) -> str:
    """'<model name> [family F, model M, stepping S]' (the numbers where cpuinfo gives them), '' without a name."""
    name = fields.get("model name", "")
    numbers = [f"{label} {fields[key]}" for key, label in (("cpu family", "family"), ("model", "model"),
                                                             ("stepping", "stepping")) if fields.get(key)]
    return f"{name} [{', '.join(numbers)}]" if name and numbers else name


CACHE_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def cache_size_bytes(text: str) -> int:
    """sysfs' cache size ('48K', '2048K', '491520K', '1M', '65536') in bytes; 0 where unreadable."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    return int(digits) * scale if digits.isdigit() else 0


def data_caches(folder: Path = CACHE_SYSFS) -> dict[int, int]:
    """level -> bytes of the first CPU's data or unified cache at each level (sysfs index*/level, type, size);
    {} where sysfs does not say (not Linux, a container hiding it)."""
    sizes: dict[int, int] = {}
    for index in sorted(folder.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = cache_size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size:
            sizes[level] = max(size, sizes.get(level, 0))
    return sizes


def last_level_cache_bytes(folder: Path = CACHE_SYSFS) -> int:
    """The highest-level data or unified cache's size: what a buffer meant to evict every cache must pass. 0 where
    sysfs does not say."""
    sizes = data_caches(folder)
    return sizes[max(sizes)] if sizes else 0
