"""Benchmarks: each prints ``name: value unit`` lines with the ratio to its limit."""
