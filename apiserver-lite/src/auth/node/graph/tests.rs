use serde_json::{Value, json};

use super::*;

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn vertex(kind: Kind, name: &str) -> Vertex {
    Vertex::new(kind, "d", name)
}

/// A pod in `d` on `node` with `spec` merged in.
fn bound(name: &str, node: &str, spec: Value) -> Pod {
    let mut p = json!({"metadata": {"name": name, "namespace": "d"},
                       "spec": {"nodeName": node, "containers": [{"name": "c"}]}});
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    pod(p)
}

#[test]
fn a_pod_reaches_every_object_it_names_in_every_place_it_may_name_one() {
    let env = |kind: &str, name: &str| json!([{"name": "E", "valueFrom": {kind: {"name": name, "key": "k"}}}]);
    let p = bound(
        "web",
        "a",
        json!({
            "serviceAccountName": "runner",
            "imagePullSecrets": [{"name": "pull"}],
            "initContainers": [{"name": "i", "env": env("secretKeyRef", "init-env")}],
            "containers": [{"name": "c",
                "env": env("configMapKeyRef", "cm-env"),
                "envFrom": [{"secretRef": {"name": "s-from"}}, {"configMapRef": {"name": "cm-from"}}]}],
            "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "debug"}}]}],
            "volumes": [
                {"name": "s", "secret": {"secretName": "s-vol"}},
                {"name": "m", "configMap": {"name": "cm-vol"}},
                {"name": "p", "projected": {"sources": [
                    {"secret": {"name": "s-proj"}}, {"configMap": {"name": "cm-proj"}},
                    {"serviceAccountToken": {"path": "t"}}]}},
                {"name": "x", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi"}}},
                {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "e", "emptyDir": {}},
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"},
                               {"name": "tpl", "resourceClaimTemplateName": "t"},
                               {"name": "pending", "resourceClaimTemplateName": "t"}],
        }),
    );
    let mut p = p;
    p.status = Some(
        serde_json::from_value(json!({"resourceClaimStatuses": [
            {"name": "tpl", "resourceClaimName": "web-tpl-x"}, {"name": "pending"}]}))
        .unwrap(),
    );
    let edges = pod_edges(&p).unwrap();
    assert_eq!(edges.node, "a");
    let mut want: BTreeSet<Vertex> =
        ["pull", "init-env", "s-from", "debug", "s-vol", "s-proj", "csi"]
            .into_iter()
            .map(|n| vertex(Kind::Secret, n))
            .collect();
    want.extend(["cm-env", "cm-from", "cm-vol", "cm-proj"].map(|n| vertex(Kind::ConfigMap, n)));
    want.insert(vertex(Kind::ServiceAccount, "runner"));
    want.insert(vertex(Kind::PersistentVolumeClaim, "data"));
    want.insert(vertex(Kind::PersistentVolumeClaim, "web-scratch"));
    want.insert(vertex(Kind::ResourceClaim, "gpu-claim"));
    want.insert(vertex(Kind::ResourceClaim, "web-tpl-x"));
    assert_eq!(edges.reaches, want);
}

#[test]
fn an_unbound_pod_adds_nothing_and_a_mirror_pod_only_its_node() {
    let pending = pod(json!({"metadata": {"name": "p", "namespace": "d"},
                             "spec": {"containers": [{"name": "c"}],
                                      "volumes": [{"name": "s", "secret": {"secretName": "s"}}]}}));
    assert_eq!(pod_edges(&pending), None);
    let empty_node = bound("p", "", json!({}));
    assert_eq!(pod_edges(&empty_node), None);
    assert_eq!(pod_edges(&pod(json!({"metadata": {"name": "bare"}}))), None, "no spec at all");
    let mut mirror =
        bound("m", "a", json!({"volumes": [{"name": "s", "secret": {"secretName": "s"}}]}));
    mirror.metadata.annotations = Some([(MIRROR.to_string(), "h".to_string())].into());
    assert_eq!(pod_edges(&mirror), Some(PodEdges { node: "a".into(), reaches: BTreeSet::new() }));
    let g = Graph::default();
    g.set_pod("d", "m", pod_edges(&mirror));
    assert!(g.reaches("a", &vertex(Kind::Pod, "m")));
    assert!(!g.reaches("a", &vertex(Kind::Secret, "s")), "a mirror pod grants nothing");
}

#[test]
fn the_graph_follows_adds_updates_deletes_and_rebinding() {
    let g = Graph::default();
    let secret = vertex(Kind::Secret, "shared");
    let with = |name: &str, node: &str| {
        bound(name, node, json!({"volumes": [{"name": "s", "secret": {"secretName": "shared"}}]}))
    };
    g.set_pod("d", "one", pod_edges(&with("one", "a")));
    g.set_pod("d", "two", pod_edges(&with("two", "a")));
    assert!(g.reaches("a", &secret));
    assert!(!g.reaches("b", &secret));
    assert_eq!(g.size(), (2, 1));
    // One of two pods goes: the other still holds the edge.
    g.set_pod("d", "one", None);
    assert!(g.reaches("a", &secret));
    // An update that drops the reference drops the edge.
    g.set_pod("d", "two", pod_edges(&bound("two", "a", json!({}))));
    assert!(!g.reaches("a", &secret));
    assert!(g.reaches("a", &vertex(Kind::Pod, "two")));
    // Deleted and made again on another node (a rebinding, as the store sees it).
    g.set_pod("d", "two", pod_edges(&with("two", "b")));
    assert!(!g.reaches("a", &secret));
    assert!(!g.reaches("a", &vertex(Kind::Pod, "two")));
    assert!(g.reaches("b", &secret));
    assert!(g.reaches("b", &vertex(Kind::Pod, "two")));
    g.set_pod("d", "two", None);
    assert_eq!(g.size(), (0, 0), "nothing is left behind");
    // Removing what is not there is no error.
    g.set_pod("d", "never", None);
    g.set_pv("never", None);
}

#[test]
fn a_claim_leads_to_its_volume_and_the_volumes_secrets() {
    let g = Graph::default();
    g.set_pod(
        "d",
        "db",
        pod_edges(&bound(
            "db",
            "a",
            json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}),
        )),
    );
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "pv-1"},
        "spec": {
            "claimRef": {"namespace": "d", "name": "data"},
            "csi": {"driver": "x", "volumeHandle": "h",
                    "nodePublishSecretRef": {"name": "publish"},
                    "nodeStageSecretRef": {"name": "stage", "namespace": "ops"},
                    "controllerPublishSecretRef": {"name": "controller", "namespace": "d"}},
        },
    }))
    .unwrap();
    let refs = pv_edges(&pv).unwrap();
    assert_eq!(refs.claim, ("d".into(), "data".into()));
    assert_eq!(
        refs.secrets,
        [("d".to_string(), "publish".to_string()), ("ops".into(), "stage".into())].into(),
        "a reference without a namespace is the claim's; controller secrets stay hidden"
    );
    g.set_pv("pv-1", Some(refs));
    let pv_vertex = Vertex::new(Kind::PersistentVolume, "", "pv-1");
    assert!(g.reaches("a", &vertex(Kind::PersistentVolumeClaim, "data")));
    assert!(g.reaches("a", &pv_vertex));
    assert!(g.reaches("a", &Vertex::new(Kind::Secret, "d", "publish")));
    assert!(g.reaches("a", &Vertex::new(Kind::Secret, "ops", "stage")));
    assert!(!g.reaches("a", &Vertex::new(Kind::Secret, "d", "controller")));
    assert!(!g.reaches("b", &pv_vertex));
    // The pod goes: the claim, the volume and its secrets go with it.
    g.set_pod("d", "db", None);
    assert!(!g.reaches("a", &pv_vertex));
    assert!(!g.reaches("a", &Vertex::new(Kind::Secret, "d", "publish")));
    // An unbound volume adds nothing.
    let unbound: PersistentVolume =
        serde_json::from_value(json!({"metadata": {"name": "free"}, "spec": {}})).unwrap();
    assert_eq!(pv_edges(&unbound), None);
}

#[test]
fn a_relist_replaces_everything() {
    let g = Graph::default();
    let s = |n: &str| json!({"volumes": [{"name": "s", "secret": {"secretName": n}}]});
    g.set_pod("d", "old", pod_edges(&bound("old", "a", s("old"))));
    let fresh = pod_edges(&bound("new", "a", s("new"))).unwrap();
    g.replace(vec![(("d".into(), "new".into()), fresh)], vec![]);
    assert!(!g.reaches("a", &vertex(Kind::Secret, "old")));
    assert!(g.reaches("a", &vertex(Kind::Secret, "new")));
}
