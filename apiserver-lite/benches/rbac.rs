//! What one RBAC decision costs with 1,000 bindings stored: `cargo bench -p apiserver-lite
//! --bench rbac [-- BINDINGS]` (default 1000). The bindings: nine RoleBindings in each of
//! BINDINGS/10 namespaces (one user each, to a namespace Role) and the rest ClusterRoleBindings
//! (one user each, to a ClusterRole), beside the bootstrap policy. It times the chain a request
//! goes through (`Authorizer`, Node then RBAC) for a user allowed by a RoleBinding, one allowed
//! by a ClusterRoleBinding, and one no binding names (refused: every binding in the namespace and
//! cluster-wide is looked at). Medians and p99 over batches of 1,000 decisions; results go to
//! BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed run

use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver_lite::auth::rbac::{Index, Rbac};
use apiserver_lite::auth::{Authorizer, User};
use apiserver_lite::resources::PODS;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const GROUP: &str = "rbac.authorization.k8s.io";

fn rule(resources: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(resources.iter().map(|r| (*r).to_string()).collect()),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..PolicyRule::default()
    }
}

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: ns.map(Into::into), ..ObjectMeta::default() }
}

fn user_subject(name: &str) -> Vec<Subject> {
    vec![Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some(GROUP.into()),
        namespace: None,
    }]
}

fn index(bindings: usize) -> Index {
    let mut index = Index::bootstrap();
    let namespaces = bindings / 10;
    for n in 0..namespaces {
        let ns = format!("ns-{n}");
        index.add_role(&ns, "reader", vec![rule(&["configmaps"]), rule(&["pods", "pods/log"])]);
        for b in 0..9 {
            index.add_role_binding(RoleBinding {
                metadata: meta(&format!("b-{b}"), Some(&ns)),
                role_ref: RoleRef {
                    api_group: GROUP.into(),
                    kind: "Role".into(),
                    name: "reader".into(),
                },
                subjects: Some(user_subject(&format!("user-{n}-{b}"))),
            });
        }
    }
    index.add_cluster_role(ClusterRole {
        metadata: meta("bench-reader", None),
        rules: Some(vec![rule(&["services"]), rule(&["pods", "pods/log"])]),
        ..ClusterRole::default()
    });
    for c in 0..bindings - namespaces * 9 {
        index.add_cluster_role_binding(ClusterRoleBinding {
            metadata: meta(&format!("cb-{c}"), None),
            role_ref: RoleRef {
                api_group: GROUP.into(),
                kind: "ClusterRole".into(),
                name: "bench-reader".into(),
            },
            subjects: Some(user_subject(&format!("cluster-user-{c}"))),
        });
    }
    index
}

fn user(name: &str) -> User {
    User { name: name.into(), groups: vec!["system:authenticated".into()], ..User::default() }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let bindings: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(|a| a.parse().expect("BINDINGS: a number"))
        .unwrap_or(1000);
    let authz = Authorizer::node_rbac(Arc::new(Rbac::with_index(index(bindings))));
    let pods = &PODS;
    let last_ns = format!("ns-{}", bindings / 10 - 1);
    let cluster_user = format!("cluster-user-{}", bindings - bindings / 10 * 9 - 1);
    let cases: [(&str, User, &str, bool); 3] = [
        (
            "allowed by a RoleBinding",
            user(&format!("user-{}-8", bindings / 10 - 1)),
            &last_ns,
            true,
        ),
        ("allowed by a ClusterRoleBinding", user(&cluster_user), &last_ns, true),
        ("refused (no binding names the user)", user("nobody"), &last_ns, false),
    ];
    println!("RBAC decision with {bindings} bindings (median / p99 of batches of 1,000):");
    for (what, u, ns, allowed) in &cases {
        let decide = || authz.authorize(u, "list", pods, Some(ns), None, Some("log")).is_ok();
        assert_eq!(decide(), *allowed, "{what}");
        let mut batches = Vec::new();
        for _ in 0..300 {
            let start = Instant::now();
            for _ in 0..1000 {
                std::hint::black_box(decide());
            }
            batches.push(start.elapsed() / 1000);
        }
        batches.sort();
        println!(
            "  {what:<40} median {:>8.2?}  p99 {:>8.2?}",
            percentile(&batches, 0.5),
            percentile(&batches, 0.99)
        );
    }
}
