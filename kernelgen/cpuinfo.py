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
