"""Benchmarks: the four shared workloads of bench/WORKLOADS.md on this library.

`python -m bench.run` runs them all; see `bench.run` for the options and `bench.workloads`
for what exactly is measured.
"""
