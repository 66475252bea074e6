"""jaxmb's benchmarks: five scripts, one question each, sharing `benchmarks._harness`.

Run them all with ``python -m benchmarks [--quick]`` (benchmarks/README.md).
"""
