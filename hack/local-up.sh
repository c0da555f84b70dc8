#!/usr/bin/env bash
# The main job: a one-node cluster on this machine. Installs what is missing, builds, fetches the
# real kubectl, and starts a private containerd with the offline test images, apiserver-lite
# (SQLite, TLS), the scheduler, the controller-manager and our kubelet (joined, with a copy of examples/manifests as its
# static pods); then runs the seed's flow, `kubectl create -f examples/manifests/nginx-pod.yaml`,
# until `nginx-pod 1/1 Running` serves HTTP, then `kubectl create deployment web
# --image=busybox-httpd:1.35 --replicas=2` until `web 2/2`, and prints what to try. Ctrl-C stops everything and
# removes what it created. Pass --once to tear down right after the pod is up; --etcd to store
# in a private etcd (Debian's etcd-server) with two apiservers on it instead of SQLite.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "local-up.sh: run as root: it starts containerd, mounts filesystems and creates network interfaces" >&2
  exit 1
fi
hack/install-deps.sh
hack/fetch-kubectl.sh >/dev/null
cargo build --locked --release -p kubelet -p apiserver-lite -p scheduler -p controllers -p e2e \
  --bin kubelet --bin apiserver-lite --bin scheduler --bin controller-manager --bin local-up
exec target/release/local-up "$@"
