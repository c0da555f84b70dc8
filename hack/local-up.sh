#!/usr/bin/env bash
# The main job: installs what is missing, builds, starts a private containerd with the offline
# test images and our kubelet on a copy of examples/manifests (the seed's nginx-pod), waits for
# the pod to serve HTTP, and prints how to look at it. Ctrl-C stops everything and removes what
# it created. Pass --once to tear down right after the pod is up.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "local-up.sh: run as root: it starts containerd, mounts filesystems and creates network interfaces" >&2
  exit 1
fi
hack/install-deps.sh
cargo build --locked --release -p kubelet -p e2e --bin kubelet --bin local-up
exec target/release/local-up "$@"
