"""The loops over target primitives, each once: validation, benchmarks, sweeps, and what a run records."""
