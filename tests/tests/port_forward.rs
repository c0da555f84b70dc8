//! `kubectl port-forward` on real containerd: the real kubectl v1.35 tunnels SPDY through a
//! WebSocket (`SPDY/3.1+portforward.k8s.io`) to apiserver-lite, which asks the kubelet for SPDY
//! (`/portForward/{ns}/{pod}`), which hands the connection to containerd's streaming server (CRI
//! `PortForward`). HTTP fetched through the local port is the pod's page. Also what a client is
//! told when the forward cannot be made or a port has no listener.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use e2e::apiserver::kubectl_binary;
use e2e::cluster::JoinedNode;
use e2e::{eventually, require};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use kubelet::server::spdy::Frame;

const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);
/// What busybox-httpd's page says.
const PAGE: &str = "It works: busybox httpd standing in for nginx";

/// `web`: httpd on port 80 and on 8080, labelled `app: web`.
fn web_pod() -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "httpd", "image": "busybox-httpd:1.35",
                "command": ["sh", "-c", "httpd -p 8080 -h /var/www && exec httpd -f -p 80 -h /var/www"],
            }],
        },
    }))
    .unwrap()
}

/// A Deployment selecting `web` (no controller runs here: kubectl only needs its selector).
fn web_deployment() -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "httpd", "image": "busybox-httpd:1.35"}]},
            },
        },
    }))
    .unwrap()
}

/// A ReplicaSet selecting `web`.
fn web_replicaset() -> ReplicaSet {
    let d = web_deployment();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web"},
        "spec": d.spec.map(|s| serde_json::json!({
            "replicas": 1, "selector": s.selector, "template": s.template,
        })),
    }))
    .unwrap()
}

/// A running `kubectl port-forward`: its stdout lines, its stderr in a file.
struct Forward {
    child: Child,
    lines: Receiver<String>,
    stderr: PathBuf,
}

impl Forward {
    /// The local port kubectl listens on (127.0.0.1) for `remote`, from its "Forwarding from"
    /// lines.
    fn local_port(&self, remote: u16) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let suffix = format!(" -> {remote}");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no forward for {remote}: {e}; {}", self.stderr()));
            if let Some(port) = line
                .strip_prefix("Forwarding from 127.0.0.1:")
                .and_then(|rest| rest.strip_suffix(&suffix))
            {
                return port.parse().unwrap();
            }
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits (bounded) for kubectl to exit by itself.
    fn exited(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(POLL);
        }
        None
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /` over a fresh connection to 127.0.0.1:`port`: the whole response.
fn http_get(port: u16) -> std::io::Result<String> {
    let mut conn = TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(20)))?;
    conn.write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")?;
    let mut out = Vec::new();
    conn.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    e2e::ports::free_port().unwrap()
}

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

    /// Creates `web` and waits until its httpd runs.
    async fn web_running(&self) {
        let pods: Api<Pod> = Api::namespaced(self.api.admin_client().await.unwrap(), "default");
        pods.create(&PostParams::default(), &web_pod()).await.unwrap();
        eventually("web running", WAIT, POLL, || async {
            let p = pods.get("web").await.ok()?;
            let status = p.status?;
            (status.phase.as_deref() == Some("Running")).then_some(())
        })
        .await
        .unwrap_or_else(|e| panic!("{}", self.logs(&e.to_string())));
    }

    fn kubectl(&self, args: &[&str]) -> Command {
        let home = self.api.dir().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut c = Command::new(kubectl_binary().unwrap());
        c.args(args).env("KUBECONFIG", self.api.kubeconfig()).env("HOME", home);
        c
    }

    /// Starts `kubectl port-forward <args>`.
    fn forward(&self, args: &[&str]) -> Forward {
        self.forward_with(args, &[])
    }

    /// Starts `kubectl port-forward <args>` with more environment.
    fn forward_with(&self, args: &[&str], env: &[(&str, &str)]) -> Forward {
        let stderr = self.api.dir().join(format!("port-forward-{}.err", rand_suffix()));
        let mut child = self
            .kubectl(&[&["port-forward"], args].concat())
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            while let Some(Ok(l)) = out.next() {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Forward { child, lines, stderr }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.api.kubectl(args).unwrap()
    }

    /// The page through `port`, retried briefly (kubectl listens before its first stream).
    async fn page(&self, port: u16) -> String {
        eventually("the page through the forward", WAIT, POLL, || async {
            http_get(port).ok().filter(|r| r.contains(PAGE))
        })
        .await
        .unwrap_or_else(|e| panic!("{}", self.logs(&e.to_string())))
    }

    async fn stop(self) {
        self.0.stop().await.unwrap();
    }
}

fn rand_suffix() -> u64 {
    rand::random()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_reaches_the_pods_ports_through_the_apiserver_and_the_kubelet() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = Cluster::start().await;
    cluster.web_running().await;
    let c = &cluster;

    // pod/web, two ports at once, random local ports; each connection is its own stream pair.
    let both = c.forward(&["pod/web", ":80", ":8080", "-v=4"]);
    let (p80, p8080) = (both.local_port(80), both.local_port(8080));
    let first = c.page(p80).await;
    assert!(first.starts_with("HTTP/1.") && first.contains(PAGE), "{first}");
    let second = http_get(p80).unwrap();
    assert!(second.contains(PAGE), "a second connection through the same forward: {second}");
    assert!(http_get(p8080).unwrap().contains(PAGE), "{}", both.stderr());
    // That was the WebSocket tunnel kubectl tries first, not its SPDY fallback.
    let log = both.stderr();
    assert!(
        log.contains("negotiated protocol: portforward.k8s.io") && !log.contains("fallback"),
        "{log}"
    );

    // kubectl's SPDY fallback (what it uses when the tunnel is refused, or is turned off).
    let spdy = c.forward_with(&["pod/web", ":80"], &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")]);
    c.page(spdy.local_port(80)).await;
    drop(spdy);

    // A bare pod name and a fixed local port.
    let local = free_port();
    let bare = c.forward(&["web", &format!("{local}:80")]);
    assert_eq!(bare.local_port(80), local);
    c.page(local).await;
    drop(bare);

    // deployment/web: kubectl picks a pod by the Deployment's selector.
    let client = c.api.admin_client().await.unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    deployments.create(&PostParams::default(), &web_deployment()).await.unwrap();
    let by_deployment = c.forward(&["deployment/web", ":80"]);
    c.page(by_deployment.local_port(80)).await;
    drop(by_deployment);
    // rs/web likewise, by the ReplicaSet's selector.
    let client = c.api.admin_client().await.unwrap();
    let replicasets: Api<ReplicaSet> = Api::namespaced(client, "default");
    replicasets.create(&PostParams::default(), &web_replicaset()).await.unwrap();
    let by_rs = c.forward(&["rs/web", ":80"]);
    c.page(by_rs.local_port(80)).await;
    drop(by_rs);

    // A port nothing listens on: the connection closes without data, kubectl prints the
    // runtime's message from the error stream and (as kubectl 1.35 does after any stream error)
    // ends that forward. The other forward keeps working.
    let mut nothing = c.forward(&["pod/web", ":81"]);
    let p81 = nothing.local_port(81);
    let answer = http_get(p81).unwrap_or_default();
    assert!(!answer.contains(PAGE), "{answer}");
    let status = nothing.exited(Duration::from_secs(30));
    let err = nothing.stderr();
    assert!(status.is_some_and(|s| !s.success()), "kubectl still forwarding: {err}");
    assert!(err.contains("81") && err.contains("connection refused"), "{err}");
    assert!(err.contains("lost connection to pod"), "{err}");
    assert!(http_get(p80).unwrap().contains(PAGE), "the other forward: {}", both.stderr());
    drop(both);

    // Bad requests: a pod that does not exist (404), and a request that is no upgrade (the
    // kubelet's 400 passed on as a Status).
    let missing = c.kubectl(&["port-forward", "pod/nope", ":80"]).output().unwrap();
    assert!(!missing.status.success());
    assert!(text(&missing.stderr).contains("pods \"nope\" not found"), "{}", text(&missing.stderr));
    let raw = c.run(&["get", "--raw", "/api/v1/namespaces/default/pods/nope/portforward"]);
    assert!(text(&raw.stderr).contains("pods \"nope\" not found"), "{}", text(&raw.stderr));
    // A pod bound to no node (no scheduler runs here): the apiserver says so.
    let client = c.api.admin_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut unbound = web_pod();
    unbound.metadata.name = Some("unbound".into());
    unbound.spec.as_mut().unwrap().node_name = None;
    pods.create(&PostParams::default(), &unbound).await.unwrap();
    let raw = c.run(&["get", "--raw", "/api/v1/namespaces/default/pods/unbound/portforward"]);
    assert!(
        text(&raw.stderr).contains("pod unbound does not have a host assigned"),
        "{}",
        text(&raw.stderr)
    );
    let raw = c.run(&["get", "--raw", "/api/v1/namespaces/default/pods/web/portforward"]);
    assert!(
        text(&raw.stderr).contains("unable to upgrade: missing upgrade headers in request"),
        "{}",
        text(&raw.stderr)
    );

    cluster.stop().await;
}

/// A SPDY client connection to the kubelet's `/portForward`, as the API server makes it (its
/// kubelet client certificate, or another's), with the kubelet's own SPDY framing.
mod raw {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use bytes::BytesMut;
    use kubelet::server::spdy::{self, Frame, HeaderEncoder, ResponseHead};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio_rustls::client::TlsStream;

    pub struct Spdy {
        io: TlsStream<TcpStream>,
        buf: BytesMut,
        headers: HeaderEncoder,
    }

    /// A TLS connection to the kubelet on `port` (trusting its serving certificate in `pki`)
    /// presenting `cert`/`key`.
    pub async fn connect(pki: &Path, port: u16, cert: &str, key: &str) -> TlsStream<TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(pki.join("kubelet.crt")).unwrap()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<_, _>>().unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap()
    }

    /// Asks for a SPDY `portforward.k8s.io` upgrade of `path`: the answer's head, and the
    /// session if it was 101 (else the body).
    pub async fn upgrade(
        mut io: TlsStream<TcpStream>,
        path: &str,
    ) -> (ResponseHead, Result<Spdy, String>) {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: kubelet\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n\r\n"
        );
        io.write_all(request.as_bytes()).await.unwrap();
        let mut buf = BytesMut::new();
        let head = spdy::read_response_head(&mut io, &mut buf).await.unwrap().unwrap();
        if head.status != 101 {
            let body = spdy::refusal_body(&mut io, &mut buf).await;
            return (head, Err(body));
        }
        (head, Ok(Spdy { io, buf, headers: HeaderEncoder::default() }))
    }

    impl Spdy {
        /// Opens stream `id` with `headers` (lowercase names, as SPDY wants them).
        pub async fn open(&mut self, id: u32, headers: &[(&str, &str)]) {
            let block = self.headers.encode(headers);
            self.io.write_all(&spdy::syn_stream_frame(id, &block)).await.unwrap();
        }

        pub async fn send(&mut self, id: u32, fin: bool, data: &[u8]) {
            self.io.write_all(&spdy::data_frame(id, fin, data)).await.unwrap();
        }

        /// The next frame within 30 s; `None` when the kubelet closed.
        pub async fn next(&mut self) -> Option<Frame> {
            tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    if let Some(f) = spdy::decode(&mut self.buf).unwrap() {
                        return Some(f);
                    }
                    // A TLS peer may close without close_notify: that is a close too.
                    match self.io.read_buf(&mut self.buf).await {
                        Ok(0) | Err(_) => return None,
                        Ok(_) => {}
                    }
                }
            })
            .await
            .expect("no frame from the kubelet within 30 s")
        }

        /// Frames until `done` says so (each frame is passed to it); panics if the connection
        /// ends first.
        pub async fn until(&mut self, mut done: impl FnMut(&Frame) -> bool) {
            loop {
                let f = self.next().await.expect("the kubelet closed the connection");
                if done(&f) {
                    return;
                }
            }
        }
    }
}

/// Upstream's answers to what kubectl never sends but another client may: port headers that
/// are missing or not a port reset that stream alone; a port with no listener is told on the
/// error stream; the streams beside them work. Also who may forward at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_with_bad_port_headers_are_reset_and_the_others_on_the_connection_work() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let cluster = Cluster::start().await;
    cluster.web_running().await;
    let c = &cluster;
    let port = c.kubelet.secure_port();
    let serving = c.kubelet.root_dir().join("pki");
    let pki = c.api.dir().join("pki");
    let cert = std::fs::read_to_string(pki.join("apiserver-kubelet-client.crt")).unwrap();
    let key = std::fs::read_to_string(pki.join("apiserver-kubelet-client.key")).unwrap();

    // Another node's certificate may not forward into this node's pods (nodes/proxy, create).
    let (other_cert, other_key) =
        apiserver_lite::certs::issue_client(&pki, "system:node:node-b", &["system:nodes"]).unwrap();
    let io = raw::connect(&serving, port, &other_cert, &other_key).await;
    let (head, body) = raw::upgrade(io, "/portForward/default/web").await;
    assert_eq!(head.status, 403);
    assert_eq!(
        body.err().unwrap(),
        "Forbidden (user=system:node:node-b, verb=create, resource=nodes, subresource=proxy)"
    );
    // A pod the kubelet does not run, or another UID: 404.
    let io = raw::connect(&serving, port, &cert, &key).await;
    let (head, _) = raw::upgrade(io, "/portForward/default/nope").await;
    assert_eq!(head.status, 404);
    let io = raw::connect(&serving, port, &cert, &key).await;
    let (head, _) = raw::upgrade(io, "/portForward/default/web/not-its-uid").await;
    assert_eq!(head.status, 404);

    let io = raw::connect(&serving, port, &cert, &key).await;
    let (head, session) = raw::upgrade(io, "/portForward/default/web").await;
    assert_eq!(head.header("X-Stream-Protocol-Version"), Some("portforward.k8s.io"));
    let mut s = session.unwrap_or_else(|body| panic!("{}", c.logs(&body)));
    let bad: [(u32, Option<&str>); 4] =
        [(1, None), (3, Some("http")), (5, Some("0")), (7, Some("70000"))];
    for (id, port) in bad {
        let mut headers = vec![("streamtype", "error"), ("requestid", "bad")];
        headers.extend(port.map(|p| ("port", p)));
        s.open(id, &headers).await;
    }
    let mut reset = Vec::new();
    s.until(|f| {
        match f {
            Frame::RstStream { stream, .. } => reset.push(*stream),
            Frame::SynReply { stream, .. } => panic!("stream {stream} accepted"),
            _ => {}
        }
        reset.len() == 4
    })
    .await;
    reset.sort_unstable();
    assert_eq!(reset, [1, 3, 5, 7]);

    // A good pair on the same connection: the page.
    s.open(9, &[("streamtype", "error"), ("port", "80"), ("requestid", "1")]).await;
    s.open(11, &[("streamtype", "data"), ("port", "80"), ("requestid", "1")]).await;
    let mut replies = 0;
    s.until(|f| {
        replies += usize::from(matches!(f, Frame::SynReply { .. }));
        replies == 2
    })
    .await;
    s.send(11, false, b"GET / HTTP/1.0\r\nHost: web\r\n\r\n").await;
    let mut page = Vec::new();
    s.until(|f| match f {
        Frame::Data { stream: 11, data, fin } => {
            page.extend_from_slice(data);
            *fin
        }
        Frame::RstStream { stream: 11, .. } => true,
        _ => false,
    })
    .await;
    let page = text(&page);
    assert!(page.contains(PAGE), "{page}");

    // Port 81 has no listener: the runtime says so on the pair's error stream.
    s.open(13, &[("streamtype", "error"), ("port", "81"), ("requestid", "2")]).await;
    s.open(15, &[("streamtype", "data"), ("port", "81"), ("requestid", "2")]).await;
    let mut message = Vec::new();
    s.until(|f| match f {
        Frame::Data { stream: 13, data, fin } => {
            message.extend_from_slice(data);
            *fin
        }
        _ => false,
    })
    .await;
    let message = text(&message);
    assert!(message.contains("81") && message.contains("connection refused"), "{message}");
    drop(s);
    cluster.stop().await;
}

/// `streamingConnectionIdleTimeout` ends a forward that carries no data, kubectl's keepalive
/// pings notwithstanding; data keeps it open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_with_no_data_is_closed_after_the_idle_timeout() {
    if !require::real_runtime(require::CONTAINERD_TOOLS) {
        return;
    }
    let node =
        JoinedNode::start_with_kubelet_flags(NODE, &["--streaming-connection-idle-timeout=3s"]);
    let cluster = Cluster(node.await.unwrap());
    cluster.web_running().await;
    let c = &cluster;
    let mut forward = c.forward(&["pod/web", ":80"]);
    let port = forward.local_port(80);
    // Requests every second for 5 s: past the timeout, still open.
    for _ in 0..5 {
        c.page(port).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(forward.child.try_wait().unwrap().is_none(), "{}", forward.stderr());
    // Then nothing: the kubelet closes the connection and kubectl says it lost the pod.
    let status = forward.exited(Duration::from_secs(30));
    let err = forward.stderr();
    assert!(status.is_some_and(|s| !s.success()), "still forwarding: {}", c.logs(&err));
    assert!(err.contains("lost connection to pod"), "{err}");
    drop(forward);
    cluster.stop().await;
}
