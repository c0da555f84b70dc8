#!/usr/bin/env bash
# Benchmarks pod startup latency through the whole cluster path (release build): apiserver-lite,
# the scheduler and our kubelet on a private containerd; each pod from its create request to the
# watch event showing all its containers running, paced (--rate per second) and in a burst.
# Results go to stdout; BENCHMARKS.md records them with the machine and date.
# Options: --pods N (default 100), --rate R (5), --runs N (3), --no-scheduler.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-cluster.sh: run as root (it starts containerd)" >&2
  exit 1
fi
hack/install-deps.sh >/dev/null
cargo build --locked --release -p kubelet -p apiserver-lite -p scheduler -p e2e \
  --bin kubelet --bin apiserver-lite --bin scheduler --bin bench-cluster
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(containerd --version | cut -d' ' -f3)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-cluster "$@"
