#!/usr/bin/env bash
# Installs the kubelet on this host as a systemd service: the binary in $PREFIX/bin (default
# /usr/local), the unit in /etc/systemd/system, examples/kubelet.yaml as
# /etc/kubernetes/kubelet.yaml (an existing one is kept), and the static pod and static config
# directories, root-owned and 0700 (CIS 4.1.x: whoever can write them decides what runs as
# root; existing ones are tightened). Then reloads systemd; start it with
# `systemctl enable --now containerd kubelet`.
#
# KUBELET_BIN=path installs that binary instead of building a release one; DESTDIR=dir stages
# the whole tree under dir (no systemctl), for packaging and for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root: it writes /usr/local, /etc/systemd and /etc/kubernetes" >&2
  exit 1
fi
prefix=${PREFIX:-/usr/local}
dest=${DESTDIR:-}
bin=${KUBELET_BIN:-}
if [ -z "$bin" ]; then
  cargo build --locked --release -p kubelet --bin kubelet
  bin=target/release/kubelet
fi
[ -x "$bin" ] || { echo "install.sh: $bin is not an executable kubelet" >&2; exit 1; }

install -D -m 0755 -o root -g root "$bin" "$dest$prefix/bin/kubelet"
install -d -m 0755 "$dest/etc/systemd/system"
sed "s#/usr/local/bin/kubelet#$prefix/bin/kubelet#" systemd/kubelet.service \
  > "$dest/etc/systemd/system/kubelet.service"
chmod 0644 "$dest/etc/systemd/system/kubelet.service"
install -d -m 0755 -o root -g root "$dest/etc/kubernetes"
if [ -e "$dest/etc/kubernetes/kubelet.yaml" ]; then
  echo "install.sh: keeping the existing $dest/etc/kubernetes/kubelet.yaml"
else
  install -m 0600 -o root -g root examples/kubelet.yaml "$dest/etc/kubernetes/kubelet.yaml"
fi
for d in manifests static-config; do
  install -d -m 0700 -o root -g root "$dest/etc/kubernetes/$d"
  chown root:root "$dest/etc/kubernetes/$d"
  chmod 0700 "$dest/etc/kubernetes/$d"
done
if [ -z "$dest" ] && command -v systemctl >/dev/null 2>&1; then
  systemctl daemon-reload
fi
echo "install.sh: installed $prefix/bin/kubelet and kubelet.service under ${dest:-/}; start it with: systemctl enable --now containerd kubelet"
