//! Image pull credentials on a joined node (apiserver-lite, a kubelet, real containerd) against
//! an htpasswd-protected loopback registry, as users meet them: a pod without credentials is
//! `ErrImagePull`, then `ImagePullBackOff`; with a `kubectl create secret docker-registry`
//! Secret in `imagePullSecrets` it runs (a missing second pull secret is only an event); the
//! node's own `<root-dir>/config.json` serves the path it names; a registry Secret that is not
//! JSON is refused at create (422), and one whose JSON is not credentials fails only its own
//! pod, with an event naming the Secret and the pod.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use e2e::apiserver::ApiServer;
use e2e::containerd::{Containerd, ContainerdOptions};
use e2e::kubelet::Kubelet;
use e2e::registry::Registry;
use e2e::{eventually, eventually_showing, require};
use images::TestImage;
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;

const NODE: &str = "node-a";
const USER: &str = "puller";
const PASSWORD: &str = "pull-s3cret";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(250);

fn pod(name: &str, image: &str, pull_secrets: &[&str]) -> Pod {
    let secrets: Vec<_> = pull_secrets.iter().map(|n| json!({"name": n})).collect();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "imagePullSecrets": secrets,
            "containers": [{"name": "app", "image": image, "imagePullPolicy": "Always",
                            "command": ["sleep", "3600"]}],
        },
    }))
    .unwrap()
}

/// The app container's state: `Running`, or its waiting reason.
async fn state(pods: &Api<Pod>, name: &str) -> Option<String> {
    let p = pods.get(name).await.ok()?;
    let s = p.status?.container_statuses?.into_iter().next()?.state?;
    if s.running.is_some() {
        return Some("Running".into());
    }
    s.waiting.and_then(|w| w.reason)
}

async fn wait_state(pods: &Api<Pod>, name: &str, want: &str) -> anyhow::Result<()> {
    eventually(&format!("pod {name} {want}"), WAIT, POLL, || async {
        (state(pods, name).await.as_deref() == Some(want)).then_some(())
    })
    .await
}

/// The messages of events with `reason` about pod `name`.
async fn events(events: &Api<Event>, name: &str, reason: &str) -> Vec<String> {
    let list = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

fn dockerconfigjson(registry: &str, auths: serde_json::Value) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": registry},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": auths.to_string()},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_from_a_protected_registry_take_pull_secrets_or_the_nodes_config() {
    let mut tools = require::CONTAINERD_TOOLS.to_vec();
    tools.extend(require::REGISTRY_TOOLS);
    if !require::real_runtime(&tools) {
        return;
    }
    let registry = Registry::start_with_htpasswd(USER, PASSWORD).unwrap();
    let image = registry.push_test_image_as(TestImage::Busybox, "private/busybox:1.35").unwrap();
    let node_only =
        registry.push_test_image_as(TestImage::Busybox, "node-only/busybox:1.35").unwrap();
    let api = ApiServer::start_for_nodes(&[NODE]).unwrap();
    let containerd = Containerd::start(ContainerdOptions {
        registries: vec![registry.addr()],
        ..Default::default()
    })
    .await
    .unwrap();
    containerd.import_test_images().unwrap();
    // The node's own credentials, for the node-only path alone, where the kubelet's root
    // directory will be.
    let root = containerd.dir().join(format!("kubelet-{NODE}/root"));
    std::fs::create_dir_all(&root).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    let node_auths = json!({"auths": {format!("{}/node-only", registry.addr()): {"auth": auth}}});
    std::fs::write(root.join("config.json"), node_auths.to_string()).unwrap();
    let mut kubelet =
        Kubelet::start_joined(&containerd, NODE, &api.node_kubeconfig(NODE).unwrap()).unwrap();

    let result = async {
        let client = api.admin_client().await?;
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        let secrets: Api<Secret> = Api::default_namespaced(client.clone());
        let event_api: Api<Event> = Api::default_namespaced(client.clone());
        let pp = PostParams::default();

        // No credentials for the private path: ErrImagePull, then ImagePullBackOff.
        pods.create(&pp, &pod("anonymous", &image, &[])).await?;
        // (ErrImagePull shows only until the next sync, which finds the backoff running: the
        // events tell it.)
        wait_state(&pods, "anonymous", "ImagePullBackOff").await?;
        // Events are posted beside the status, not before it: wait for the last of them.
        let failed = eventually_showing("the ImagePullBackOff event", WAIT, POLL, || async {
            let failed = events(&event_api, "anonymous", "Failed").await;
            if failed.iter().any(|m| m == "Error: ImagePullBackOff") { Ok(failed) } else { Err(failed) }
        })
        .await?;
        assert!(failed.iter().any(|m| m.contains("401 Unauthorized")), "{failed:?}");
        assert!(failed.iter().any(|m| m == "Error: ErrImagePull"), "{failed:?}");
        assert!(failed.iter().any(|m| m == "Error: ImagePullBackOff"), "{failed:?}");

        // A registry Secret that is not JSON is refused at create, by kubectl and by clients.
        let out = api.kubectl(&[
            "create", "secret", "generic", "not-json", "--type=kubernetes.io/dockerconfigjson",
            "--from-literal=.dockerconfigjson={\"auths\":",
        ])?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("Secret \"not-json\" is invalid: data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": unexpected end of JSON input"),
            "{stderr}"
        );
        let mut not_json = dockerconfigjson("not-json", json!({}));
        not_json.string_data = Some([(".dockerconfigjson".to_string(), "not json".to_string())].into());
        match secrets.create(&pp, &not_json).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "{s:?}"),
            other => panic!("a registry secret that is not JSON was not refused: {other:?}"),
        }

        // The user's way: kubectl create secret docker-registry; a missing second pull secret
        // is only an event.
        let server = registry.addr().to_string();
        let out = api.kubectl(&[
            "create", "secret", "docker-registry", "regcred", "--docker-server", &server,
            "--docker-username", USER, "--docker-password", PASSWORD,
        ])?;
        anyhow::ensure!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        pods.create(&pp, &pod("with-secret", &image, &["missing", "regcred"])).await?;
        wait_state(&pods, "with-secret", "Running").await?;
        let missing = eventually("the missing pull secret's event", WAIT, POLL, || async {
            let missing =
                events(&event_api, "with-secret", "FailedToRetrieveImagePullSecret").await;
            (!missing.is_empty()).then_some(missing)
        })
        .await?;
        assert_eq!(
            missing.first().map(String::as_str),
            Some("Unable to retrieve some image pull secrets (missing); attempting to pull the image may not succeed."),
            "{missing:?}"
        );

        // JSON that is no registry credentials: that pod alone fails, and its event names the
        // Secret and the pod.
        secrets.create(&pp, &dockerconfigjson("shapeless", json!({"auths": ["x"]}))).await?;
        pods.create(&pp, &pod("bad-secret", &image, &["shapeless"])).await?;
        let failed = eventually("the bad secret's event", WAIT, POLL, || async {
            let msgs = events(&event_api, "bad-secret", "Failed").await;
            msgs.into_iter().find(|m| m.contains("image pull secret"))
        })
        .await?;
        assert!(
            failed.contains("for pod \"default/bad-secret\": image pull secret \"default/shapeless\": data[.dockerconfigjson]"),
            "{failed}"
        );
        // The event is recorded before the status that follows from the same failed pull.
        let bad = eventually("the bad secret's pod waiting on its pull", WAIT, POLL, || async {
            let bad = state(&pods, "bad-secret").await;
            matches!(bad.as_deref(), Some("ErrImagePull" | "ImagePullBackOff")).then_some(bad)
        })
        .await;
        assert!(bad.is_ok(), "{:?}", state(&pods, "bad-secret").await);
        assert_eq!(state(&pods, "with-secret").await.as_deref(), Some("Running"));

        // The node's config.json serves its path to pods without pull secrets.
        pods.create(&pp, &pod("node-creds", &node_only, &[])).await?;
        wait_state(&pods, "node-creds", "Running").await?;

        // The Secret as kubectl reads it: credentials in data, no stringData.
        let out = api.kubectl(&["get", "secret", "shapeless", "-o", "json"])?;
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).context("kubectl get")?;
        assert!(got.get("stringData").is_none() && got["data"][".dockerconfigjson"].is_string());
        anyhow::Ok(())
    }
    .await;
    let logs = format!(
        "kubelet:\n{}\napiserver:\n{}\ncontainerd:\n{}",
        kubelet.log_tail(60),
        api.log_tail(20),
        containerd.log_tail(20)
    );
    kubelet.stop();
    drop(api);
    let leaks = containerd.stop().await;
    drop(registry);
    result.context(logs).unwrap();
    assert!(leaks.is_clean(), "teardown leaked: {leaks:#?}");
}
