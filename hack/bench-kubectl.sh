#!/usr/bin/env bash
# Benchmarks kubectl-lite beside the real kubectl v1.35 (release builds of kubectl-lite and
# apiserver-lite): the wall time and peak RSS of `get pods` with 100 pods, `apply -f` of 50
# documents (each run configuring all 50) and `get pods -A` with
# 10,000, each command run the same number of times, alternating, with a warm discovery cache
# for both (hack/bench_kubectl.py). Options go to the Python script (--runs N, --pods N).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "bench-kubectl.sh: python3 is missing (hack/install-deps.sh installs it)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-kubectl.sh: /usr/bin/time (GNU time) is missing (hack/install-deps.sh installs it)" >&2; exit 1; }
[ -x _output/bin/kubectl ] || { echo "bench-kubectl.sh: _output/bin/kubectl is missing (hack/fetch-kubectl.sh fetches it)" >&2; exit 1; }
cargo build --locked --release -p apiserver-lite -p cli
work=$(mktemp -d)
port=${BENCH_PORT:-16447}
target/release/apiserver-lite --secure-port "$port" --bind-address 127.0.0.1 \
  --cert-dir "$work/pki" --data-dir "$work/data" --disable-admission-plugins=ServiceAccount \
  2>"$work/apiserver.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do
  [ -f "$work/pki/admin.key" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/apiserver.log" >&2; exit 1; }
  sleep 0.1
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
python3 hack/bench_kubectl.py --kubeconfig "$work/pki/admin.kubeconfig" --work "$work" \
  --lite target/release/kubectl-lite --kubectl _output/bin/kubectl "$@"
