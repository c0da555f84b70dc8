//! What recording `managedFields` costs one write: `cargo bench -p apiserver-lite --bench
//! managedfields [-- ROUNDS]` (default 20000). The object is the pod `hack/bench_apiserver.py`
//! creates, decoded and defaulted as a create stores it. Timed: a creation's entry (the empty
//! object to the pod), an update by a second manager (one label changed), and an apply that
//! changes an image. Medians and p99 in microseconds; results go to BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

use std::time::Instant;

use apiserver_lite::managedfields::FieldManager;
use apiserver_lite::objects;
use apiserver_lite::resources::PODS;
use serde_json::{Value, json};

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "labels": {"app": "bench", "tier": "web"}},
        "spec": {"containers": [{
            "name": "nginx",
            "image": "busybox-httpd:1.35",
            "ports": [{"containerPort": 80}],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
        }]},
    })
}

fn time(rounds: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[rounds / 2], samples[rounds * 99 / 100])
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let pods = &PODS;
    let (mut obj, _) = objects::decode(pods, pod("p")).unwrap();
    objects::apply_defaults(pods, &mut obj).unwrap();
    let fm = FieldManager::new("v1", "Pod", "", true);
    let empty = fm.empty_object();

    let (median, p99) = time(rounds, || {
        let mut new = obj.clone();
        fm.update(&empty, &mut new, "python", true);
        std::hint::black_box(new);
    });
    println!("create entry: median {median:.1} µs, p99 {p99:.1} µs");

    let mut live = obj.clone();
    fm.update(&empty, &mut live, "python", true);
    let mut changed = live.clone();
    changed["metadata"]["labels"]["tier"] = json!("db");
    let (median, p99) = time(rounds, || {
        let mut new = changed.clone();
        fm.update(&live, &mut new, "kubectl-label", false);
        std::hint::black_box(new);
    });
    println!("update entry: median {median:.1} µs, p99 {p99:.1} µs");

    let mut config = pod("p");
    config["spec"]["containers"][0]["image"] = json!("busybox-httpd:1.36");
    let (median, p99) = time(rounds, || {
        std::hint::black_box(fm.apply(&live, &config, "kubectl", true).unwrap());
    });
    println!("apply (forced): median {median:.1} µs, p99 {p99:.1} µs");

    let (median, p99) = time(rounds, || {
        std::hint::black_box(obj.clone());
    });
    println!("(the pod's clone alone: median {median:.1} µs, p99 {p99:.1} µs)");
}
