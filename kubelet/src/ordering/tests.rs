#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use super::*;

fn n(ns: &str, name: &str) -> PodName {
    (ns.to_string(), name.to_string())
}

fn pod(name: &str, after: Option<&str>) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("{name}-node-a"), "namespace": "kube-system",
            "annotations": after.map(|a| serde_json::json!({"kubelet-rs.io/after": a})),
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x"}]},
    }))
    .unwrap()
}

#[test]
fn names_are_manifest_names_in_the_pods_namespace_or_qualified() {
    let got = parse(" etcd, ,other/db ", "kube-system", "api", "Node-A").unwrap();
    assert_eq!(got, [n("kube-system", "etcd-node-a"), n("other", "db-node-a")]);
    assert!(
        parse("api", "kube-system", "api", "n").unwrap_err().contains("cannot wait for itself")
    );
    assert!(parse("Bad_Name", "default", "api", "n").unwrap_err().starts_with("\"Bad_Name\": "));
    assert_eq!(after(&pod("api", Some("etcd"))), [n("kube-system", "etcd-node-a")]);
    assert!(after(&pod("api", None)).is_empty());
    assert!(after(&pod("api", Some("api"))).is_empty(), "refused at validation; nothing here");
}

#[test]
fn a_pod_waits_until_what_it_names_is_ready() {
    let api = pod("api", Some("etcd,cm"));
    let me = n("kube-system", "api-node-a");
    let mut pods = HashMap::from([
        (n("kube-system", "etcd-node-a"), Known { ready: true, after: vec![] }),
        (n("kube-system", "cm-node-a"), Known { ready: false, after: vec![] }),
        (me.clone(), Known { ready: false, after: after(&api) }),
    ]);
    let why = blocked(&me, &api, &pods).unwrap();
    assert_eq!(why, "waiting for kube-system/cm-node-a to be Ready (kubelet-rs.io/after)");
    pods.get_mut(&n("kube-system", "cm-node-a")).unwrap().ready = true;
    assert_eq!(blocked(&me, &api, &pods), None);
    pods.remove(&n("kube-system", "etcd-node-a"));
    assert!(blocked(&me, &api, &pods).unwrap().contains("etcd-node-a (no such pod on this node)"));
    assert_eq!(blocked(&me, &pod("x", None), &pods), None, "no declaration: never held");
}

#[test]
fn a_cycle_is_found_and_does_not_hold_its_pods() {
    let (a, b, c) = (pod("a", Some("c")), pod("b", Some("a")), pod("c", Some("b")));
    let pods: HashMap<PodName, Known> = [("a", &a), ("b", &b), ("c", &c)]
        .into_iter()
        .map(|(name, p)| {
            (n("kube-system", &format!("{name}-node-a")), Known { ready: false, after: after(p) })
        })
        .collect();
    let me = n("kube-system", "a-node-a");
    let found = cycle(&me, &pods).unwrap();
    let names: Vec<&str> = found.iter().map(|p| p.1.as_str()).collect();
    assert_eq!(names, ["a-node-a", "c-node-a", "b-node-a", "a-node-a"]);
    assert_eq!(blocked(&me, &a, &pods), None);
    // Outside the cycle: a pod waiting on one of them is still held.
    let d = pod("d", Some("a"));
    let mut with_d = pods.clone();
    with_d.insert(n("kube-system", "d-node-a"), Known { ready: false, after: after(&d) });
    assert!(cycle(&n("kube-system", "d-node-a"), &with_d).is_none());
    assert!(blocked(&n("kube-system", "d-node-a"), &d, &with_d).is_some());
}
