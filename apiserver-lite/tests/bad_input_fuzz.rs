//! 10,000 random bodies over real HTTP crash nothing and disturb nothing else: mutated object
//! templates, created, replaced and patched (a target pod and its status), while a bystander
//! object stays intact.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::{Client, JSON, PODS, Server, pod, workload};

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 1e300),
        4 => json!(random_string(rng)),
        5 => json!(
            ["", "0", "-1", "1Gi", "100m", "Always", "TCP", "a.b/c", "\u{0}"]
                [rng.random_range(0..9)]
        ),
        6 => Value::Array(
            (0..rng.random_range(0..4)).map(|_| random_value(rng, depth - 1)).collect(),
        ),
        _ => Value::Object(
            (0..rng.random_range(0..4))
                .map(|_| (random_string(rng), random_value(rng, depth - 1)))
                .collect(),
        ),
    }
}

fn random_string(rng: &mut StdRng) -> String {
    let len = if rng.random_ratio(1, 50) {
        rng.random_range(0..100_000)
    } else {
        rng.random_range(0..20)
    };
    (0..len)
        .map(|_| {
            if rng.random_ratio(1, 10) { rng.random::<char>() } else { rng.random_range('a'..='z') }
        })
        .collect()
}

/// Replaces, removes or adds something at a random place in `v`.
fn mutate(rng: &mut StdRng, v: &mut Value) {
    let descend = rng.random_ratio(3, 4);
    match v {
        Value::Object(m) if !m.is_empty() && descend => {
            let key = m.keys().nth(rng.random_range(0..m.len())).unwrap().clone();
            match rng.random_range(0..6) {
                0 => {
                    m.remove(&key);
                }
                1 => {
                    m.insert(key, random_value(rng, 3));
                }
                _ => mutate(rng, m.get_mut(&key).unwrap()),
            }
        }
        Value::Array(a) if !a.is_empty() && descend => {
            let i = rng.random_range(0..a.len());
            mutate(rng, &mut a[i]);
        }
        Value::Object(m) if rng.random() => {
            m.insert(random_string(rng), random_value(rng, 3));
        }
        _ => *v = random_value(rng, 3),
    }
}

fn templates() -> Vec<(&'static str, Value)> {
    vec![
        (PODS, pod("fuzz")),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                            "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod("x")["spec"]}}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                   "spec": {"selector": {"app": "d"}, "ports": [{"port": 80, "targetPort": 8080}]}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        ),
        ("/apis/batch/v1/namespaces/default/jobs", workload("Job", "j", "Never")),
        ("/apis/batch/v1/namespaces/default/cronjobs", workload("CronJob", "cj", "OnFailure")),
        ("/apis/apps/v1/namespaces/default/daemonsets", workload("DaemonSet", "ds", "Always")),
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"resourceAttributes": {"verb": "get", "group": "apps", "resource": "deployments", "namespace": "default", "name": "d"}}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": "system:node:a", "groups": ["system:nodes"], "resourceAttributes": {"verb": "create", "resource": "nodes", "subresource": "proxy", "name": "a"}}}),
        ),
        (
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                   "spec": {"token": "abc", "audiences": ["x"]}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                   "spec": {"namespace": "default"}}),
        ),
    ]
}

/// A random body: raw bytes, a mutated or truncated object, deep nesting, or a YAML rendering.
fn random_body(rng: &mut StdRng, template: &Value) -> Vec<u8> {
    match rng.random_range(0..10) {
        0 => (0..rng.random_range(0..2048)).map(|_| rng.random()).collect(),
        1 => {
            let mut b = serde_json::to_vec(template).unwrap();
            b.truncate(rng.random_range(0..b.len()));
            b
        }
        2 => {
            let mut b = serde_json::to_vec(template).unwrap();
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..b.len());
                b[i] = rng.random();
            }
            b
        }
        3 => {
            let n = rng.random_range(1..5000);
            let (open, close) = if rng.random() { ("[", "]") } else { ("{\"a\":", "}") };
            format!("{}1{}", open.repeat(n), close.repeat(n)).into_bytes()
        }
        4 => serde_yaml_ng::to_string(template).unwrap().into_bytes(),
        _ => {
            let mut v = template.clone();
            for _ in 0..rng.random_range(1..6) {
                mutate(rng, &mut v);
            }
            serde_json::to_vec(&v).unwrap()
        }
    }
}

#[tokio::test]
async fn ten_thousand_random_bodies_crash_nothing_and_disturb_nothing_else() {
    let server = Server::start().await;
    let mut c = Client::new(server.addr);
    // A bystander the fuzzer never addresses, and a target it patches and replaces.
    let bystander = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}, "data": {"k": "v"}});
    let kept = c.json("POST", "/api/v1/namespaces/kube-system/configmaps", JSON, &bystander).await;
    assert_eq!(kept.code, 201);
    assert_eq!(c.json("POST", PODS, JSON, &pod("target")).await.code, 201);

    let seed = rand::random::<u64>();
    let mut rng = StdRng::seed_from_u64(seed);
    let templates = templates();
    let types = [
        Some(JSON),
        Some(JSON),
        Some("application/yaml"),
        Some("application/vnd.kubernetes.protobuf"),
        Some("application/merge-patch+json"),
        Some("application/strategic-merge-patch+json"),
        Some("application/json-patch+json"),
        None,
        Some("garbage/;;x=\"y"),
    ];
    let mut by_code = std::collections::BTreeMap::<u16, u32>::new();
    for i in 0..10_000 {
        let (path, template) = &templates[rng.random_range(0..templates.len())];
        let mut body = random_body(&mut rng, template);
        let ct = types[rng.random_range(0..types.len())];
        if ct == Some("application/vnd.kubernetes.protobuf") && rng.random() {
            body.splice(0..0, *b"k8s\0");
        }
        let (method, path) = match (rng.random_range(0..10), ct) {
            (_, Some(t)) if t.contains("patch") => ("PATCH", format!("{PODS}/target")),
            (0, _) => ("PUT", format!("{PODS}/target")),
            (1, _) => ("PUT", format!("{PODS}/target/status")),
            (2, _) => ("DELETE", format!("{PODS}/absent-{i}")),
            _ => ("POST", path.to_string()),
        };
        let ct = ct.filter(|_| !(method == "PATCH" && rng.random_ratio(1, 20)));
        let r = c.send(method, &path, ct, body).await;
        *by_code.entry(r.code).or_default() += 1;
        assert!(
            r.code < 500,
            "seed {seed}, request {i}: {method} {path} answered {}: {}",
            r.code,
            r.body
        );
        if r.code >= 400 {
            assert_eq!(r.body["kind"], "Status", "seed {seed}, request {i}: {}", r.body);
            assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{}", r.body);
        }
    }
    eprintln!("seed {seed}: answers by status code {by_code:?}");

    let after = c.send("GET", "/api/v1/namespaces/kube-system/configmaps/keep", None, vec![]).await;
    assert_eq!(after.body["metadata"]["resourceVersion"], kept.body["metadata"]["resourceVersion"]);
    assert_eq!(c.send("GET", "/readyz", None, vec![]).await.code, 200);
    server.stop().await;
}
