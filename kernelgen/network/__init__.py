"""Whole networks: manifests, running them, and the arena their tensors share."""
