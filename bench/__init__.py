"""Benchmarks: `python -m bench` (to come). They print figures and never assert timings."""
