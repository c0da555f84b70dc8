#![allow(clippy::unwrap_used)]
use std::time::Duration;

use k8s_openapi::api::core::v1::{LocalObjectReference, ServiceAccount};
use serde_json::json;

use super::*;
use crate::serviceaccount::fake::{FakeObjects, meta};

fn pods() -> &'static ResourceType {
    &crate::resources::PODS
}

fn tolerations_only() -> Admission {
    Admission::default().without(Plugin::ServiceAccount)
}

fn accounts(automount: Option<bool>) -> FakeObjects {
    let objects = FakeObjects::default();
    objects.put_account(ServiceAccount {
        metadata: meta("ns", "default", "sa-1"),
        automount_service_account_token: automount,
        ..Default::default()
    });
    objects
}

#[tokio::test]
async fn pods_get_the_node_lifecycle_tolerations_unless_they_have_them() {
    let objects = FakeObjects::default();
    let a = Admission { default_not_ready_toleration_seconds: 60, ..tolerations_only() };
    let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    a.admit_create(pods(), Some("ns"), &mut pod, &objects).await.unwrap();
    assert_eq!(
        pod["spec"]["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    // One it tolerates already (any effect counts) is left alone; a toleration of every
    // taint covers both.
    let mut own = json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}});
    a.admit_update(pods(), None, &mut own).unwrap();
    let keys: Vec<&str> = own["spec"]["tolerations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]);
    let mut all = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
    a.admit_update(pods(), None, &mut all).unwrap();
    assert_eq!(all["spec"]["tolerations"].as_array().unwrap().len(), 1);
    // A NoSchedule toleration of the key does not count; subresources and other kinds
    // are not touched.
    let mut no_schedule = json!({"spec": {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]}});
    a.admit_update(pods(), None, &mut no_schedule).unwrap();
    assert_eq!(no_schedule["spec"]["tolerations"].as_array().unwrap().len(), 3);
    let mut status = json!({"spec": {}});
    a.admit_update(pods(), Some("status"), &mut status).unwrap();
    assert_eq!(status, json!({"spec": {}}));
    let mut cm = json!({"data": {}});
    a.admit_create(&crate::resources::CONFIG_MAPS, Some("ns"), &mut cm, &objects).await.unwrap();
    assert_eq!(cm, json!({"data": {}}));
}

#[tokio::test]
async fn a_pod_runs_as_default_with_upstreams_token_volume_in_every_container() {
    let objects = accounts(None);
    let mut pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
        "initContainers": [{"name": "init"}],
        "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}],
        "volumes": [{"name": "own", "emptyDir": {}}],
    }});
    Admission::default().admit_create(pods(), Some("ns"), &mut pod, &objects).await.unwrap();
    let spec = &pod["spec"];
    assert_eq!(
        (spec["serviceAccountName"].as_str(), spec["serviceAccount"].as_str()),
        (Some("default"), Some("default"))
    );
    let volume = &spec["volumes"][1];
    let name = volume["name"].as_str().unwrap();
    let suffix = name.strip_prefix("kube-api-access-").unwrap();
    assert!(
        suffix.len() == 5 && suffix.bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
        "{name}"
    );
    assert_eq!(
        volume["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]})
    );
    let mount = json!({"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(spec["containers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(
        spec["containers"][1]["volumeMounts"].as_array().unwrap().len(),
        1,
        "a container with its own mount at the path keeps it"
    );
    assert!(spec.get("imagePullSecrets").is_none());
}

#[tokio::test]
async fn automount_is_the_pods_choice_then_the_accounts() {
    let pod = |automount: Option<bool>| {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}});
        if let Some(a) = automount {
            p["spec"]["automountServiceAccountToken"] = json!(a);
        }
        p
    };
    let volumes = |p: &Value| p["spec"]["volumes"].as_array().map_or(0, Vec::len);
    for (account, own, want) in [
        (None, None, 1),
        (Some(false), None, 0),
        (Some(false), Some(true), 1),
        (Some(true), Some(false), 0),
        (None, Some(false), 0),
    ] {
        let objects = accounts(account);
        let mut p = pod(own);
        Admission::default().admit_create(pods(), Some("ns"), &mut p, &objects).await.unwrap();
        assert_eq!(volumes(&p), want, "account {account:?}, pod {own:?}");
        assert_eq!(p["spec"]["serviceAccountName"], "default");
    }
}

#[tokio::test(start_paused = true)]
async fn a_missing_account_refuses_the_pod_in_upstreams_words() {
    let objects = accounts(None);
    let mut p = json!({"metadata": {"name": "p"}, "spec": {"serviceAccountName": "robot", "containers": [{"name": "a"}]}});
    let err =
        Admission::default().admit_create(pods(), Some("ns"), &mut p, &objects).await.unwrap_err();
    assert_eq!((err.code, err.reason), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "pods \"p\" is forbidden: error looking up service account ns/robot: serviceaccount \"robot\" not found"
    );
    // The default account is looked for ten times (about 1-2 s) before the pod is refused.
    let empty = FakeObjects::default();
    let started = tokio::time::Instant::now();
    let mut p = json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "a"}]}});
    let err =
        Admission::default().admit_create(pods(), Some("ns"), &mut p, &empty).await.unwrap_err();
    assert!(err.message.ends_with(
        "error looking up service account ns/default: serviceaccount \"default\" not found"
    ));
    assert!((Duration::from_millis(900)..Duration::from_secs(2)).contains(&started.elapsed()));
}

#[tokio::test]
async fn the_accounts_pull_secrets_go_to_pods_without_their_own() {
    let objects = FakeObjects::default();
    objects.put_account(ServiceAccount {
        metadata: meta("ns", "default", "sa-1"),
        image_pull_secrets: Some(vec![LocalObjectReference { name: "regcred".into() }]),
        ..Default::default()
    });
    let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}});
    Admission::default().admit_create(pods(), Some("ns"), &mut p, &objects).await.unwrap();
    assert_eq!(p["spec"]["imagePullSecrets"], json!([{"name": "regcred"}]));
    let mut own = json!({"metadata": {"name": "p"}, "spec": {"imagePullSecrets": [{"name": "mine"}], "containers": [{"name": "a"}]}});
    Admission::default().admit_create(pods(), Some("ns"), &mut own, &objects).await.unwrap();
    assert_eq!(own["spec"]["imagePullSecrets"], json!([{"name": "mine"}]));
}

#[tokio::test]
async fn mirror_pods_are_left_alone_but_may_not_name_accounts_or_secrets() {
    let objects = accounts(None);
    let mirror = |spec: Value| json!({"metadata": {"name": "m", "annotations": {"kubernetes.io/config.mirror": "h"}}, "spec": spec});
    let mut plain = mirror(json!({"containers": [{"name": "a"}]}));
    Admission::default().admit_create(pods(), Some("ns"), &mut plain, &objects).await.unwrap();
    assert!(
        plain["spec"].get("serviceAccountName").is_none() && plain["spec"].get("volumes").is_none()
    );
    for (spec, why) in [
        (
            json!({"serviceAccountName": "default", "containers": [{"name": "a"}]}),
            "a mirror pod may not reference service accounts",
        ),
        (
            json!({"containers": [{"name": "a", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"containers": [{"name": "a"}], "volumes": [{"name": "v", "secret": {"secretName": "s"}}]}),
            "a mirror pod may not reference secrets",
        ),
        (
            json!({"containers": [{"name": "a"}], "volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}),
            "a mirror pod may not use ServiceAccountToken volume projections",
        ),
    ] {
        let mut p = mirror(spec);
        let err = Admission::default()
            .admit_create(pods(), Some("ns"), &mut p, &objects)
            .await
            .unwrap_err();
        assert_eq!(err.message, format!("pods \"m\" is forbidden: {why}"));
    }
}

#[test]
fn plugins_follow_upstreams_flags() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(plugins(&[], &[]).unwrap(), Plugin::ALL);
    assert_eq!(
        plugins(&s(&["ServiceAccount"]), &s(&["DefaultTolerationSeconds"])).unwrap(),
        [Plugin::ServiceAccount, Plugin::NodeRestriction]
    );
    assert_eq!(
        plugins(&[], &s(&["NodeRestriction"])).unwrap(),
        [Plugin::DefaultTolerationSeconds, Plugin::ServiceAccount]
    );
    assert_eq!(
        plugins(&[], &s(&["PodSecurity"])).unwrap_err().to_string(),
        "disable-admission-plugins plugin \"PodSecurity\" is unknown or not implemented by apiserver-lite (it has DefaultTolerationSeconds, ServiceAccount and NodeRestriction)"
    );
    assert_eq!(
        plugins(&s(&["ServiceAccount"]), &s(&["ServiceAccount"])).unwrap_err(),
        PluginError::Overlap("ServiceAccount".into())
    );
}
