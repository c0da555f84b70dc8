#!/usr/bin/env python3
"""Measures an API server the way its issue's targets were measured upstream: a plain Python
HTTP/1.1 client (http.client over TLS, the admin kubeconfig's client certificate).

  creates/s sequential (one connection) and with 16 concurrent clients (16 processes),
  list latency with 10,000 pods stored, the delay from a write to its event at each of
  100 watchers, and the server's RSS with 10,000 pods stored.

Usage: bench_apiserver.py URL CERT_DIR PID [--pods N] [--lists N] [--writes N] [--rbac-bindings N]
                          [--breakdown N]

With --breakdown N (last, after everything else) one connection makes N each of `GET /version`
(the client, TLS and HTTP alone), creates with `?dryRun=All` (everything but storage) and
creates, and prints each one's median latency: where a sequential create's time goes.

With --rbac-bindings N the measured requests are made not as the admin (system:masters, which
the authorizer lets through before asking RBAC) but as the token user `bench`, whom RBAC allows
through a ClusterRoleBinding to cluster-admin stored after N-1 other bindings, so every request
pays for an RBAC decision over N bindings.
Only the standard library; hack/bench-apiserver.sh starts the server and calls this.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import ssl
import statistics
import threading
import time
import urllib.parse

NS = "bench"
# The bearer token of the `bench` user (set with --rbac-bindings): sent instead of the admin
# client certificate.
TOKEN_ENV = "BENCH_TOKEN"


def tls_context(url, cert_dir):
    """TLS to the server at `url` as its admin, from the PKI apiserver-lite wrote in `cert_dir`."""
    server = urllib.parse.urlparse(url)
    ctx = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.crt"))
    if not os.environ.get(TOKEN_ENV):
        ctx.load_cert_chain(os.path.join(cert_dir, "admin.crt"), os.path.join(cert_dir, "admin.key"))
    return server.hostname, server.port, ctx


def auth(headers):
    token = os.environ.get(TOKEN_ENV)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def connect(target):
    host, port, ctx = target
    return http.client.HTTPSConnection(host, port, context=ctx, timeout=60)


def request(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = auth({"Content-Type": "application/json", "Accept": "application/json"})
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    payload = resp.read()
    if resp.status >= 300:
        raise RuntimeError(f"{method} {path}: {resp.status} {payload[:300]!r}")
    return payload


def pod(name):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "bench", "tier": "web"}},
        "spec": {
            "containers": [
                {
                    "name": "nginx",
                    "image": "busybox-httpd:1.35",
                    "ports": [{"containerPort": 80}],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ]
        },
    }


def create_many(target, prefix, count):
    conn = connect(target)
    lat = []
    for i in range(count):
        t = time.perf_counter()
        request(conn, "POST", f"/api/v1/namespaces/{NS}/pods", pod(f"{prefix}-{i}"))
        lat.append(time.perf_counter() - t)
    conn.close()
    return lat


def _worker(args):
    url, cert_dir, prefix, count = args
    return create_many(tls_context(url, cert_dir), prefix, count)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    """User plus system CPU time the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def breakdown(target, n):
    """Median latency of n each of GET /version, dry-run creates and creates, on one connection."""
    conn = connect(target)
    steps = [
        ("GET /version", lambda i: request(conn, "GET", "/version")),
        ("create ?dryRun=All", lambda i: request(conn, "POST", f"/api/v1/namespaces/{NS}/pods?dryRun=All", pod(f"dry-{i}"))),
        ("create", lambda i: request(conn, "POST", f"/api/v1/namespaces/{NS}/pods", pod(f"breakdown-{i}"))),
    ]
    medians = {}
    for label, step in steps:
        lat = []
        for i in range(n):
            t = time.perf_counter()
            step(i)
            lat.append(time.perf_counter() - t)
        medians[label] = statistics.median(lat)
    conn.close()
    version, dry, create = medians["GET /version"], medians["create ?dryRun=All"], medians["create"]
    print(f"one create's latency, medians of {n} on one connection: {create * 1e3:.2f} ms; "
          f"with dryRun=All {dry * 1e3:.2f} ms (storage {(create - dry) * 1e3:.2f} ms); "
          f"GET /version {version * 1e3:.2f} ms (processing {(dry - version) * 1e3:.2f} ms)")


class Watcher(threading.Thread):
    """One watch connection; records when each pod name's MODIFIED event arrives."""

    def __init__(self, target, rv):
        super().__init__(daemon=True)
        self.conn = connect(target)
        self.conn.request("GET", f"/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dwatched", headers=auth({}))
        self.resp = self.conn.getresponse()
        self.seen = {}

    def run(self):
        while True:
            line = self.resp.readline()
            if not line:
                return
            now = time.perf_counter()
            ev = json.loads(line)
            marker = ev["object"]["metadata"].get("annotations", {}).get("bench/seq")
            if marker is not None:
                self.seen[marker] = now


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("cert_dir")
    ap.add_argument("pid", type=int)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--sequential", type=int, default=2_000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--lists", type=int, default=20)
    ap.add_argument("--watchers", type=int, default=100)
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--rbac-bindings", type=int, default=0)
    ap.add_argument("--breakdown", type=int, default=0)
    ap.add_argument("--token", default="bench-token")
    ap.add_argument("--etcd-pids", default="", help="etcd members' pids (comma separated), for their RSS")
    a = ap.parse_args()
    target = tls_context(a.url, a.cert_dir)
    conn = connect(target)
    request(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    if a.rbac_bindings:
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        for i in range(a.rbac_bindings - 1):
            request(conn, "POST", f"{rbac}/namespaces/{NS}/rolebindings", {
                "metadata": {"name": f"filler-{i}"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"filler-{i}"}],
            })
        request(conn, "POST", f"{rbac}/clusterrolebindings", {
            "metadata": {"name": "bench"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bench"}],
        })
        conn.close()
        os.environ[TOKEN_ENV] = a.token
        target = tls_context(a.url, a.cert_dir)
        conn = connect(target)
        time.sleep(1)  # the index follows the store's watch
        request(conn, "GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
        print(f"as the token user `bench`, allowed by RBAC over {a.rbac_bindings} bindings")

    cpu = cpu_seconds(a.pid)
    lat = create_many(target, "seq", a.sequential)
    cpu_per = (cpu_seconds(a.pid) - cpu) / len(lat)
    print(f"sequential creates: {len(lat) / sum(lat):.0f}/s over {len(lat)}; latency p50 {pct(lat, 50) * 1e3:.2f} ms, p99 {pct(lat, 99) * 1e3:.2f} ms; server CPU {cpu_per * 1e3:.2f} ms per create")

    rest = a.pods - a.sequential
    per = rest // a.clients
    cpu = cpu_seconds(a.pid)
    t = time.perf_counter()
    with multiprocessing.Pool(a.clients) as p:
        lats = p.map(_worker, [(a.url, a.cert_dir, f"c{c}", per) for c in range(a.clients)])
    took = time.perf_counter() - t
    all_lat = [x for ls in lats for x in ls]
    cpu = cpu_seconds(a.pid) - cpu
    print(f"{a.clients} concurrent clients: {len(all_lat) / took:.0f} creates/s over {len(all_lat)}; latency p50 {pct(all_lat, 50) * 1e3:.2f} ms, p99 {pct(all_lat, 99) * 1e3:.2f} ms; server CPU {cpu / len(all_lat) * 1e3:.2f} ms per create, {cpu / took * 100:.0f}% of a core")

    stored = json.loads(request(conn, "GET", "/api/v1/pods?limit=1"))
    total = stored["metadata"].get("remainingItemCount", 0) + len(stored["items"])
    for path, how in [("/api/v1/pods", "consistent (resourceVersion unset)"),
                      ("/api/v1/pods?resourceVersion=0", "from the watch cache (resourceVersion=0)")]:
        times = []
        for _ in range(a.lists):
            t = time.perf_counter()
            body = request(conn, "GET", path)
            times.append(time.perf_counter() - t)
        n = len(json.loads(body)["items"])
        print(f"list of {n} pods ({len(body) / 1e6:.1f} MB JSON), {how}: median {statistics.median(times) * 1e3:.0f} ms, min {min(times) * 1e3:.0f} ms over {a.lists}")
    print(f"apiserver RSS with {total} pods stored: {rss_mib(a.pid):.1f} MiB")
    etcd = [int(p) for p in a.etcd_pids.split(",") if p]
    if etcd:
        each = ", ".join(f"{rss_mib(p):.1f}" for p in etcd)
        print(f"etcd RSS with {total} pods stored: {each} MiB ({len(etcd)} member(s))")

    watched = json.loads(request(conn, "POST", f"/api/v1/namespaces/{NS}/pods", pod("watched")))
    rv = watched["metadata"]["resourceVersion"]
    watchers = [Watcher(target, rv) for _ in range(a.watchers)]
    for w in watchers:
        w.start()
    time.sleep(1)
    sent = {}
    for i in range(a.writes):
        patch = {"metadata": {"annotations": {"bench/seq": str(i)}}}
        sent[str(i)] = time.perf_counter()
        conn.request("PATCH", f"/api/v1/namespaces/{NS}/pods/watched", body=json.dumps(patch).encode(), headers=auth({"Content-Type": "application/merge-patch+json"}))
        conn.getresponse().read()
        time.sleep(0.02)
    time.sleep(2)
    delays = [w.seen[k] - t0 for w in watchers for k, t0 in sent.items() if k in w.seen]
    missing = a.watchers * a.writes - len(delays)
    print(f"watch delivery, {a.watchers} watchers x {a.writes} writes: p50 {pct(delays, 50) * 1e3:.1f} ms, p99 {pct(delays, 99) * 1e3:.1f} ms, max {max(delays) * 1e3:.1f} ms, {missing} missed")
    if a.breakdown:
        breakdown(target, a.breakdown)


if __name__ == "__main__":
    main()
