"""Benchmarks (issue 4): ``python -m bench`` prints one table; ``--quick`` is the CI-sized run.

They print figures and ratios against a baseline measured in the same run; they
never assert timings. Workloads:

1. standard thread (``bench.thread``): N messages, each a ``lookup`` call then an answer;
2. the floor (``bench.floor``): the same rows in the rule's 4 commits, 2 flushed,
   through ``sqlite3`` on the calling thread, interleaved with 1 message by message;
3. resume (``bench.resume``): a cold load of a 10,000-entry thread, startup recovery;
4. concurrency (``bench.concurrency``): 50 threads x 10 messages, 100 ms model;
5. memory (``bench.memory``): peak RSS, one subprocess per case.
"""
