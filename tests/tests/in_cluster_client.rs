//! A client inside a pod, on real containerd, with only what the pod is given: the real kubectl
//! v1.35 (a hostPath file) run with no kubeconfig, so it takes upstream's in-cluster config —
//! `KUBERNETES_SERVICE_HOST`/`PORT`, and the token and CA of the `kube-api-access-*` volume
//! that ServiceAccount admission added and the kubelet filled (its token from a TokenRequest
//! bound to the pod). The pod, its account bound to `view`, reads its own Pod; from the same
//! pod, a token for another audience and the token of a pod since deleted are refused
//! (`Unauthorized`).
//!
//! apiserver-lite has no Service proxy, so the pod uses the host's network and the env names
//! the apiserver's loopback address, as a node without kube-proxy would.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::apiserver::{SERVICE_ACCOUNTS, kubectl_binary};
use e2e::cluster::JoinedNode;
use e2e::controllers::ControllerManager;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(200);
const TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// A busybox pod on the host's network with the real kubectl at `/kubectl` and the env an
/// in-cluster client reads; `command` runs in `sh -c`.
fn client_pod(name: &str, port: u16, command: &str) -> Pod {
    let kubectl = kubectl_binary().unwrap().canonicalize().unwrap();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "hostNetwork": true,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "kubectl", "hostPath": {"path": kubectl, "type": "File"}}],
            "containers": [{
                "name": "client", "image": "busybox:1.35", "command": ["sh", "-c", command],
                "env": [
                    {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": port.to_string()},
                    {"name": "HOME", "value": "/tmp"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "volumeMounts": [{"name": "kubectl", "mountPath": "/kubectl", "readOnly": true}],
            }],
        },
    }))
    .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `kubectl exec <pod> -- <command>` as the admin: (success, stdout, stderr).
fn exec(c: &JoinedNode, pod: &str, command: &[&str]) -> (bool, String, String) {
    let mut args = vec!["exec", pod, "--"];
    args.extend_from_slice(command);
    let out = c.api.kubectl(&args).unwrap();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

async fn running(c: &JoinedNode, pods: &Api<Pod>, name: &str) -> Pod {
    eventually(&format!("{name} running"), WAIT, POLL, || async {
        let pod = pods.get(name).await.ok()?;
        let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
        statuses
            .iter()
            .all(|s| s.state.as_ref().is_some_and(|s| s.running.is_some()))
            .then_some(pod)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reads_its_own_pod_with_only_its_token_and_ca_and_other_tokens_are_refused() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let c = JoinedNode::start_with(NODE, &[SERVICE_ACCOUNTS], &[]).await.unwrap();
    let manager = ControllerManager::start(
        &c.api,
        &[
            "--leader-elect=false",
            "--controllers=serviceaccount-controller,root-ca-certificate-publisher-controller",
        ],
    )
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.api.admin_client().await.unwrap(), "default");
    // ServiceAccount admission refuses pods until the namespace's default account exists.
    eventually("the default ServiceAccount", WAIT, POLL, || async {
        c.api.kubectl(&["get", "serviceaccount", "default"]).ok().filter(|o| o.status.success())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", manager.log_tail(20)));
    // RBAC: the account may read what `view` grants in its namespace, as an operator binds it.
    let bind = [
        "create",
        "rolebinding",
        "reader",
        "--clusterrole=view",
        "--serviceaccount=default:default",
    ];
    let out = c.api.kubectl(&bind).unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    // The container's own process: kubectl with no kubeconfig and no flags, retried until the
    // answer comes (the first try races nothing, but a failure would show in the log).
    let read_self = "until /kubectl get pod \"$POD_NAME\" -o jsonpath='uid={.metadata.uid}{\"\\n\"}'; \
                     do sleep 1; done; exec sleep 3600";
    pods.create(&PostParams::default(), &client_pod("client", c.api.port(), read_self))
        .await
        .unwrap();
    let pod = running(&c, &pods, "client").await;
    let uid = pod.metadata.uid.unwrap();
    let logs = eventually("the pod's own uid in its log", WAIT, POLL, || async {
        let out = c.api.kubectl(&["logs", "client"]).ok()?;
        let log = text(&out.stdout);
        log.contains("uid=").then_some(log)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    assert!(logs.contains(&format!("uid={uid}\n")), "{logs}");
    assert!(!logs.contains("rror"), "the first read succeeded: {logs}");

    // What the kubectl in the pod used: the volume's token (bound to this pod) and CA.
    let (ok, whoami, err) = exec(&c, "client", &["/kubectl", "auth", "whoami", "-o", "json"]);
    assert!(ok, "{err}\n{}", c.logs(""));
    let who: serde_json::Value = serde_json::from_str(&whoami).unwrap();
    let user = &who["status"]["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:default", "{who}");
    assert_eq!(user["extra"]["authentication.kubernetes.io/pod-name"][0], "client", "{who}");
    assert_eq!(user["extra"]["authentication.kubernetes.io/pod-uid"][0], uid.as_str(), "{who}");

    // A token for another audience, used from inside the pod: refused.
    let out = c.api.kubectl(&["create", "token", "default", "--audience", "vault"]).unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let other_audience = text(&out.stdout);
    let (ok, _, err) =
        exec(&c, "client", &["/kubectl", "--token", other_audience.trim(), "get", "pod", "client"]);
    assert!(!ok && err.contains("Unauthorized"), "{err}");

    // The token of a second pod, still valid by its expiry, once that pod is deleted: refused.
    pods.create(&PostParams::default(), &client_pod("doomed", c.api.port(), "exec sleep 3600"))
        .await
        .unwrap();
    running(&c, &pods, "doomed").await;
    let (ok, doomed_token, err) = exec(&c, "doomed", &["cat", TOKEN]);
    assert!(ok, "{err}");
    let (ok, _, err) =
        exec(&c, "client", &["/kubectl", "--token", doomed_token.trim(), "get", "pod", "client"]);
    assert!(ok, "the second pod's token works while the pod exists: {err}");
    pods.delete("doomed", &DeleteParams::default().grace_period(0)).await.unwrap();
    eventually("doomed gone", WAIT, POLL, || async {
        matches!(pods.get_opt("doomed").await, Ok(None)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let (ok, _, err) =
        exec(&c, "client", &["/kubectl", "--token", doomed_token.trim(), "get", "pod", "client"]);
    assert!(!ok && err.contains("Unauthorized"), "{err}");

    pods.delete("client", &DeleteParams::default().grace_period(0)).await.unwrap();
    eventually("client gone", WAIT, POLL, || async {
        matches!(pods.get_opt("client").await, Ok(None)).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    drop(manager);
    c.stop().await.unwrap();
}
