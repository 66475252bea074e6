"""``python -m benchmarks``: run every benchmark (benchmarks/run.py)."""

from benchmarks.run import main

main()
