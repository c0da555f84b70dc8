//! ConfigMaps, Secrets and the downward API in pods on real containerd, with the real kubectl:
//! files (modes, a secret volume on tmpfs), env (`configMapKeyRef`, `secretKeyRef`, `envFrom`
//! with a prefix), updates reaching the files of a running container (a ConfigMap edit, a label
//! change) through `..data`, a pod waiting in `CreateContainerConfigError` for a ConfigMap and
//! starting once it exists, and no tmpfs left on the node once the pod is gone.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use e2e::cluster::JoinedNode;
use e2e::{eventually, leaks, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);
/// How long an update may take to reach a running container's files.
const UPDATE: Duration = Duration::from_secs(10);

const OBJECTS: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  greeting: hello
  level: debug
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
type: Opaque
data:
  password: aHVudGVyMg==
"#;

fn config_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "cv", "labels": {"app": "cv"}, "annotations": {"note": "first"}},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "volumes": [
                {"name": "config", "configMap": {"name": "app-config"}},
                {"name": "config-ro", "configMap": {"name": "app-config", "defaultMode": 0o400}},
                {"name": "secret", "secret": {"secretName": "app-secret"}},
                {"name": "info", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                ]}},
            ],
            "containers": [{
                "name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/config"},
                    {"name": "config-ro", "mountPath": "/etc/config-ro"},
                    {"name": "secret", "mountPath": "/etc/secret"},
                    {"name": "info", "mountPath": "/etc/info"},
                ],
                "env": [
                    {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "greeting"}}},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "password"}}},
                ],
                "envFrom": [{"configMapRef": {"name": "app-config"}, "prefix": "CFG_"}],
            }],
        },
    }))
    .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the real kubectl; panics with its stderr and the cluster's logs when it fails.
fn kubectl(cluster: &JoinedNode, args: &[&str]) -> String {
    let out = cluster.api.kubectl(args).unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", cluster.logs(&text(&out.stderr)));
    text(&out.stdout)
}

/// `kubectl exec <pod> -- <command>`'s stdout, `None` when it fails.
fn exec(cluster: &JoinedNode, pod: &str, command: &[&str]) -> Option<String> {
    let mut args = vec!["exec", pod, "--"];
    args.extend_from_slice(command);
    let out = cluster.api.kubectl(&args).ok()?;
    out.status.success().then(|| text(&out.stdout))
}

async fn running(cluster: &JoinedNode, pods: &Api<Pod>, name: &str) {
    eventually(&format!("{name} running"), WAIT, POLL, || async {
        let s = pods.get(name).await.ok()?.status?.container_statuses?;
        s.iter().all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
}

/// Polls `command` in the pod until its output satisfies `done`, within [`UPDATE`]; returns
/// the output and how long it took.
async fn until(
    cluster: &JoinedNode,
    what: &str,
    command: &[&str],
    done: impl Fn(&str) -> bool,
) -> (String, Duration) {
    let started = Instant::now();
    let out = eventually(what, UPDATE, Duration::from_millis(100), || async {
        exec(cluster, "cv", command).filter(|o| done(o))
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    (out, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_sees_config_maps_and_secrets_as_files_and_env_and_updates_reach_its_files() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let c = &cluster;
    let client = c.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let objects = c.api.dir().join("objects.yaml");
    std::fs::write(&objects, OBJECTS).unwrap();
    kubectl(c, &["apply", "-f", objects.to_str().unwrap()]);
    pods.create(&PostParams::default(), &config_pod()).await.unwrap();
    running(c, &pods, "cv").await;

    // Files, with upstream's modes: 0644 by default, defaultMode honoured.
    assert_eq!(exec(c, "cv", &["cat", "/etc/config/greeting"]).unwrap(), "hello");
    assert_eq!(exec(c, "cv", &["cat", "/etc/secret/password"]).unwrap(), "hunter2");
    let modes = exec(
        c,
        "cv",
        &[
            "stat",
            "-L",
            "-c",
            "%a %n",
            "/etc/config/greeting",
            "/etc/config-ro/greeting",
            "/etc/secret/password",
        ],
    )
    .unwrap();
    assert_eq!(
        modes,
        "644 /etc/config/greeting\n400 /etc/config-ro/greeting\n644 /etc/secret/password\n"
    );
    // The user-visible names are links through ..data.
    assert_eq!(exec(c, "cv", &["readlink", "/etc/config/greeting"]).unwrap(), "..data/greeting\n");

    // The secret volume is a tmpfs, in the container and on the node.
    let mounts = exec(c, "cv", &["cat", "/proc/mounts"]).unwrap();
    let secret_fs = mounts.lines().find(|l| l.split(' ').nth(1) == Some("/etc/secret"));
    assert_eq!(secret_fs.and_then(|l| l.split(' ').nth(2)), Some("tmpfs"), "{mounts}");
    let on_node = leaks::mounts_under(&c.kubelet.root_dir());
    assert!(
        on_node.iter().any(|m| m.ends_with("volumes/kubernetes.io~secret/secret")),
        "{on_node:?}"
    );

    // Env: key refs and envFrom with its prefix.
    let env = exec(c, "cv", &["sh", "-c", "echo $GREETING $PASS $CFG_greeting $CFG_level"]);
    assert_eq!(env.as_deref(), Some("hello hunter2 hello debug\n"));

    // The downward API volume, and a label change reaching it.
    assert_eq!(exec(c, "cv", &["cat", "/etc/info/labels"]).unwrap(), "app=\"cv\"");
    assert!(exec(c, "cv", &["cat", "/etc/info/annotations"]).unwrap().contains("note=\"first\""));
    kubectl(c, &["label", "pod", "cv", "tier=backend"]);
    let (labels, took) = until(c, "the new label in the file", &["cat", "/etc/info/labels"], |o| {
        o.contains("tier=\"backend\"")
    })
    .await;
    assert_eq!(labels, "app=\"cv\"\ntier=\"backend\"");
    eprintln!("label change visible after {took:?}");

    // Editing the mounted ConfigMap: ..data is swapped, the file follows within a second or so.
    let before = exec(c, "cv", &["readlink", "/etc/config/..data"]).unwrap();
    kubectl(c, &["patch", "configmap", "app-config", "-p", r#"{"data":{"greeting":"bonjour"}}"#]);
    let (greeting, took) =
        until(c, "the edited ConfigMap in the file", &["cat", "/etc/config/greeting"], |o| {
            o == "bonjour"
        })
        .await;
    assert_eq!(greeting, "bonjour");
    eprintln!("ConfigMap edit visible after {took:?}");
    assert!(took < Duration::from_secs(5), "an edit reaches the file through the watch: {took:?}");
    let after = exec(c, "cv", &["readlink", "/etc/config/..data"]).unwrap();
    assert_ne!(before, after, "..data points at a new timestamped directory");
    assert!(after.starts_with("..") && after.trim() != "..data", "{after}");
    let dirs = exec(c, "cv", &["ls", "-a", "/etc/config"]).unwrap();
    let stamped =
        dirs.lines().filter(|l| l.starts_with("..") && *l != ".." && *l != "..data").count();
    assert_eq!(stamped, 1, "the old timestamped directory is gone: {dirs}");
    assert_eq!(exec(c, "cv", &["cat", "/etc/config-ro/greeting"]).unwrap(), "bonjour");
    // Env is fixed at the container's start, as upstream.
    assert_eq!(exec(c, "cv", &["sh", "-c", "echo $GREETING"]).as_deref(), Some("hello\n"));

    // Deleted: the pod's tmpfs is detached from the node.
    pods.delete("cv", &DeleteParams::default()).await.unwrap();
    eventually("cv gone and its mounts detached", WAIT, POLL, || async {
        let gone = pods.get_opt("cv").await.ok()?.is_none();
        (gone && leaks::mounts_under(&c.kubelet.root_dir()).is_empty()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    cluster.stop().await.unwrap();
}

fn waiting_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "late"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "late-config", "key": "mode"}}}],
            }],
        },
    }))
    .unwrap()
}

/// The app container's waiting reason and message.
async fn waiting(pods: &Api<Pod>) -> Option<(String, String)> {
    let s = pods.get("late").await.ok()?.status?.container_statuses?;
    let w = s.first()?.state.as_ref()?.waiting.as_ref()?;
    Some((w.reason.clone().unwrap_or_default(), w.message.clone().unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_referring_to_a_missing_config_map_waits_and_starts_once_it_is_created() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = JoinedNode::start(NODE).await.unwrap();
    let c = &cluster;
    let client = c.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &waiting_pod()).await.unwrap();
    let want = |message: &'static str| {
        let pods = pods.clone();
        async move {
            eventually(message, WAIT, POLL, || async {
                let (reason, got) = waiting(&pods).await?;
                (reason == "CreateContainerConfigError" && got == message).then_some(())
            })
            .await
        }
    };
    want("configmap \"late-config\" not found")
        .await
        .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let described = kubectl(c, &["get", "pod", "late"]);
    assert!(described.contains("CreateContainerConfigError"), "{described}");

    // The ConfigMap appears without the key: upstream's message for the key.
    kubectl(c, &["create", "configmap", "late-config", "--from-literal=other=x"]);
    want("couldn't find key mode in ConfigMap default/late-config")
        .await
        .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // The key arrives: the watch wakes the pod, which starts with it.
    let started = Instant::now();
    kubectl(c, &["patch", "configmap", "late-config", "-p", r#"{"data":{"mode":"fast"}}"#]);
    eventually("late running", WAIT, Duration::from_millis(100), || async {
        let s = pods.get("late").await.ok()?.status?.container_statuses?;
        s.first()?.state.as_ref()?.running.as_ref().map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    eprintln!("started {:?} after the key was added", started.elapsed());
    assert_eq!(exec_late(c).as_deref(), Some("fast\n"));
    cluster.stop().await.unwrap();
}

fn exec_late(cluster: &JoinedNode) -> Option<String> {
    exec(cluster, "late", &["sh", "-c", "echo $MODE"])
}
