"""numalign benchmarks (``make bench``). Never part of the test suite, never gating CI."""
