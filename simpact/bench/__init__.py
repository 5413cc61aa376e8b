"""Benchmarks: `simpact bench ...`."""
