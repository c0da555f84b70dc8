#!/usr/bin/env bash
# Benchmarks the scheduler's throughput (release build) as upstream's scheduler_perf does:
# simulated nodes (Node objects with no kubelet) in a fresh apiserver-lite, pending pods created
# before the scheduler starts, and pods/s from the first to the last binding seen by a watch.
# Defaults: 1,000 then 5,000 nodes, 5,000 pods, 3 runs each (medians printed).
# Options go to tests/src/bin/bench-scheduler.rs: --nodes 1000,5000 --pods 5000 --runs 3
# --scheduler-flag <flag> (repeatable, passed to the scheduler). BENCHMARKS.md records results
# with the machine and date.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release -p apiserver-lite -p scheduler
cargo build --locked --release -p e2e --bin bench-scheduler
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-scheduler "$@"
