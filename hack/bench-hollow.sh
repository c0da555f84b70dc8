#!/usr/bin/env bash
# Benchmarks a burst of pods on hollow nodes (release build): apiserver-lite, the scheduler and
# N of our kubelets, each on its own fake CRI runtime (in the bench process; no containerd, no
# root needed: as root the kubelets run as nobody). Times until every pod is created, bound, and
# Running with Ready=True as a watch sees it; each component's CPU seconds and RSS; idle cost.
# Results go to stdout; BENCHMARKS.md records them with the machine and date.
# Options: --hollow N (nodes, default 10), --pods P (1000), --runs R (3), --inflight K (32 creates
# in flight), --exec-probe (an exec readiness probe on every pod), --idle-seconds S (30);
# --deployment (the controller-manager joins: a Deployment scaled 0 → P, a rolling update, its
# RSS with --cached C pods (10000) in the API; --qps Q, its --kube-api-qps/burst, default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --release -p kubelet -p apiserver-lite -p scheduler -p controllers -p e2e \
  --bin kubelet --bin apiserver-lite --bin scheduler --bin controller-manager --bin bench-hollow
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
exec target/release/bench-hollow "$@"
