//! The manifest URL source on real containerd: a pod list served over HTTP by the test (only to
//! requests carrying the configured header) runs as static pods of source `http`, and keeps
//! running once the server is gone, the URL's failure reported in `/manifests`. Beside it, a
//! manifest file starting with a byte-order mark runs, and one with a repeated key is rejected
//! naming the key and line, the other pods untouched. Joined to apiserver-lite, the URL's pod
//! is a static pod like a file's: mirrored, with `kubernetes.io/config.source: http`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::cluster::StandaloneNode;
use e2e::kubelet::NODE;
use e2e::{eventually, require};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

fn sleeper_json(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [
            {"name": "sleep", "image": "busybox:1.35", "command": ["sleep", "3600"]}]}})
}

fn sleeper(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: sleep\n    image: busybox:1.35\n    command: [sleep, \"3600\"]\n"
    )
}

/// Serves `body` to GETs carrying `X-Token: secret`, 401 to others, until aborted.
async fn serve(listener: TcpListener, body: String) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else { return };
        let body = body.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
            let (status, body) = if head.contains("\r\nx-token: secret\r\n") {
                ("200 OK", body)
            } else {
                ("401 Unauthorized", String::new())
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_url_runs_its_pods_and_survives_the_url_going_away() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pods", listener.local_addr().unwrap());
    let items = [sleeper_json("url-a"), sleeper_json("url-b")];
    let list = serde_json::json!({"apiVersion": "v1", "kind": "PodList", "items": items});
    let server = tokio::spawn(serve(listener, list.to_string()));

    let url_flag = format!("--manifest-url={url}");
    let flags =
        [url_flag.as_str(), "--manifest-url-header=X-Token:secret", "--http-check-frequency=1s"];
    let node = StandaloneNode::start_with(&flags).await.unwrap();
    // A file beside it, starting with a byte-order mark, and one with a repeated key.
    node.kubelet.write_manifest("bom.yaml", &format!("\u{feff}{}", sleeper("bom"))).unwrap();
    let dup = sleeper("dup").replace("  name: dup\n", "  name: dup\n  name: dup2\n");
    node.kubelet.write_manifest("dup.yaml", &dup).unwrap();

    for name in ["url-a", "url-b", "bom"] {
        let pod = node.running(&format!("{name}-{NODE}"), WAIT, POLL).await;
        let source = &pod["metadata"]["annotations"]["kubernetes.io/config.source"];
        assert_eq!(source, if name == "bom" { "file" } else { "http" }, "{name}");
    }
    let before = node.kubelet.pod(&format!("url-a-{NODE}")).await.unwrap();
    let container_id = before["status"]["containerStatuses"][0]["containerID"].clone();

    let manifests = node.kubelet.get("/manifests").await.unwrap();
    let of = |m: &serde_json::Value, file: &str| -> Vec<serde_json::Value> {
        m.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["file"].as_str().unwrap().ends_with(file))
            .cloned()
            .collect()
    };
    let dup_report = of(&manifests, "dup.yaml");
    assert_eq!(dup_report[0]["state"], "rejected", "{manifests:#}");
    let reason = dup_report[0]["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("dup.yaml: YAML: line 5: key \"name\" already set in map"),
        "{reason}"
    );
    let url_reports = of(&manifests, &url);
    assert_eq!(url_reports.len(), 2, "{manifests:#}");
    assert!(url_reports.iter().all(|r| r["state"] == "accepted"), "{manifests:#}");

    // The server goes away: the URL's pods keep running, the failure is reported.
    server.abort();
    let _ = server.await;
    let url_state = eventually("the URL reported unreachable", WAIT, POLL, || async {
        let m = node.kubelet.get("/manifests").await?;
        let r = of(&m, &url);
        (r.len() == 2 && r.iter().all(|r| r["state"] == "rejected")).then_some(r)
    })
    .await
    .unwrap_or_else(|e| node.fail(e));
    let reason = url_state[0]["reason"].as_str().unwrap();
    assert!(reason.starts_with(&format!("Get {url:?}: dial tcp ")), "{reason}");
    assert_eq!(url_state[0]["runningPreviousVersion"], true);
    // Several periods later, the same containers still run.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["url-a", "url-b", "bom"] {
        node.running(&format!("{name}-{NODE}"), WAIT, POLL).await;
    }
    let after = node.kubelet.pod(&format!("url-a-{NODE}")).await.unwrap();
    assert_eq!(after["status"]["containerStatuses"][0]["containerID"], container_id);
    assert_eq!(after["status"]["containerStatuses"][0]["restartCount"], 0);
    node.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joined_kubelet_mirrors_the_urls_pod_with_source_http() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    use k8s_openapi::api::core::v1::Pod;
    const JOINED: &str = "node-a";
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pod", listener.local_addr().unwrap());
    let server = tokio::spawn(serve(listener, sleeper_json("url-web").to_string()));
    let url_flag = format!("--manifest-url={url}");
    let flags =
        [url_flag.as_str(), "--manifest-url-header=X-Token:secret", "--http-check-frequency=1s"];
    let cluster = e2e::cluster::JoinedNode::start_with_kubelet_flags(JOINED, &flags).await.unwrap();
    let client = cluster.api.admin_client().await.unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client, "default");
    let mirror_name = format!("url-web-{JOINED}");
    let mirror = eventually("the URL's pod mirrored and running", WAIT, POLL, || async {
        let pod = pods.get_opt(&mirror_name).await.ok()??;
        let running = pod.status.as_ref()?.phase.as_deref() == Some("Running");
        running.then_some(pod)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", cluster.logs(&e.to_string())));
    let annotations = mirror.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["kubernetes.io/config.source"], "http");
    assert!(annotations.contains_key("kubernetes.io/config.mirror"), "{annotations:?}");
    server.abort();
    cluster.stop().await.unwrap();
}
