"""The command line: a click group (commands.py, `main`) with one module per command family; the only package that prints
or exits."""
from .commands import main

__all__ = ["main"]
