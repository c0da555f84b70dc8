//! kubectl-lite's node mode (`--kubelet URL`) against a kubelet with no API server, on real
//! containerd: the static pods as kubectl's pod table, the manifest directory's accepted and
//! rejected files with the reason, the kubelet's events, a static pod's log — authenticated by
//! a client certificate the kubelet's `--client-ca-file` trusts, the kubelet verified by its
//! own serving certificate, as an operator on the node would call it.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use e2e::cluster::StandaloneNode;
use e2e::{eventually, require, workspace_binary};

const WEB: &str = "apiVersion: v1
kind: Pod
metadata: {name: web, namespace: kube-system}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'echo hello from web; echo second line; exec sleep 3600']
";

/// A manifest the kubelet refuses: a pod with no containers.
const BAD: &str = "apiVersion: v1
kind: Pod
metadata: {name: bad}
spec: {containers: []}
";

const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

fn lite(kubeconfig: &Path, url: &str, args: &[&str]) -> Output {
    Command::new(workspace_binary("kubectl-lite").unwrap())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--kubelet", url])
        .args(args)
        .env("HOME", kubeconfig.parent().unwrap())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lite_reads_a_kubelet_with_no_api_server() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = apiserver_lite::certs::ensure(&dir.path().join("pki"), &[]).unwrap();
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::write(&client_ca, &pki.ca_cert).unwrap();
    let ca_flag = client_ca.display().to_string();
    let node = StandaloneNode::start_with(&[
        "--client-ca-file",
        &ca_flag,
        "--authorization-mode",
        "AlwaysAllow",
    ])
    .await
    .unwrap();
    node.kubelet.write_manifest("web.yaml", WEB).unwrap();
    node.kubelet.write_manifest("bad.yaml", BAD).unwrap();
    let static_name = format!("web-{}", e2e::kubelet::NODE);
    node.running(&static_name, WAIT, POLL).await;

    // The operator's kubeconfig: the kubelet's self-signed certificate as the CA, a client
    // certificate from the CA the kubelet trusts.
    let url = format!("https://127.0.0.1:{}", node.kubelet.secure_port());
    let serving = std::fs::read_to_string(node.kubelet.root_dir().join("pki/kubelet.crt")).unwrap();
    let (cert, key) = apiserver_lite::certs::issue_client(&pki.dir, "operator", &[]).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        apiserver_lite::certs::kubeconfig(&url, &serving, "operator", &cert, &key),
    )
    .unwrap();

    // The static pod, as kubectl's table, in its namespace and across all.
    let o = eventually("web ready in the table", WAIT, POLL, || async {
        let o = lite(&kubeconfig, &url, &["get", "pods", "-n", "kube-system"]);
        text(&o.stdout).contains("1/1").then_some(o)
    })
    .await
    .unwrap_or_else(|e| node.fail(e));
    let table = text(&o.stdout);
    let lines: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], "{table}");
    assert_eq!(lines[1][..4], [static_name.as_str(), "1/1", "Running", "0"], "{table}");
    assert_eq!(lines.len(), 2, "{table}");
    let all = text(&lite(&kubeconfig, &url, &["get", "pods", "-A", "-o", "wide"]).stdout);
    assert!(all.starts_with("NAMESPACE"), "{all}");
    assert!(all.contains(&format!("kube-system   {static_name}")), "{all}");
    assert!(all.contains(e2e::kubelet::NODE), "the NODE column: {all}");
    let o = lite(&kubeconfig, &url, &["get", "pods"]);
    assert_eq!(text(&o.stderr), "No resources found in default namespace.\n");
    let node_name = lite(
        &kubeconfig,
        &url,
        &["get", "pod", &static_name, "-n", "kube-system", "-o", "jsonpath={.spec.nodeName}"],
    );
    assert_eq!(text(&node_name.stdout), e2e::kubelet::NODE);
    let missing = lite(&kubeconfig, &url, &["get", "pod", "nope"]);
    assert_eq!(text(&missing.stderr), "Error from server (NotFound): pods \"nope\" not found\n");
    assert_eq!(missing.status.code(), Some(1));

    // The manifest directory: the accepted file with its pod, the rejected one with why.
    let o = eventually("both manifests reported", WAIT, POLL, || async {
        let o = lite(&kubeconfig, &url, &["get", "manifests"]);
        text(&o.stdout).contains("bad.yaml").then_some(o)
    })
    .await
    .unwrap_or_else(|e| node.fail(e));
    let manifests = text(&o.stdout);
    assert!(manifests.starts_with("FILE"), "{manifests}");
    let bad = manifests.lines().find(|l| l.contains("bad.yaml")).unwrap();
    assert!(bad.contains("rejected") && bad.contains("spec.containers"), "{manifests}");
    let web = manifests.lines().find(|l| l.contains("web.yaml")).unwrap();
    assert!(web.contains("accepted") && web.contains(&static_name), "{manifests}");

    // The kubelet's own events, and the static pod's log.
    let events = text(&lite(&kubeconfig, &url, &["get", "events"]).stdout);
    assert!(events.starts_with("LAST SEEN"), "{events}");
    assert!(events.contains("Started"), "{events}");
    let log = lite(&kubeconfig, &url, &["logs", &static_name, "-n", "kube-system"]);
    assert_eq!(text(&log.stdout), "hello from web\nsecond line\n", "{}", text(&log.stderr));
    let tail = lite(&kubeconfig, &url, &["logs", &static_name, "-n", "kube-system", "--tail=1"]);
    assert_eq!(text(&tail.stdout), "second line\n");

    // What node mode does not serve, and a caller the kubelet does not know, are refused.
    let o = lite(&kubeconfig, &url, &["delete", "pod", &static_name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--kubelet serves get"), "{}", text(&o.stderr));
    let o = lite(&kubeconfig, &url, &["get", "deployments"]);
    assert_eq!(text(&o.stderr), "error: the server doesn't have a resource type \"deployments\"\n");
    let stranger = dir.path().join("stranger");
    std::fs::write(
        &stranger,
        apiserver_lite::certs::kubeconfig(&url, &serving, "stranger", "", "")
            .replace("    client-certificate-data: \n    client-key-data: \n", ""),
    )
    .unwrap();
    let o = lite(&stranger, &url, &["get", "pods"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stdout));

    node.teardown().await;
}
