#!/usr/bin/env bash
# Benchmarks apiserver-lite (release build, TLS with the admin client certificate) with
# hack/bench_apiserver.py, a plain Python HTTP/1.1 client like the one upstream's figures in
# BENCHMARKS.md were taken with: creates/s sequential and with 16 clients, list latency (consistent
# and from the watch cache) and RSS at 10,000 pods, and write-to-event delay at 100 watchers.
#
#   hack/bench-apiserver.sh [--backend sqlite|etcd1|etcd3] [options of bench_apiserver.py]
#
# --backend: the embedded SQLite store (the default), or a private etcd (Debian's etcd-server)
# of one or three members on loopback ports (BENCH_ETCD_PORT, default 23790, and up), each with
# its data directory in the work directory, removed afterwards.
# Other options go to the Python script (--pods, --sequential, --clients, --lists, --watchers,
# --writes, --rbac-bindings N: requests as a token user RBAC allows over N bindings instead of
# the admin). Results go to stdout; BENCHMARKS.md records them with the machine and date.
set -euo pipefail
cd "$(dirname "$0")/.."
backend=sqlite
if [ "${1:-}" = "--backend" ]; then backend=${2:?--backend needs sqlite, etcd1 or etcd3}; shift 2; fi
case "$backend" in
  sqlite) members=0 ;;
  etcd1) members=1 ;;
  etcd3) members=3 ;;
  *) echo "bench-apiserver.sh: --backend $backend: want sqlite, etcd1 or etcd3" >&2; exit 2 ;;
esac
command -v python3 >/dev/null || { echo "bench-apiserver.sh: python3 is missing (hack/install-deps.sh installs it)" >&2; exit 1; }
if [ "$members" -gt 0 ] && ! command -v etcd >/dev/null; then
  echo "bench-apiserver.sh: etcd is missing (hack/install-deps.sh installs etcd-server)" >&2; exit 1
fi
cargo build --locked --release -p apiserver-lite
# The build's artifacts may still be in the page cache waiting to be written; each create's
# fsync would wait behind that writeback, so the first run after a build would read low.
sync
work=$(mktemp -d)
port=${BENCH_PORT:-16443}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

store=(--data-dir "$work/data")
etcd_pids=""
if [ "$members" -gt 0 ]; then
  base=${BENCH_ETCD_PORT:-23790}
  cluster=""
  for i in $(seq 0 $((members - 1))); do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 100 + i))"
  done
  servers=""
  for i in $(seq 0 $((members - 1))); do
    client=$((base + i)) peer=$((base + 100 + i))
    etcd --name "m$i" --data-dir "$work/etcd-$i" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "bench-$$" \
      >"$work/etcd-$i.log" 2>&1 &
    pids+=($!)
    etcd_pids+="${etcd_pids:+,}$!"
    servers+="${servers:+,}http://127.0.0.1:$client"
  done
  for i in $(seq 0 $((members - 1))); do
    for _ in $(seq 200); do
      curl -sf "http://127.0.0.1:$((base + i))/health" | grep -q '"health":"true"' && break
      sleep 0.1
    done
  done
  store=(--etcd-servers "$servers")
fi

echo 'bench-token,bench,7001,bench-clients' >"$work/tokens.csv"
target/release/apiserver-lite --secure-port "$port" --bind-address 127.0.0.1 \
  --cert-dir "$work/pki" "${store[@]}" --token-auth-file "$work/tokens.csv" \
  --disable-admission-plugins=ServiceAccount \
  2>"$work/apiserver.log" &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do
  [ -f "$work/pki/admin.key" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/apiserver.log" >&2; exit 1; }
  sleep 0.1
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), disk under $(df --output=source "$work" | tail -1)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "store: $backend$([ "$members" -gt 0 ] && echo " ($(etcd --version | head -1))")"
echo "client: Python $(python3 -c 'import platform; print(platform.python_version())') http.client over TLS (client certificate)"
python3 hack/bench_apiserver.py "https://127.0.0.1:$port" "$work/pki" "$pid" --etcd-pids "$etcd_pids" "$@"
