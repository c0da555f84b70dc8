#!/usr/bin/env bash
# Benchmarks apiserver-lite (release build, SQLite store, TLS with the admin client certificate)
# with hack/bench_apiserver.py, a plain Python HTTP/1.1 client like the one upstream's figures in
# BENCHMARKS.md were taken with: creates/s sequential and with 16 clients, list latency and RSS
# at 10,000 pods, and write-to-event delay at 100 watchers.
# Options are passed to the Python script (--pods, --sequential, --clients, --lists, --watchers,
# --writes, --rbac-bindings N: requests as a token user RBAC allows over N bindings instead of
# the admin). Results go to stdout; BENCHMARKS.md records them with the machine and date.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "bench-apiserver.sh: python3 is missing (hack/install-deps.sh installs it)" >&2; exit 1; }
cargo build --locked --release -p apiserver-lite
work=$(mktemp -d)
port=${BENCH_PORT:-16443}
echo 'bench-token,bench,7001,bench-clients' >"$work/tokens.csv"
target/release/apiserver-lite --secure-port "$port" --bind-address 127.0.0.1 \
  --cert-dir "$work/pki" --data-dir "$work/data" --token-auth-file "$work/tokens.csv" \
  --disable-admission-plugins=ServiceAccount \
  2>"$work/apiserver.log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do
  [ -f "$work/pki/admin.key" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/apiserver.log" >&2; exit 1; }
  sleep 0.1
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), disk under $(df --output=source "$work" | tail -1)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "client: Python $(python3 -c 'import platform; print(platform.python_version())') http.client over TLS (client certificate)"
python3 hack/bench_apiserver.py "https://127.0.0.1:$port" "$work/pki" "$pid" "$@"
