"""The command line: a click group (main.py) with one module per command family; the only package that prints
or exits."""
from .commands import main

__all__ = ["main"]
