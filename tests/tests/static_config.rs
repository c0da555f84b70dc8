//! Node-local ConfigMaps and Secrets for static pods (`staticConfigPath`) on real containerd:
//! a standalone kubelet, with no apiserver at all, runs a static pod that mounts a node-local
//! Secret (tmpfs, mode) and ConfigMap and reads them as env; an edit of the ConfigMap file
//! reaches the running container's file; a pod waiting for a missing object starts once its
//! file appears; a group-readable Secret file is refused with a clear error (in `/manifests`
//! and in the pod's `FailedMount` event) and accepted once it is root-only. Joined, the static
//! pod's mirror is accepted by apiserver-lite with the node-local references left out of its
//! spec and recorded in the `kubelet-rs.io/static-config` annotation.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::apiserver::{ApiServer, SERVICE_ACCOUNTS};
use e2e::cluster::{JoinedNode, StandaloneNode};
use e2e::containerd::Containerd;
use e2e::kubelet::{Kubelet, NODE};
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use proto::cri;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// How long an edit may take to reach a running container's file.
const UPDATE: Duration = Duration::from_secs(10);

const CONFIG: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  greeting: hello
  level: debug
";

const SECRET: &str = "apiVersion: v1
kind: Secret
metadata:
  name: app-secret
stringData:
  password: hunter2
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: app
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: config
    configMap: {name: app-config}
  - name: secret
    secret: {secretName: app-secret, defaultMode: 256}  # 0400: the manifest reader is YAML 1.2, so no 0-prefixed octal
  containers:
  - name: app
    image: busybox:1.35
    command: [sleep, \"3600\"]
    volumeMounts:
    - {name: config, mountPath: /etc/config}
    - {name: secret, mountPath: /etc/secret}
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: app-config, key: greeting}}
    - name: PASS
      valueFrom: {secretKeyRef: {name: app-secret, key: password}}
    envFrom:
    - {configMapRef: {name: app-config}, prefix: CFG_}
";

struct Node(StandaloneNode);

impl std::ops::Deref for Node {
    type Target = StandaloneNode;
    fn deref(&self) -> &StandaloneNode {
        &self.0
    }
}

impl Node {
    async fn start() -> Self {
        Self(StandaloneNode::start().await.unwrap())
    }

    async fn running(&self, name: &str) -> Value {
        self.0.running(name, WAIT, POLL).await
    }

    /// Runs `command` in the pod's first container through CRI; its stdout, if it succeeds.
    async fn exec(&self, pod: &Value, command: &[&str]) -> Option<String> {
        let id = pod["status"]["containerStatuses"][0]["containerID"].as_str()?;
        let id = id.strip_prefix("containerd://").unwrap_or(id).to_string();
        let req = cri::ExecSyncRequest {
            container_id: id,
            cmd: command.iter().map(|c| c.to_string()).collect(),
            timeout: 10,
        };
        let out = self.cri.exec_sync(req).await.ok()?;
        (out.exit_code == 0).then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The `/manifests` entry of a static config file.
    async fn report(&self, file: &str) -> Option<Value> {
        let files = self.kubelet.get("/manifests").await?;
        let suffix = format!("/static-config/{file}");
        let found = files
            .as_array()?
            .iter()
            .find(|r| r["file"].as_str().is_some_and(|f| f.ends_with(&suffix)));
        found.cloned()
    }

    async fn teardown(self) {
        self.0.teardown().await;
    }
}

#[tokio::test]
async fn a_standalone_static_pod_mounts_node_local_config_and_secret_and_sees_an_edit() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    let config = n.kubelet.write_static_config("app-config.yaml", CONFIG, 0o644).unwrap();
    n.kubelet.write_static_config("app-secret.yaml", SECRET, 0o600).unwrap();
    n.kubelet.write_manifest("app.yaml", POD).unwrap();
    let name = format!("app-{NODE}");
    let pod = n.running(&name).await;

    assert_eq!(n.exec(&pod, &["cat", "/etc/config/greeting"]).await.as_deref(), Some("hello"));
    assert_eq!(n.exec(&pod, &["cat", "/etc/secret/password"]).await.as_deref(), Some("hunter2"));
    let modes = n.exec(&pod, &["stat", "-L", "-c", "%a", "/etc/secret/password"]).await;
    assert_eq!(modes.as_deref(), Some("400\n"), "defaultMode 0400");
    let mounts = n.exec(&pod, &["cat", "/proc/mounts"]).await.unwrap();
    let secret_mount = mounts.lines().find(|l| l.split(' ').nth(1) == Some("/etc/secret"));
    assert!(
        secret_mount.is_some_and(|l| l.starts_with("tmpfs ")),
        "the secret volume is a tmpfs: {mounts}"
    );
    let env = n.exec(&pod, &["sh", "-c", "echo $GREETING $PASS $CFG_level"]).await;
    assert_eq!(env.as_deref(), Some("hello hunter2 debug\n"));

    // An edit of the ConfigMap file reaches the running container's file, through `..data`.
    let before = n.exec(&pod, &["readlink", "/etc/config/..data"]).await.unwrap();
    std::fs::write(
        n.kubelet.static_config().join(".app-config.yaml.tmp"),
        CONFIG.replace("hello", "bonjour"),
    )
    .unwrap();
    std::fs::rename(n.kubelet.static_config().join(".app-config.yaml.tmp"), &config).unwrap();
    let seen = eventually("the edit inside the container", UPDATE, POLL, || async {
        n.exec(&pod, &["cat", "/etc/config/greeting"]).await.filter(|g| g == "bonjour")
    })
    .await;
    if let Err(e) = seen {
        n.fail(e);
    }
    let after = n.exec(&pod, &["readlink", "/etc/config/..data"]).await.unwrap();
    assert_ne!(before, after, "swapped atomically through a new ..data target");
    let still = n.kubelet.running(&name).await.unwrap();
    assert_eq!(still["metadata"]["uid"], pod["metadata"]["uid"], "the pod is not replaced");
    let env = n.exec(&pod, &["sh", "-c", "echo $GREETING"]).await;
    assert_eq!(env.as_deref(), Some("hello\n"), "env is fixed at the container's start");

    // A pod whose env reads a ConfigMap that does not exist waits (CreateContainerConfigError)
    // and starts once its file appears.
    let late = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: app\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n    env:\n    - name: GREETING\n      valueFrom: {configMapKeyRef: {name: late-config, key: greeting}}\n";
    n.kubelet.write_manifest("late.yaml", late).unwrap();
    let late_name = format!("late-{NODE}");
    let waiting = eventually("late waiting for its ConfigMap", WAIT, POLL, || async {
        let p = n.kubelet.pod(&late_name).await?;
        let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
        (w["reason"] == "CreateContainerConfigError").then(|| w["message"].clone())
    })
    .await;
    match waiting {
        Ok(message) => {
            assert_eq!(message, "configmap \"late-config\" not found", "upstream's message")
        }
        Err(e) => n.fail(e),
    }
    let late_config = CONFIG.replace("app-config", "late-config");
    n.kubelet.write_static_config("late-config.yaml", &late_config, 0o644).unwrap();
    let late_pod = n.running(&late_name).await;
    let env = n.exec(&late_pod, &["sh", "-c", "echo $GREETING"]).await;
    assert_eq!(env.as_deref(), Some("hello\n"));

    let report = n.report("app-config.yaml").await.unwrap();
    assert_eq!(report["state"], "accepted");
    assert_eq!(report["objects"], serde_json::json!(["configMap default/app-config"]));
    n.teardown().await;
}

#[tokio::test]
async fn a_group_readable_secret_file_is_refused_with_a_clear_error_until_it_is_root_only() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let n = Node::start().await;
    n.kubelet.write_static_config("app-config.yaml", CONFIG, 0o644).unwrap();
    let secret = n.kubelet.write_static_config("app-secret.yaml", SECRET, 0o644).unwrap();
    n.kubelet.write_manifest("app.yaml", POD).unwrap();

    let report = eventually("the refusal in /manifests", WAIT, POLL, || async {
        n.report("app-secret.yaml").await.filter(|r| r["state"] == "rejected")
    })
    .await
    .unwrap();
    let reason = report["reason"].as_str().unwrap();
    let want = format!(
        "{}: holds secret default/app-secret but its mode is 0644: a file holding a Secret must not be readable or writable by group or others",
        secret.display()
    );
    assert!(reason.starts_with(&want), "{reason}");

    // The pod says why its volume cannot be set up, naming the file and its mode.
    let name = format!("app-{NODE}");
    let event = eventually("FailedMount naming the refused file", WAIT, POLL, || async {
        let events = n.kubelet.get("/events").await?;
        events.as_array()?.iter().find_map(|e| {
            let message = e["message"].as_str()?;
            (e["reason"] == "FailedMount" && message.contains("mode is 0644"))
                .then(|| message.to_string())
        })
    })
    .await;
    match event {
        Ok(message) => assert!(
            message.contains(
                "couldn't get secret default/app-secret from the static config directory: refused: "
            ) && message.contains(&secret.display().to_string()),
            "{message}"
        ),
        Err(e) => n.fail(e),
    }
    assert!(n.kubelet.running(&name).await.is_none());

    // Made root-only (written again, as a tool would), it is served and the pod starts.
    n.kubelet.write_static_config("app-secret.yaml", SECRET, 0o600).unwrap();
    let pod = n.running(&name).await;
    assert_eq!(n.exec(&pod, &["cat", "/etc/secret/password"]).await.as_deref(), Some("hunter2"));
    n.teardown().await;
}

#[tokio::test]
async fn a_joined_static_pods_mirror_is_accepted_with_its_node_local_references_recorded() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    // With the ServiceAccount admission plugin, which refuses mirror pods that reference
    // Secrets (upstream's plugin; NodeRestriction refuses ConfigMaps too).
    let node = "node-sc";
    let api = ApiServer::start_for_nodes_with(&[node], &[SERVICE_ACCOUNTS]).unwrap();
    let containerd = Containerd::start(Default::default()).await.unwrap();
    containerd.import_test_images().unwrap();
    let kubeconfig = api.node_kubeconfig(node).unwrap();
    let kubelet = Kubelet::start_joined(&containerd, node, &kubeconfig).unwrap();
    let cluster = JoinedNode { api, containerd, kubelet };
    let k = &cluster.kubelet;
    k.write_static_config("app-config.yaml", CONFIG, 0o644).unwrap();
    k.write_static_config("app-secret.yaml", SECRET, 0o600).unwrap();
    k.write_manifest("app.yaml", POD).unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let name = format!("app-{node}");
    let mirror = eventually("the mirror pod Running", WAIT, POLL, || async {
        let p = pods.get_opt(&name).await.ok()??;
        let phase = p.status.as_ref()?.phase.as_deref()?;
        (phase == "Running").then_some(p)
    })
    .await;
    let mirror = match mirror {
        Ok(m) => m,
        Err(e) => panic!(
            "{}\nkubelet log:\n{}",
            cluster.logs(&e.to_string()),
            cluster.kubelet.log_tail(400)
        ),
    };
    let annotations = mirror.metadata.annotations.clone().unwrap();
    assert!(annotations.contains_key("kubernetes.io/config.mirror"));
    let spec = mirror.spec.as_ref().unwrap();
    assert!(spec.volumes.iter().flatten().all(|v| v.config_map.is_none() && v.secret.is_none()));
    let app = &spec.containers[0];
    assert!(app.env.is_none() && app.env_from.is_none(), "{app:?}");
    let record: Value = serde_json::from_str(&annotations["kubelet-rs.io/static-config"]).unwrap();
    assert_eq!(record["volumes"][0]["configMap"]["name"], "app-config");
    assert_eq!(record["volumes"][1]["secret"]["secretName"], "app-secret");
    assert_eq!(record["containers"]["app"]["env"][1]["name"], "PASS");
    assert_eq!(record["containers"]["app"]["envFrom"][0]["prefix"], "CFG_");
    // The kubelet keeps this mirror: it is not replaced in a loop.
    let uid = mirror.metadata.uid.clone();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = pods.get(&name).await.unwrap();
    assert_eq!(again.metadata.uid, uid, "{}", cluster.logs("the mirror was replaced"));
    // The plugin is on: the same mirror with its Secret volume put back is refused.
    let mut naive = again.clone();
    naive.metadata = kube::api::ObjectMeta {
        name: Some("naive".into()),
        annotations: Some([("kubernetes.io/config.mirror".to_string(), "h".to_string())].into()),
        ..Default::default()
    };
    let volume = serde_json::from_value(record["volumes"][1].clone()).unwrap();
    naive.spec.as_mut().unwrap().volumes.get_or_insert_with(Vec::new).push(volume);
    naive.status = None;
    let refused = pods.create(&kube::api::PostParams::default(), &naive).await.unwrap_err();
    assert!(refused.to_string().contains("a mirror pod may not reference secrets"), "{refused}");
    // And the real kubectl shows it.
    let out = cluster.api.kubectl(&["get", "pod", &name, "--no-headers"]).unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Running"));
    cluster.stop().await.unwrap();
}
