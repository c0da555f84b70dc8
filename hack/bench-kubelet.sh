#!/usr/bin/env bash
# Benchmarks the kubelet on a private containerd (release build): start latency for 1 pod and
# a 30-pod burst beside the direct-CRI floor, and idle RSS/CPU with 0, 30 and 110 pods.
# Results go to stdout; BENCHMARKS.md records them with the machine and date.
# Options: --runs N (default 20), --bursts N (5), --idle-seconds N (60), --idle-only (no start
# latencies), --idle-pods N (the idle windows at N pods alone; default 0, 30 and 110).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-kubelet.sh: run as root (it starts containerd)" >&2
  exit 1
fi
hack/install-deps.sh >/dev/null
cargo build --locked --release -p kubelet -p e2e --bin kubelet --bin bench-kubelet
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(containerd --version | cut -d' ' -f3)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-kubelet "$@"
