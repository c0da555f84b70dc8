#!/usr/bin/env bash
# Benchmarks probes on a private containerd with apiserver-lite and a joined kubelet (release
# builds): the kubelet's and the runtime's CPU and the kubelet's RSS with 110 pods without and
# with probes (httpGet readiness + exec liveness, both every second), and the readiness latency
# from a server answering 200 to Ready=True seen by a watch (50 pods).
# Results go to stdout; BENCHMARKS.md records them with the machine and date.
# Options: --window-seconds N (default 60), --latency-pods N (50), --http-only (no exec probes).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-probes.sh: run as root (it starts containerd)" >&2
  exit 1
fi
hack/install-deps.sh >/dev/null
cargo build --locked --release -p kubelet -p apiserver-lite -p e2e \
  --bin kubelet --bin apiserver-lite --bin bench-probes
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(containerd --version | cut -d' ' -f3)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-probes "$@"
