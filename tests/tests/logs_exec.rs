//! `kubectl logs` and `kubectl exec` on real containerd, through apiserver-lite's `pods/log` and
//! `pods/exec` proxy to the kubelet's secure API: the real kubectl v1.35 (WebSocket
//! `v5.channel.k8s.io`), the kubelet's CRI log reader and its SPDY relay to containerd's
//! streaming server. Also what a client is told when the request cannot be served.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use e2e::apiserver::kubectl_binary;
use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// nginx-pod: the httpd (which says a line on stdout and one on stderr first) and a sidecar
/// that exits after each run, counting its runs in an emptyDir, so it has a previous instance.
fn nginx_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nginx-pod"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {"name": "nginx", "image": "busybox-httpd:1.35",
                 "command": ["sh", "-c", "echo nginx line 1; echo nginx line 2; sleep 0.3; echo nginx on stderr >&2; sleep 0.3; exec httpd -f -p 80 -h /var/www"]},
                {"name": "sidecar", "image": "busybox:1.35",
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                 "command": ["sh", "-c", "n=$(cat /data/n 2>/dev/null || echo 0); echo sidecar run $n; echo $((n+1)) > /data/n; sleep 1; exit 1"]},
            ],
        },
    }))
    .unwrap()
}

/// The joined node, with what these tests do on it.
struct Cluster(JoinedNode);

impl std::ops::Deref for Cluster {
    type Target = JoinedNode;
    fn deref(&self) -> &JoinedNode {
        &self.0
    }
}

impl Cluster {
    async fn start() -> Self {
        Self(JoinedNode::start(NODE).await.unwrap())
    }

    /// Creates nginx-pod and waits until its nginx container runs.
    async fn nginx_running(&self) -> Api<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.api.admin_client().await.unwrap(), "default");
        pods.create(&PostParams::default(), &nginx_pod()).await.unwrap();
        eventually("nginx running", WAIT, POLL, || async {
            let p = pods.get("nginx-pod").await.ok()?;
            let s = p.status?.container_statuses?;
            s.iter().find(|c| {
                c.name == "nginx" && c.state.as_ref().is_some_and(|s| s.running.is_some())
            })?;
            Some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{}", self.logs(&e.to_string())));
        pods
    }

    /// kubectl, as `ApiServer::kubectl` runs it, for a process the test drives.
    fn kubectl(&self, args: &[&str]) -> Command {
        let home = self.api.dir().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut c = Command::new(kubectl_binary().unwrap());
        c.args(args).env("KUBECONFIG", self.api.kubeconfig()).env("HOME", home);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.api.kubectl(args).unwrap()
    }

    async fn stop(self) {
        self.0.stop().await.unwrap();
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_reads_the_container_log_through_the_apiserver_and_the_kubelet() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = Cluster::start().await;
    let pods = cluster.nginx_running().await;
    let c = &cluster;

    // The whole log of the default-by-name container, stdout and stderr as written.
    let out = eventually("kubectl logs", WAIT, POLL, || async {
        let o = c.run(&["logs", "nginx-pod", "-c", "nginx"]);
        (o.status.success() && text(&o.stdout).contains("nginx on stderr")).then_some(o)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    assert_eq!(text(&out.stdout), "nginx line 1\nnginx line 2\nnginx on stderr\n");

    // --tail, --timestamps, --limit-bytes.
    let out = c.run(&["logs", "nginx-pod", "-c", "nginx", "--tail=1"]);
    assert_eq!(text(&out.stdout), "nginx on stderr\n", "{}", text(&out.stderr));
    let out = c.run(&["logs", "nginx-pod", "-c", "nginx", "--tail=1", "--timestamps"]);
    let line = text(&out.stdout);
    let (ts, rest) = line.split_once(' ').unwrap();
    assert!(ts.parse::<jiff_like::Rfc3339>().is_ok(), "{line}");
    assert_eq!(rest, "nginx on stderr\n");
    let out = c.run(&["logs", "nginx-pod", "-c", "nginx", "--limit-bytes=9"]);
    assert_eq!(text(&out.stdout), "nginx lin");

    // -c picks the other container; --previous its last terminated instance.
    let out = eventually("sidecar restarted", WAIT, POLL, || async {
        let o = c.run(&["logs", "nginx-pod", "-c", "sidecar", "--previous"]);
        o.status.success().then_some(o)
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    let previous = text(&out.stdout);
    let current = text(&c.run(&["logs", "nginx-pod", "-c", "sidecar"]).stdout);
    // (During CrashLoopBackOff the current and the previous instance are the same one, as
    // upstream's.)
    let run = |s: &str| s.trim().strip_prefix("sidecar run ").and_then(|n| n.parse::<u32>().ok());
    assert!(run(&previous) <= run(&current) && run(&previous).is_some(), "{current} / {previous}");

    // -f streams what the container writes next, until kubectl is killed.
    let mut follow = c
        .kubectl(&["logs", "-f", "nginx-pod", "-c", "nginx", "--tail=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while let Some(Ok(l)) = lines.next() {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(first, "nginx on stderr");
    let wrote = c.run(&[
        "exec",
        "nginx-pod",
        "-c",
        "nginx",
        "--",
        "sh",
        "-c",
        "echo followed line > /proc/1/fd/1",
    ]);
    assert!(wrote.status.success(), "{}", text(&wrote.stderr));
    let next = rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));
    assert_eq!(next, "followed line");
    follow.kill().unwrap();
    follow.wait().unwrap();

    // Bad requests get upstream's Status.
    let out = c.run(&["logs", "nginx-pod", "-c", "nope"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("container nope is not valid for pod nginx-pod"),
        "{}",
        text(&out.stderr)
    );
    let raw =
        c.run(&["get", "--raw", "/api/v1/namespaces/default/pods/nginx-pod/log?container=nope"]);
    assert!(
        text(&raw.stderr).contains("container nope is not valid for pod nginx-pod"),
        "{}",
        text(&raw.stderr)
    );
    let raw = c.run(&["get", "--raw", "/api/v1/namespaces/default/pods/nginx-pod/log"]);
    assert!(
        text(&raw.stderr).contains(
            "a container name must be specified for pod nginx-pod, choose one of: [nginx sidecar]"
        ),
        "{}",
        text(&raw.stderr)
    );
    let out = c.run(&["logs", "missing-pod"]);
    assert!(
        text(&out.stderr).contains("(NotFound): pods \"missing-pod\" not found"),
        "{}",
        text(&out.stderr)
    );
    drop(pods);
    cluster.stop().await;
}

/// RFC 3339 parsing without another dependency: what kubectl's `--timestamps` prefix must be.
mod jiff_like {
    #[derive(Debug)]
    pub struct Rfc3339;
    impl std::str::FromStr for Rfc3339 {
        type Err = ();
        fn from_str(s: &str) -> Result<Self, ()> {
            let b = s.as_bytes();
            let ok = b.len() >= 20
                && b[4] == b'-'
                && b[7] == b'-'
                && b[10] == b'T'
                && b[13] == b':'
                && b.ends_with(b"Z");
            ok.then_some(Rfc3339).ok_or(())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_runs_commands_propagates_exit_codes_and_pipes_stdin() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = Cluster::start().await;
    cluster.nginx_running().await;
    let c = &cluster;

    let out = c.run(&["exec", "nginx-pod", "-c", "nginx", "--", "echo", "hello", "from", "exec"]);
    assert!(out.status.success(), "{}", c.logs(&text(&out.stderr)));
    assert_eq!(text(&out.stdout), "hello from exec\n");

    let out = c.run(&[
        "exec",
        "nginx-pod",
        "-c",
        "nginx",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "out\n");
    assert!(text(&out.stderr).starts_with("err\n"), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("command terminated with exit code 3"),
        "{}",
        text(&out.stderr)
    );

    // Piped stdin reaches the command, and its end does too (cat exits).
    let mut cat = c
        .kubectl(&["exec", "-i", "nginx-pod", "-c", "nginx", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = cat.stdin.take().unwrap();
    stdin.write_all(b"hi\nthere\n").unwrap();
    drop(stdin);
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || cat.wait_with_output()),
    )
    .await
    .unwrap_or_else(|_| panic!("{}", c.logs("kubectl exec -i cat did not end with its stdin")))
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hi\nthere\n");

    // A larger stdin comes back whole.
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let mut wc = c
        .kubectl(&["exec", "-i", "nginx-pod", "-c", "nginx", "--", "wc", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let size = big.len();
    let mut stdin = wc.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(big.as_bytes()));
    let out = tokio::task::spawn_blocking(move || wc.wait_with_output()).await.unwrap().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(text(&out.stdout).trim(), size.to_string(), "{}", text(&out.stderr));

    // Unknown containers and pods are named.
    let out = c.run(&["exec", "nginx-pod", "-c", "nope", "--", "true"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("container nope is not valid for pod nginx-pod"),
        "{}",
        text(&out.stderr)
    );
    let out = c.run(&["exec", "missing-pod", "--", "true"]);
    assert!(text(&out.stderr).contains("pods \"missing-pod\" not found"), "{}", text(&out.stderr));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_joins_the_containers_own_stdin_and_stdout_and_detaching_leaves_it_running()
{
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = Cluster::start().await;
    let c = &cluster;
    let pods: Api<Pod> = Api::namespaced(c.api.admin_client().await.unwrap(), "default");
    let echo: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "echo"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "echo", "image": "busybox:1.35", "stdin": true,
                "command": ["sh", "-c", "echo ready; while read line; do echo \"got: $line\"; done"]}],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &echo).await.unwrap();
    let running = |p: &Pod| {
        let statuses = p.status.as_ref().and_then(|s| s.container_statuses.as_ref());
        statuses.and_then(|s| s.first()).and_then(|s| s.state.as_ref()?.running.as_ref()).is_some()
    };
    eventually("echo running", WAIT, POLL, || async {
        pods.get("echo").await.ok().filter(running).map(|_| ())
    })
    .await
    .unwrap_or_else(|e| panic!("{}", c.logs(&e.to_string())));

    // What kubectl attach -i sends reaches the container's own process, and what that process
    // writes afterwards comes back.
    let mut attach = c
        .kubectl(&["attach", "-i", "echo", "-c", "echo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = attach.stdin.take().unwrap();
    let stdout = attach.stdout.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    // The session may not be open yet when the first line is written: write until answered.
    let mut heard = Vec::new();
    for _ in 0..60 {
        stdin.write_all(b"hello\n").unwrap();
        stdin.flush().unwrap();
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(500)) {
            heard.push(line);
            break;
        }
    }
    assert_eq!(heard.first().map(String::as_str), Some("got: hello"), "{}", c.logs("attach"));

    // Detaching (the client goes) leaves the container running, not restarted.
    attach.kill().unwrap();
    let _ = attach.wait();
    let out = c.run(&["exec", "echo", "--", "true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pod = pods.get("echo").await.unwrap();
    assert!(running(&pod), "{:?}", pod.status);
    let restarts = pod.status.and_then(|s| s.container_statuses).map(|s| s[0].restart_count);
    assert_eq!(restarts, Some(0));

    // A container the pod does not have is named.
    let out = c.run(&["attach", "echo", "-c", "nope"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("container nope not found"), "{}", text(&out.stderr));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_stream_with_no_data_either_way_is_closed_after_the_idle_timeout() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let node =
        JoinedNode::start_with_kubelet_flags(NODE, &["--streaming-connection-idle-timeout=2s"]);
    let cluster = Cluster(node.await.unwrap());
    cluster.nginx_running().await;
    let c = &cluster;

    // Output every 0.5 s for 3 s keeps the stream alive past the 2 s timeout.
    let script = "for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done";
    let out = c.run(&["exec", "nginx-pod", "-c", "nginx", "--", "sh", "-c", script]);
    assert!(out.status.success(), "{}", c.logs(&text(&out.stderr)));
    assert_eq!(text(&out.stdout), "1\n2\n3\n4\n5\n6\n");

    // A command that says nothing for 30 s: the stream is closed after 2 s, saying why.
    let started = std::time::Instant::now();
    let out = c.run(&["exec", "nginx-pod", "-c", "nginx", "--", "sleep", "30"]);
    let took = started.elapsed();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("(streamingConnectionIdleTimeout)"),
        "{}",
        c.logs(&text(&out.stderr))
    );
    assert!(took < Duration::from_secs(20), "closed after {took:?}");
    cluster.stop().await;
}

/// How a test request to the kubelet authenticates.
#[derive(Clone, Copy)]
enum Cred<'a> {
    None,
    /// A client certificate and its key (PEM).
    Cert(&'a str, &'a str),
    /// A bearer token.
    Token(&'a str),
}

/// A TLS request to the kubelet's secure port, trusting only its serving certificate in `pki`,
/// with `cred`; the status code and the body.
async fn https(pki: &Path, port: u16, method: &str, path: &str, cred: Cred<'_>) -> (u16, String) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(pki.join("kubelet.crt")).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match cred {
        Cred::Cert(cert, key) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<_, _>>().unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        Cred::None | Cred::Token(_) => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls =
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
    let authorization = match cred {
        Cred::Token(t) => format!("Authorization: Bearer {t}\r\n"),
        _ => String::new(),
    };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: kubelet\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    // A TLS peer may close without close_notify; what was read is the answer.
    let _ = tls.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let code = response.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_api_refuses_anonymous_callers_and_unreachable_pods_get_a_clear_status() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = Cluster::start().await;
    let pods = cluster.nginx_running().await;
    let c = &cluster;
    let port = c.kubelet.secure_port();
    let serving = c.kubelet.root_dir().join("pki");
    let path = "/containerLogs/default/nginx-pod/nginx";

    // The kubelet, verified by its self-signed serving certificate: 401 without a client
    // certificate, the log with the apiserver's.
    assert_eq!(https(&serving, port, "GET", path, Cred::None).await.0, 401);
    let pki = c.api.dir().join("pki");
    let cert = std::fs::read_to_string(pki.join("apiserver-kubelet-client.crt")).unwrap();
    let key = std::fs::read_to_string(pki.join("apiserver-kubelet-client.key")).unwrap();
    let apiserver = Cred::Cert(&cert, &key);
    assert_eq!(https(&serving, port, "GET", path, apiserver).await.0, 200);
    let missing = "/containerLogs/default/missing/nginx";
    assert_eq!(https(&serving, port, "GET", missing, apiserver).await.0, 404);

    // Authorization (Webhook, the default): the kubelet asks the apiserver about each caller.
    // Another node's certificate from the same CA may neither read nor exec here (the Node
    // authorizer gives a node no kubelet API, as upstream's); the apiserver's may (its exec is
    // refused only for lacking an upgrade).
    let (other_cert, other_key) =
        apiserver_lite::certs::issue_client(&pki, "system:node:node-b", &["system:nodes"]).unwrap();
    let other = Cred::Cert(&other_cert, &other_key);
    let (code, body) = https(&serving, port, "GET", path, other).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.starts_with("Forbidden (user=system:node:node-b, verb=get, resource=nodes"),
        "{body}"
    );
    let exec = "/exec/default/nginx-pod/nginx?command=true&stdout=1";
    let (code, body) = https(&serving, port, "POST", exec, other).await;
    assert_eq!(
        (code, body.as_str()),
        (
            403,
            "Forbidden (user=system:node:node-b, verb=create, resource=nodes, subresource=proxy)\n"
        )
    );
    let (code, body) = https(&serving, port, "POST", exec, apiserver).await;
    assert!(![401, 403, 500].contains(&code), "{code} {body}");

    // Bearer tokens (authentication.webhook, the default) are checked with the apiserver
    // (TokenReview): the node's own token authenticates (then, as upstream's Node authorizer
    // gives a node no nodes/proxy, is refused: 403, not 401); a token nobody knows is 401.
    let token = Cred::Token("token-node-a");
    let (code, body) = https(&serving, port, "GET", path, token).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.starts_with("Forbidden (user=system:node:node-a, verb=get, resource=nodes"),
        "{body}"
    );
    assert_eq!(https(&serving, port, "GET", path, Cred::Token("forged")).await.0, 401);

    // The node reports where its kubelet listens.
    let nodes: Api<Node> = Api::all(c.api.admin_client().await.unwrap());
    let node = nodes.get(NODE).await.unwrap();
    let endpoint = node.status.unwrap().daemon_endpoints.unwrap().kubelet_endpoint.unwrap();
    assert_eq!(endpoint.port, i32::from(port));

    // A pod on no node, and a pod on a node whose kubelet reports no endpoint.
    let mut unbound = nginx_pod();
    unbound.metadata.name = Some("unbound".into());
    unbound.spec.as_mut().unwrap().node_name = None;
    pods.create(&PostParams::default(), &unbound).await.unwrap();
    let out = c.run(&["logs", "unbound", "-c", "nginx"]);
    assert!(
        text(&out.stderr).contains("pod unbound does not have a host assigned"),
        "{}",
        text(&out.stderr)
    );
    let ghost: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "ghost"}})).unwrap();
    nodes.create(&PostParams::default(), &ghost).await.unwrap();
    let mut haunted = nginx_pod();
    haunted.metadata.name = Some("haunted".into());
    haunted.spec.as_mut().unwrap().node_name = Some("ghost".into());
    pods.create(&PostParams::default(), &haunted).await.unwrap();
    let out = c.run(&["logs", "haunted", "-c", "nginx"]);
    let err = text(&out.stderr);
    assert!(err.contains("node \"ghost\" has no address"), "{err}");
    let addresses = serde_json::json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}]}});
    nodes.patch_status("ghost", &PatchParams::default(), &Patch::Merge(addresses)).await.unwrap();
    let out = c.run(&["logs", "haunted", "-c", "nginx"]);
    let err = text(&out.stderr);
    assert!(
        err.contains("(ServiceUnavailable)")
            && err.contains("node \"ghost\" reports no kubelet endpoint"),
        "{err}"
    );
    cluster.stop().await;
}
