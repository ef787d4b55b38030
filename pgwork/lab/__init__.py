"""The lab: `pgwork bench` reproduces the reference write-up's measurements on this machine.

Each experiment is a module (`claims`, `held`, `history`, `crash`, `drain`) that returns
measurements; `results` appends them to results/benchmark.csv, `report` regenerates
docs/benchmarks.md from that CSV alone, `plots` draws the figures.
"""
