"""The runtime as one process among others: messages taken in, the workers that take
runs, leases and peers, control requests, upkeep, waiting on runs, and the records
people read and act on (export, erasure, notes, memories, feedback)."""

__all__: list[str] = []
