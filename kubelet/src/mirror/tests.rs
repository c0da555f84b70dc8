use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::*;

fn static_pod(name: &str, hash: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "kube-system", "uid": hash,
                         "labels": {"tier": "control-plane"},
                         "annotations": {"kubernetes.io/config.source": "file",
                                         "kubernetes.io/config.hash": hash}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap(),
    )
}

fn mirror(name: &str, hash: &str, uid: &str) -> Pod {
    let mut m = mirror_pod(&static_pod(name, hash), "node-a", "node-uid");
    m.metadata.uid = Some(uid.into());
    m
}

fn view(pods: &[Pod]) -> BTreeMap<String, Pod> {
    pods.iter().map(|p| (full_name(p), p.clone())).collect()
}

/// A readable form of a plan: `create <name>` / `delete <uid> <reason>`.
fn show(actions: &[MirrorAction]) -> Vec<String> {
    actions
        .iter()
        .map(|a| match a {
            MirrorAction::Create(p) => format!("create {}", full_name(p)),
            MirrorAction::Delete { uid, reason, .. } => format!("delete {uid} {reason:?}"),
        })
        .collect()
}

/// What the plan sees and what it should do: (case, static pods, mirrors, orphans, actions).
type Case = (&'static str, Vec<Arc<Pod>>, Vec<Pod>, Orphans, Vec<&'static str>);

#[test]
fn the_plan_creates_replaces_recreates_and_deletes_orphans() {
    let web = static_pod("web-node-a", "h1");
    let mut deleted = mirror("web-node-a", "h1", "m1");
    deleted.metadata.deletion_timestamp = Some(api_time());
    let cases: Vec<Case> = vec![
        (
            "no mirror yet",
            vec![web.clone()],
            vec![],
            Orphans::Keep,
            vec!["create kube-system/web-node-a"],
        ),
        (
            "in step",
            vec![web.clone()],
            vec![mirror("web-node-a", "h1", "m1")],
            Orphans::Delete,
            vec![],
        ),
        (
            "manifest changed",
            vec![web.clone()],
            vec![mirror("web-node-a", "h0", "m0")],
            Orphans::Keep,
            vec!["delete m0 Outdated", "create kube-system/web-node-a"],
        ),
        (
            "mirror deleted through the API",
            vec![web.clone()],
            vec![deleted],
            Orphans::Keep,
            vec!["delete m1 DeletedThroughApi", "create kube-system/web-node-a"],
        ),
        (
            "manifest removed",
            vec![],
            vec![mirror("web-node-a", "h1", "m1")],
            Orphans::Delete,
            vec!["delete m1 Orphaned"],
        ),
        (
            "orphans kept outside housekeeping",
            vec![],
            vec![mirror("web-node-a", "h1", "m1")],
            Orphans::Keep,
            vec![],
        ),
    ];
    for (what, statics, mirrors, orphans, want) in cases {
        assert_eq!(
            show(&plan(&statics, &view(&mirrors), orphans, Some("node-uid"))),
            want,
            "{what}"
        );
    }
}

fn api_time() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH)
}

#[test]
fn a_mirror_carries_the_hash_and_the_node_owner_and_nothing_the_apiserver_assigns() {
    let m = mirror_pod(&static_pod("web-node-a", "h1"), "node-a", "n-uid");
    let a = m.metadata.annotations.as_ref().unwrap();
    assert_eq!(a[api::keys::CONFIG_MIRROR], "h1");
    assert_eq!(a[api::keys::CONFIG_SOURCE], "file");
    assert_eq!(m.metadata.labels.as_ref().unwrap()["tier"], "control-plane");
    let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Node", "node-a", "n-uid")
    );
    assert_eq!(owner.controller, Some(true));
    assert!(
        m.metadata.uid.is_none() && m.metadata.resource_version.is_none() && m.status.is_none()
    );
    assert_eq!(m.spec.as_ref().unwrap().node_name.as_deref(), Some("node-a"));
    assert!(is_mirror(&m) && is_mirror_of(&m, &static_pod("web-node-a", "h1")));
    assert!(!is_mirror_of(&m, &static_pod("web-node-a", "h2")));
}

#[test]
fn a_mirror_leaves_node_local_references_out_and_records_them_in_an_annotation() {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-node-a", "namespace": "default", "uid": "h1",
                     "annotations": {"kubernetes.io/config.source": "file",
                                     "kubernetes.io/config.hash": "h1"}},
        "spec": {
            "nodeName": "node-a",
            "volumes": [
                {"name": "cfg", "configMap": {"name": "app-config"}},
                {"name": "sec", "secret": {"secretName": "app-secret", "defaultMode": 0o400}},
                {"name": "proj", "projected": {"sources": [
                    {"configMap": {"name": "app-config"}},
                    {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                ]}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "info", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            ],
            "initContainers": [{"name": "init", "image": "busybox:1.35", "env": [
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "t"}}},
            ]}],
            "containers": [{"name": "app", "image": "busybox:1.35",
                "volumeMounts": [
                    {"name": "cfg", "mountPath": "/etc/config"},
                    {"name": "sec", "mountPath": "/etc/secret"},
                    {"name": "proj", "mountPath": "/etc/proj"},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "info", "mountPath": "/etc/info"},
                ],
                "env": [
                    {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "greeting"}}},
                    {"name": "PLAIN", "value": "x"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "envFrom": [{"secretRef": {"name": "app-secret"}, "prefix": "S_"}],
            }],
        },
    }))
    .unwrap();
    api::defaults::default_pod(&mut pod);
    let m = mirror_pod(&pod, "node-a", "node-uid");
    let spec = m.spec.as_ref().unwrap();
    let volumes: Vec<&str> = spec.volumes.iter().flatten().map(|v| v.name.as_str()).collect();
    assert_eq!(volumes, ["scratch", "info"]);
    let app = &spec.containers[0];
    let mounts: Vec<&str> = app.volume_mounts.iter().flatten().map(|v| v.name.as_str()).collect();
    assert_eq!(mounts, ["scratch", "info"]);
    let env: Vec<&str> = app.env.iter().flatten().map(|e| e.name.as_str()).collect();
    assert_eq!(env, ["PLAIN", "POD"], "fields and values stay; object references go");
    assert_eq!(app.env_from, None);
    assert_eq!(spec.init_containers.as_ref().unwrap()[0].env, None);
    let annotations = m.metadata.annotations.as_ref().unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&annotations[api::keys::STATIC_CONFIG]).unwrap();
    let names: Vec<&str> =
        record["volumes"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cfg", "sec", "proj"]);
    assert_eq!(
        record["volumes"][1]["secret"],
        json!({"secretName": "app-secret", "defaultMode": 0o400})
    );
    assert_eq!(record["containers"]["app"]["volumeMounts"].as_array().unwrap().len(), 3);
    assert_eq!(record["containers"]["app"]["env"][0]["name"], "GREETING");
    assert_eq!(record["containers"]["app"]["envFrom"][0]["prefix"], "S_");
    assert_eq!(record["initContainers"]["init"]["env"][0]["name"], "TOKEN");
    // Still a valid pod, still this static pod's mirror (no replacement loop).
    api::validation::validate_pod(&m).unwrap();
    assert_eq!(annotations[api::keys::CONFIG_MIRROR], "h1");
    let mut seen = m.clone();
    seen.metadata.uid = Some("mirror-uid".into());
    assert!(
        plan(&[Arc::new(pod.clone())], &view(&[seen]), Orphans::Delete, Some("node-uid"))
            .is_empty()
    );
    // A static pod without such references gets no annotation.
    let plain = mirror_pod(&static_pod("plain", "h2"), "node-a", "node-uid");
    assert!(!plain.metadata.annotations.unwrap().contains_key(api::keys::STATIC_CONFIG));
}

#[test]
fn a_mirror_owned_by_a_deleted_node_is_replaced_once_the_new_node_is_known() {
    let statics = [static_pod("web", "h1")];
    let mirrors = view(&[mirror("web", "h1", "m1")]);
    assert!(plan(&statics, &mirrors, Orphans::Delete, Some("node-uid")).is_empty());
    assert!(plan(&statics, &mirrors, Orphans::Delete, None).is_empty(), "no Node known yet");
    let actions = plan(&statics, &mirrors, Orphans::Delete, Some("new-node-uid"));
    assert_eq!(show(&actions), ["delete m1 OwnerGone", "create kube-system/web"]);
}
