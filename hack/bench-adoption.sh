#!/usr/bin/env bash
# Benchmarks adoption: a starting kubelet's time to report 110 running static pods Running with
# no container restarted, for pods upstream's kubelet v1.35 made (replayed into the fake
# runtime) and for its own on a private containerd (release builds).
# Results go to stdout; BENCHMARKS.md records them with the machine and date.
# Options: --runs N (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-adoption.sh: run as root (it starts containerd)" >&2
  exit 1
fi
hack/install-deps.sh >/dev/null
cargo build --locked --release -p kubelet -p e2e --bin kubelet --bin bench-adoption
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(containerd --version | cut -d' ' -f3)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-adoption "$@"
