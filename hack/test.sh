#!/usr/bin/env bash
# Runs every test tier on this machine:
#   1. format and lint checks;
#   2. the hermetic tier (unit tests, fake CRI runtime over real sockets, temp dirs; no root);
#   3. the real tier, package `e2e` (private containerd, loopback registry; needs root).
# Installs missing Debian packages first (as root). Without root the real tier fails loudly
# unless E2E_SKIP_REAL_RUNTIME=1 opts out.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then
  hack/install-deps.sh
else
  echo "test.sh: not root: not installing packages; the real tier needs root" >&2
fi

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
step() { printf '\n== %s\n' "$*"; }

step "format"
cargo fmt --all -- --check
step "lint"
cargo clippy --locked --workspace --all-targets -- -D warnings

if command -v cargo-nextest >/dev/null 2>&1; then
  run_tests() { cargo nextest run --locked --profile ci "$@"; }
else
  run_tests() { cargo test --locked "$@"; }
fi

step "hermetic tier"
run_tests --workspace --exclude e2e
cargo test --locked --workspace --exclude e2e --doc

step "real tier (containerd, registry, the kubelet and apiserver binaries, the real kubectl)"
cargo build --locked --workspace --bins
hack/fetch-kubectl.sh >/dev/null
run_tests -p e2e

step "all tiers passed"
