#!/usr/bin/env python3
"""Times kubectl-lite and the real kubectl running the same commands against one apiserver.

Each command is run --runs times per tool, alternating tools, after one untimed run each that
warms both discovery caches (each tool has its own HOME). The apply case applies a file of 50
ConfigMaps whose annotation changes every run, so every run of either tool reads and patches
all 50 (`configured`), as an edited manifest set is re-applied. Wall time is measured around the
process; peak RSS is the tool's maximum resident set as GNU time reports it (see `run`). Prints medians and the ratio.
Only the standard library; hack/bench-kubectl.sh starts the server and calls this.
"""

import argparse
import json
import os
import statistics
import subprocess
import time


def run(tool, home, kubeconfig, args):
    """Wall time around the process, and its peak RSS as GNU time reports it.

    Not this script's own wait4: a child's ru_maxrss counts the memory of the process it was
    forked from until exec (the kernel records the old mm's high-water mark at exec), so a
    small tool run from this Python process would be charged Python's own 20-odd MiB. GNU time
    is small, so the tool it forks starts from almost nothing.
    """
    env = dict(os.environ, HOME=home, KUBECONFIG=kubeconfig)
    rss_file = os.path.join(home, "maxrss")
    start = time.perf_counter()
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", rss_file, tool, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)}: exit {p.returncode}: {p.stderr[:300]!r}")
    with open(rss_file) as fh:
        kib = int(fh.read().split()[-1])
    return wall, kib / 1024.0


def pods_list(namespace, n):
    items = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"pod-{i:05d}", "namespace": namespace, "labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.35"}]},
        }
        for i in range(n)
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def apply_file(work, namespace, run_id):
    """50 ConfigMaps as multi-document YAML (JSON is YAML), annotated with `run_id`."""
    docs = [
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"cm-{i:02d}",
                    "namespace": namespace,
                    "labels": {"app": "bench"},
                    "annotations": {"bench/run": str(run_id)},
                },
                "data": {"key": f"value-{i}", "other": "x" * 64},
            }
        )
        for i in range(50)
    ]
    f = os.path.join(work, "apply.yaml")
    with open(f, "w") as fh:
        fh.write("\n---\n".join(docs) + "\n")
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--lite", required=True)
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pods", type=int, default=10_000)
    a = ap.parse_args()
    homes = {}
    for name in ("lite", "kubectl"):
        homes[name] = os.path.join(a.work, "home-" + name)
        os.makedirs(homes[name], exist_ok=True)
    tools = {"lite": a.lite, "kubectl": a.kubectl}

    def setup(namespace, n):
        f = os.path.join(a.work, f"{namespace}.json")
        with open(f, "w") as fh:
            json.dump(pods_list(namespace, n), fh)
        run(a.lite, homes["lite"], a.kubeconfig, ["create", "-f", ns_file(namespace)])
        run(a.lite, homes["lite"], a.kubeconfig, ["create", "-f", f])

    def ns_file(namespace):
        f = os.path.join(a.work, f"ns-{namespace}.json")
        with open(f, "w") as fh:
            json.dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, fh)
        return f

    setup("bench100", 100)
    setup("bench", a.pods - 100)
    run(a.lite, homes["lite"], a.kubeconfig, ["create", "-f", ns_file("bench-apply")])
    runs = iter(range(1_000_000))

    def apply_args():
        return ["apply", "-f", apply_file(a.work, "bench-apply", next(runs))]

    cases = [
        ("get pods (100 pods)", lambda: ["get", "pods", "-n", "bench100"]),
        ("apply -f (50 documents, each configured)", apply_args),
        (f"get pods -A ({a.pods:,} pods)", lambda: ["get", "pods", "-A"]),
    ]
    print(f"runs per tool: {a.runs}; medians; kubectl-lite / kubectl")
    for label, args in cases:
        for name in tools:  # warm the discovery caches
            run(tools[name], homes[name], a.kubeconfig, args())
        walls = {n: [] for n in tools}
        rss = {n: [] for n in tools}
        for _ in range(a.runs):
            for name in tools:
                w, r = run(tools[name], homes[name], a.kubeconfig, args())
                walls[name].append(w)
                rss[name].append(r)
        lw, kw = statistics.median(walls["lite"]), statistics.median(walls["kubectl"])
        lr, kr = statistics.median(rss["lite"]), statistics.median(rss["kubectl"])
        print(
            f"{label}: wall {lw * 1e3:.0f} ms vs {kw * 1e3:.0f} ms ({lw / kw:.2f}x); "
            f"peak RSS {lr:.1f} MiB vs {kr:.1f} MiB ({lr / kr:.2f}x)"
        )


if __name__ == "__main__":
    main()
