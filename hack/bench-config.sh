#!/usr/bin/env bash
# Benchmarks ConfigMap, Secret and projected token volumes on a private containerd with
# apiserver-lite and a joined kubelet (release builds): the time 110 pods take to become Ready
# with those volumes beside 110 pods without, the kubelet's RSS with each, and how soon a
# ConfigMap edit reaches the file a running container mounts (median and p99 over 20 edits).
# Results go to stdout; BENCHMARKS.md records them with the machine and date.
# Options: --rounds N (default 3), --updates N (20).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-config.sh: run as root (it starts containerd)" >&2
  exit 1
fi
hack/install-deps.sh >/dev/null
cargo build --locked --release -p kubelet -p apiserver-lite -p e2e \
  --bin kubelet --bin apiserver-lite --bin bench-config
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(containerd --version | cut -d' ' -f3)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-config "$@"
