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

# One build of every binary and test target, before any test runs: with the whole workspace in
# every command, dev-dependencies' features (tokio's test-util, ...) are unified once, so the
# hermetic and real tiers reuse the same artifacts instead of building the dependency graph again
# per feature set. The real tier's binaries are these too.
step "build (every binary and test target)"
cargo build --locked --workspace --bins --tests

if command -v cargo-nextest >/dev/null 2>&1; then
  hermetic() { cargo nextest run --locked --profile ci --workspace -E 'not package(e2e)'; }
  real() { cargo nextest run --locked --profile ci --workspace -E 'package(e2e)'; }
else
  hermetic() { cargo test --locked --workspace --exclude e2e; }
  real() { cargo test --locked -p e2e; }
fi

step "hermetic tier"
hermetic
cargo test --locked --workspace --doc

step "real tier (containerd, registry, the kubelet and apiserver binaries, the real kubectl)"
hack/fetch-kubectl.sh >/dev/null
real

step "all tiers passed"
