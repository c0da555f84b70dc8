//! The harness the bad-input and node-authorizer tests share: apiserver-lite on a loopback
//! port over a temporary store (SQLite, or etcd: [`stores`]) (Node,RBAC over the bootstrap policy, the node graph
//! following the store), and a raw HTTP/1.1 client that re-dials when the server closes the
//! connection and may impersonate (`Impersonate-*` headers, as `kubectl --as`).

#![allow(dead_code)] // each test file uses its own part

pub mod stores;

use std::net::SocketAddr;
use std::sync::Arc;

use apiserver_lite::admission::{Admission, Plugin};
use apiserver_lite::auth::Authenticator;
use apiserver_lite::auth::node::graph::Graph;
use apiserver_lite::auth::node::populator;
use apiserver_lite::http::ApiState;
use apiserver_lite::registry::Registry;
use apiserver_lite::server;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct Server {
    pub addr: SocketAddr,
    pub registry: Arc<Registry>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
    _store: stores::TestStore,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_on(stores::Backend::Sqlite).await
    }

    pub async fn start_on(backend: stores::Backend) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let test_store = stores::TestStore::start(backend);
        let store = Arc::new(test_store.open().await);
        // No controller-manager makes `default` ServiceAccounts here (see registry.rs).
        let admission = Admission::default().without(Plugin::ServiceAccount);
        let registry = Arc::new(Registry::new(store.clone()).with_admission(admission));
        registry.bootstrap().await.unwrap();
        let graph = Arc::new(Graph::default());
        let from = populator::load(&graph, &store);
        let listener = server::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pki = apiserver_lite::certs::ensure(&dir.path().join("pki"), &[]).unwrap();
        let kubelet = apiserver_lite::http::proxy::KubeletClient::new(
            &pki.kubelet_client_cert,
            &pki.kubelet_client_key,
            None,
            Default::default(),
        )
        .unwrap();
        let state = Arc::new(ApiState {
            registry: registry.clone(),
            auth: Authenticator::default(),
            // Node,RBAC over the bootstrap policy: the reviews below ask about non-masters.
            authz: apiserver_lite::auth::Authorizer::node_rbac(Arc::new(
                apiserver_lite::auth::rbac::Rbac::with_index(
                    apiserver_lite::auth::rbac::Index::bootstrap(),
                ),
            ))
            .with_graph(graph.clone()),
            address: addr.to_string(),
            kubelet,
            tokens: None,
            openid: None,
            audit: None,
            metrics: Arc::new(apiserver_lite::metrics::Metrics::new(
                apiserver_lite::metrics::DEFAULT_RESOLUTION,
            )),
        });
        let stop = CancellationToken::new();
        let serving = server::serve_insecure(listener, state, stop.clone());
        let following = populator::run(graph, store, from, stop.clone());
        let task = tokio::spawn(async move {
            tokio::join!(serving, following);
        });
        Self { addr, registry, stop, task, _dir: dir, _store: test_store }
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// One HTTP/1.1 connection, re-dialled when the server closes it.
pub struct Client {
    addr: SocketAddr,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Headers every request carries (impersonation).
    headers: Vec<(String, String)>,
}

pub struct Reply {
    pub code: u16,
    pub body: Value,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, sender: None, headers: Vec::new() }
    }

    /// A client acting as `user` in `groups` (the insecure port's admin impersonating).
    pub fn impersonating(addr: SocketAddr, user: &str, groups: &[&str]) -> Self {
        let mut headers = vec![("Impersonate-User".to_string(), user.to_string())];
        headers.extend(groups.iter().map(|g| ("Impersonate-Group".to_string(), g.to_string())));
        Self { addr, sender: None, headers }
    }

    async fn dial(&mut self) -> &mut SendRequest<Full<Bytes>> {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(conn);
        self.sender.insert(sender)
    }

    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        ct: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let mut req = hyper::Request::builder().method(method).uri(path).header("host", "x");
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        let req = req.body(Full::new(Bytes::from(body))).unwrap();
        let alive = match self.sender.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        let sender = match self.sender.as_mut() {
            Some(s) if alive => s,
            _ => self.dial().await,
        };
        let resp = sender
            .send_request(req)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: the server dropped the connection: {e}"));
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let body = serde_json::from_slice(&bytes).unwrap_or_else(
            |_| json!({"raw": String::from_utf8_lossy(&bytes[..bytes.len().min(200)])}),
        );
        Reply { code, body }
    }

    pub async fn json(&mut self, method: &str, path: &str, ct: &str, body: &Value) -> Reply {
        self.send(method, path, Some(ct), serde_json::to_vec(body).unwrap()).await
    }
}

pub const PODS: &str = "/api/v1/namespaces/default/pods";
pub const JSON: &str = "application/json";

pub fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "c", "image": "busybox:1.35", "ports": [{"containerPort": 80}]}]}})
}

pub fn assert_status(r: &Reply, code: u16, reason: &str) -> String {
    assert_eq!((r.code, r.body["kind"].as_str()), (code, Some("Status")), "{}", r.body);
    assert_eq!(r.body["code"], code, "{}", r.body);
    assert_eq!(r.body["reason"], reason, "{}", r.body);
    assert_eq!(r.body["status"], "Failure", "{}", r.body);
    r.body["message"].as_str().unwrap().to_string()
}

pub fn workload(kind: &str, name: &str, restart: &str) -> Value {
    let (group, spec) = match kind {
        "Job" => ("batch/v1", json!({"template": {"spec": pod("x")["spec"]}})),
        "CronJob" => (
            "batch/v1",
            json!({"schedule": "@hourly", "jobTemplate": {"spec": {"template": {"spec": pod("x")["spec"]}}}}),
        ),
        _ => (
            "apps/v1",
            json!({"selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod("x")["spec"]}}),
        ),
    };
    let mut w =
        json!({"apiVersion": group, "kind": kind, "metadata": {"name": name}, "spec": spec});
    let template = match kind {
        "CronJob" => &mut w["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        _ => &mut w["spec"]["template"]["spec"],
    };
    template["restartPolicy"] = json!(restart);
    w
}
