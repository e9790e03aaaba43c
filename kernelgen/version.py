"""The version, in a module of its own: every module may read it without importing the package (whose
__init__ re-exports the whole API)."""
__version__ = "0.1.0"
