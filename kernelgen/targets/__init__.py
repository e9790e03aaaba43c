"""The registry of targets: one explicit dict, no scanning (STYLE.md)."""
from .base import Target
from .c import C

TARGETS: dict[str, Target] = {"c": C}

__all__ = ["TARGETS", "Target"]
