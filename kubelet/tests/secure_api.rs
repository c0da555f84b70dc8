//! The kubelet's secure API against the fake CRI runtime: TLS with a self-signed serving
//! certificate, client certificates from the configured CA, 401 for anonymous callers,
//! `/containerLogs` reading the runtime's CRI log file, and `/portForward`'s refusals. Hermetic: temp dirs, loopback, no root.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_cri::{FakeCriServer, FakeRuntime, Match, Program};
use kubelet::config::kubelet_config::{AuthorizationMode, KubeletConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const NODE: &str = "node-a";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A CA and a client certificate it signed (PEM: CA, cert, key).
fn client_pki(cn: &str) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "test-ca");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.distinguished_name.push(DnType::OrganizationName, "system:masters");
    let cert = params.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// `GET path` over TLS (HTTP/1.0, so the body ends with the connection), trusting only the
/// kubelet's serving certificate in `pki`: status and body, or `None` if the connection failed
/// (e.g. no certificate yet, or the handshake was refused).
async fn get(
    pki: &Path,
    port: u16,
    path: &str,
    client: Option<(&str, &str)>,
) -> Option<(u16, String)> {
    request(pki, port, "GET", path, "", client).await
}

/// [`get`] with another method and more header lines (each ending in CRLF).
async fn request(
    pki: &Path,
    port: u16,
    method: &str,
    path: &str,
    headers: &str,
    client: Option<(&str, &str)>,
) -> Option<(u16, String)> {
    let serving = std::fs::read(pki.join("kubelet.crt")).ok()?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(&serving).ok()?).ok()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes()).collect::<Result<_, _>>().unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls =
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.ok()?;
    let head = format!("{method} {path} HTTP/1.0\r\nHost: kubelet\r\n{headers}\r\n");
    tls.write_all(head.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    let _ = tls.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.get(9..12)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((code, body))
}

#[tokio::test]
async fn container_logs_need_a_client_certificate_from_the_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    for d in ["manifests", "root", "logs"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let runtime = FakeRuntime::new();
    runtime.add_image("busybox:1.35").unwrap();
    let output = ["hello", "world"].iter().map(|l| (fake_cri::Stream::Stdout, (*l).to_string()));
    let program = Program { output: output.collect(), ..Program::default() };
    runtime.set_program(Match::Any, program);
    let _fake = FakeCriServer::start_with(runtime, &dir.path().join("cri.sock")).unwrap();
    let (ca, cert, key) = client_pki("kube-apiserver-kubelet-client");
    std::fs::write(dir.path().join("ca.crt"), &ca).unwrap();
    std::fs::write(
        dir.path().join("manifests/web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox:1.35\n",
    )
    .unwrap();
    let port = free_port();
    let config = KubeletConfig {
        node_name: NODE.into(),
        static_pod_path: Some(dir.path().join("manifests")),
        static_config_path: Some(dir.path().join("static-config")),
        container_runtime_endpoint: format!("unix://{}", dir.path().join("cri.sock").display()),
        pod_logs_dir: dir.path().join("logs"),
        root_dir: dir.path().join("root"),
        // Hermetic: the kubelet touches no cgroup of the host (as hollow nodes run).
        cgroup_root: "/kubelet-rs-test".into(),
        cgroups_per_qos: false,
        enforce_node_allocatable: Some(Vec::new()),
        address: [127, 0, 0, 1].into(),
        port,
        read_only_port: 0,
        healthz_port: 0,
        client_ca_file: Some(dir.path().join("ca.crt")),
        // Standalone: no apiserver to ask, so every authenticated caller may use the API.
        authorization_mode: AuthorizationMode::AlwaysAllow,
        ..KubeletConfig::default()
    };
    let stop = CancellationToken::new();
    let kubelet = tokio::spawn(kubelet::run(config, stop.clone()));
    let pki = dir.path().join("root/pki");

    // The pod's log, once it runs, with the configured CA's client certificate.
    let path = "/containerLogs/default/web-node-a/app";
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        match get(&pki, port, path, Some((&cert, &key))).await {
            Some((200, body)) if body == "hello\nworld\n" => break body,
            other => {
                assert!(Instant::now() < deadline, "no log: {other:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(body, "hello\nworld\n");
    let tail = get(&pki, port, &format!("{path}?tailLines=1"), Some((&cert, &key))).await.unwrap();
    assert_eq!(tail, (200, "world\n".to_string()));
    let bad = get(&pki, port, &format!("{path}?tailLines=-1"), Some((&cert, &key))).await.unwrap();
    assert_eq!(bad.0, 400);
    assert_eq!(bad.1.trim(), "invalid tailLines: must be greater than or equal to 0");
    let missing = get(&pki, port, "/containerLogs/default/web-node-a/nope", Some((&cert, &key)))
        .await
        .unwrap();
    assert_eq!(
        missing,
        (404, "container \"nope\" not found in pod \"default/web-node-a\"\n".into())
    );

    // Port-forward: a pod the kubelet does not run, or by another UID, is 404; a request that is
    // no upgrade is upstream's 400.
    let forward = |path: &'static str| get(&pki, port, path, Some((&cert, &key)));
    assert_eq!(
        forward("/portForward/default/nope").await,
        Some((404, "pod \"default/nope\" not found\n".into()))
    );
    assert_eq!(forward("/portForward/default/web-node-a/not-its-uid").await.unwrap().0, 404);
    let plain = forward("/portForward/default/web-node-a").await.unwrap();
    assert_eq!(plain.0, 400);
    assert!(
        plain.1.starts_with("unable to upgrade: missing upgrade headers in request"),
        "{plain:?}"
    );
    // A SPDY upgrade reaches the runtime, whose refusal (this one has no streaming server) is
    // the kubelet's 500 naming the pod; a protocol the kubelet does not speak is 403.
    let spdy = "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n";
    let web = "/portForward/default/web-node-a";
    let refused = request(&pki, port, "POST", web, spdy, Some((&cert, &key))).await.unwrap();
    assert_eq!(refused.0, 500);
    assert!(refused.1.starts_with("pod \"default/web-node-a\": runtime: "), "{refused:?}");
    let other = spdy.replace("portforward.k8s.io", "v4.channel.k8s.io");
    let refused = request(&pki, port, "POST", web, &other, Some((&cert, &key))).await.unwrap();
    assert_eq!(refused.0, 403, "{refused:?}");

    // No certificate: 401. A certificate from another CA: refused.
    assert_eq!(get(&pki, port, path, None).await, Some((401, "Unauthorized\n".into())));
    let (_, stranger, stranger_key) = client_pki("mallory");
    let refused = get(&pki, port, path, Some((&stranger, &stranger_key))).await;
    assert!(refused.is_none() || refused.as_ref().is_some_and(|r| r.0 == 401), "{refused:?}");

    // The self-signed serving certificate (every request above verified it) was made under the
    // root directory.
    assert!(pki.join("kubelet.crt").exists());
    stop.cancel();
    kubelet.await.unwrap().unwrap();
}
