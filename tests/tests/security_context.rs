//! Security contexts on real containerd: the pod's `runAsUser`, `runAsGroup`, `fsGroup` and
//! `supplementalGroups` reach containers that set none; `fsGroup` owns the pod's volumes (a
//! ConfigMap file with `defaultMode: 0400` readable by the group, an emptyDir the process can
//! write, what it writes the group's); upstream's masked `/proc` paths; `runAsNonRoot` refuses
//! an image that runs as root with upstream's message, and a bad context is refused at the
//! API with its field path. A `subPath` through a link a container planted in a shared volume
//! cannot reach the node's files; one inside the volume (and a `subPathExpr`) works.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn kubectl(c: &JoinedNode, args: &[&str]) -> (bool, String, String) {
    let out = c.api.kubectl(args).unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn exec(c: &JoinedNode, pod: &str, command: &str) -> String {
    let (ok, out, err) = kubectl(c, &["exec", pod, "--", "sh", "-c", command]);
    assert!(ok, "{command}: {err}\n{}", c.logs(""));
    out
}

fn pod(value: serde_json::Value) -> Pod {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_ids_and_fs_group_reach_its_containers_and_volumes() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.api.admin_client().await.unwrap(), "default");
    let (ok, _, err) = kubectl(&c, &["create", "configmap", "cfg", "--from-literal=key=value"]);
    assert!(ok, "{err}");
    let spec = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ids"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]},
            "volumes": [
                {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 0o400}},
                {"name": "scratch", "emptyDir": {}},
            ],
            "containers": [{
                "name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"],
                "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}, {"name": "scratch", "mountPath": "/scratch"}],
            }],
        },
    }));
    pods.create(&PostParams::default(), &spec).await.unwrap();
    eventually("ids running", WAIT, POLL, || async {
        let s = pods.get("ids").await.ok()?.status?.container_statuses?;
        s.first()?.state.as_ref()?.running.as_ref().map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // The process: the pod's user and group, with fsGroup and the supplemental group.
    assert_eq!(exec(&c, "ids", "id -u; id -g"), "1000\n3000\n");
    let groups: Vec<String> =
        exec(&c, "ids", "id -G").split_whitespace().map(str::to_string).collect();
    for g in ["3000", "2000", "4000"] {
        assert!(groups.iter().any(|x| x == g), "group {g} in {groups:?}");
    }
    // The ConfigMap file: 0400 plus the group's read bit, the group's; readable by a process
    // that is not its owner only through fsGroup.
    assert_eq!(exec(&c, "ids", "stat -L -c '%a %g' /cfg/key"), "440 2000\n");
    assert_eq!(exec(&c, "ids", "cat /cfg/key"), "value");
    // The emptyDir: the group's, setgid, writable by the non-root process; new files the group's.
    assert_eq!(exec(&c, "ids", "stat -c '%a %g' /scratch"), "2777 2000\n");
    assert_eq!(exec(&c, "ids", "echo x > /scratch/f && stat -c '%u %g' /scratch/f"), "1000 2000\n");
    // Upstream's masked paths: /proc/interrupts reads as an empty device, /proc/sys is
    // read-only.
    assert_eq!(exec(&c, "ids", "wc -c < /proc/interrupts"), "0\n");
    let mounts = exec(&c, "ids", "grep ' /proc/sys ' /proc/mounts");
    assert!(mounts.contains(" ro,") || mounts.contains(" ro "), "{mounts}");

    // runAsNonRoot with an image that runs as root: refused with upstream's message.
    let root = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "rooted"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "app", "image": "busybox:1.35", "command": ["sleep", "3600"]}],
        },
    }));
    pods.create(&PostParams::default(), &root).await.unwrap();
    let uid = pods.get("rooted").await.unwrap().metadata.uid.unwrap();
    let want = format!(
        "container has runAsNonRoot and image will run as root (pod: \"rooted_default({uid})\", container: app)"
    );
    eventually("rooted refused", WAIT, POLL, || async {
        let s = pods.get("rooted").await.ok()?.status?.container_statuses?;
        let w = s.first()?.state.as_ref()?.waiting.clone()?;
        (w.reason.as_deref() == Some("CreateContainerConfigError")
            && w.message.as_deref() == Some(want.as_str()))
        .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // A bad context is refused at the API, with its field path.
    let f = c.api.dir().join("bad.yaml");
    std::fs::write(
        &f,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  hostUsers: false\n  securityContext:\n    seccompProfile:\n      type: Localhost\n  containers:\n  - name: c\n    image: busybox:1.35\n",
    )
    .unwrap();
    let (ok, _, err) = kubectl(&c, &["create", "-f", f.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("spec.hostUsers: Forbidden: user namespaces (hostUsers: false) are not supported by this kubelet"), "{err}");
    assert!(
        err.contains("spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"),
        "{err}"
    );
    c.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_path_cannot_leave_its_volume_through_a_planted_link() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = JoinedNode::start(NODE).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.api.admin_client().await.unwrap(), "default");
    let mount = |name: &str, key: &str, value: &str| {
        json!({"name": name, "image": "busybox:1.35", "command": ["sleep", "3600"],
               "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
               "volumeMounts": [{"name": "shared", "mountPath": "/mnt", key: value}]})
    };
    let spec = pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "planted"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [{
                "name": "plant", "image": "busybox:1.35",
                "command": ["sh", "-c", "mkdir /v/data && echo inside > /v/data/f && ln -s / /v/escape && ln -s data /v/inside"],
                "volumeMounts": [{"name": "shared", "mountPath": "/v"}],
            }],
            "containers": [
                mount("escaper", "subPath", "escape"),
                mount("inner", "subPath", "inside"),
                mount("expr", "subPathExpr", "$(POD_NAME)"),
            ],
        },
    }));
    pods.create(&PostParams::default(), &spec).await.unwrap();
    let message = eventually("escaper refused, the others running", WAIT, POLL, || async {
        let statuses = pods.get("planted").await.ok()?.status?.container_statuses?;
        let state = |n: &str| statuses.iter().find(|s| s.name == n)?.state.clone();
        state("inner")?.running?;
        state("expr")?.running?;
        let w = state("escaper")?.waiting?;
        (w.reason.as_deref() == Some("CreateContainerConfigError")).then_some(w.message?)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    assert!(
        message.starts_with(
            "volumeMount \"shared\": subPath \"escape\": resolves to / outside the volume"
        ),
        "{message}"
    );
    let (ok, out, err) = kubectl(&c, &["exec", "planted", "-c", "inner", "--", "cat", "/mnt/f"]);
    assert!(ok && out == "inside\n", "{out}{err}");
    let (ok, out, err) = kubectl(&c, &["exec", "planted", "-c", "expr", "--", "ls", "-a", "/mnt"]);
    assert!(ok && out == ".\n..\n", "the subPathExpr directory, made empty: {out}{err}");
    c.stop().await.unwrap();
}
