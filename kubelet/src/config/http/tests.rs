use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::fetch::{FetchError, MAX_BODY_BYTES, TIMEOUT, get};
use super::*;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n";

fn pod(name: &str) -> String {
    POD.replace("NAME", name)
}

/// What the test server answers.
#[derive(Debug, Clone)]
enum Reply {
    Ok(Vec<u8>),
    Status(&'static str, &'static str),
    /// Accepts, reads the request, never answers.
    Hang,
    /// 302 to this location.
    Redirect(String),
}

/// A loopback HTTP/1.1 server answering every request with the current [`Reply`], keeping
/// each request's head.
#[derive(Debug, Clone)]
struct Server {
    url: String,
    reply: Arc<Mutex<Reply>>,
    requests: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
}

impl Server {
    async fn start(reply: Reply) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/pods", listener.local_addr().unwrap());
        let server = Self {
            url,
            reply: Arc::new(Mutex::new(reply)),
            requests: Arc::default(),
            stop: CancellationToken::new(),
        };
        let s = server.clone();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = tokio::select! {
                    () = s.stop.cancelled() => return,
                    accepted = listener.accept() => accepted.unwrap(),
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    s.requests.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                    let reply = s.reply.lock().unwrap().clone();
                    let mut location = String::new();
                    let (status, body) = match reply {
                        Reply::Ok(body) => ("200 OK", body),
                        Reply::Redirect(to) => {
                            location = format!("location: {to}\r\n");
                            ("302 Found", Vec::new())
                        }
                        Reply::Status(status, body) => (status, body.as_bytes().to_vec()),
                        Reply::Hang => {
                            s.stop.cancelled().await;
                            return;
                        }
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\n{location}content-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes()).await;
                    let _ = conn.write_all(&body).await;
                });
            }
        });
        server
    }

    fn answer(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }
}

async fn fetch_into(state: &mut UrlState, url: &str) {
    state.apply(get(url, &[], TIMEOUT, MAX_BODY_BYTES).await);
}

fn names(state: &mut UrlState) -> Vec<String> {
    state.pods().unwrap_or_default().iter().filter_map(|p| p.metadata.name.clone()).collect()
}

#[tokio::test]
async fn a_pod_at_the_url_becomes_a_static_pod_of_source_http() {
    let server = Server::start(Reply::Ok(pod("web").into_bytes())).await;
    let mut state = UrlState::new(server.url.clone(), "node-1".into(), Recorder::default());
    assert_eq!(state.pods(), None, "nothing before the first answer");
    fetch_into(&mut state, &server.url).await;
    let pods = state.pods().unwrap();
    assert_eq!(names(&mut state), ["web-node-1"]);
    let annotations = pods[0].metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations[api::keys::CONFIG_SOURCE], "http");
    // The UID depends on the URL, so the same manifest in a file is another pod.
    let uid = pods[0].metadata.uid.clone();
    let from_file =
        manifest::parse(Path::new("/etc/kubernetes/manifests/web.yaml"), &pod("web"), "node-1");
    assert_ne!(from_file.unwrap().pod.metadata.uid, uid);
    let reports = state.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        (reports[0].file.as_str(), &reports[0].state),
        (server.url.as_str(), &ManifestState::Accepted)
    );
    assert_eq!(reports[0].pod.as_deref(), Some("web-node-1"));
}

#[tokio::test]
async fn a_pod_list_or_a_list_gives_every_pod_and_duplicates_are_reported() {
    let list = serde_json::json!({
    "apiVersion": "v1", "kind": "PodList", "items": [
        serde_yaml_ng::from_str::<serde_json::Value>(&pod("a")).unwrap(),
        serde_yaml_ng::from_str::<serde_json::Value>(&pod("b")).unwrap(),
        serde_yaml_ng::from_str::<serde_json::Value>(&pod("a").replace("1.35", "1.36")).unwrap(),
    ]});
    let server = Server::start(Reply::Ok(serde_json::to_vec(&list).unwrap())).await;
    let mut state = UrlState::new(server.url.clone(), "n".into(), Recorder::default());
    fetch_into(&mut state, &server.url).await;
    assert_eq!(names(&mut state), ["a-n", "b-n"]);
    let dup = state.reports().into_iter().find(|r| r.state == ManifestState::Duplicate).unwrap();
    assert_eq!(dup.reason.as_deref(), Some("pod default/a-n is already declared by items[0]"));

    let yaml_list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        pod("c").trim_end().replace('\n', "\n  ")
    );
    server.answer(Reply::Ok(yaml_list.into_bytes()));
    fetch_into(&mut state, &server.url).await;
    assert_eq!(names(&mut state), ["c-n"]);

    server.answer(Reply::Ok(b"apiVersion: v1\nkind: List\nitems: []\n".to_vec()));
    fetch_into(&mut state, &server.url).await;
    assert_eq!(state.pods(), Some(Vec::new()), "an empty list is an empty set");
}

#[tokio::test]
async fn the_configured_headers_are_sent_each_value_in_order() {
    let server = Server::start(Reply::Ok(pod("web").into_bytes())).await;
    let headers = [
        ("Authorization".to_string(), "Bearer abc".to_string()),
        ("X-Flavor".to_string(), "a".to_string()),
        ("X-Flavor".to_string(), "b".to_string()),
    ];
    get(&server.url, &headers, TIMEOUT, MAX_BODY_BYTES).await.unwrap();
    let request = server.requests.lock().unwrap()[0].to_ascii_lowercase();
    assert!(request.starts_with("get /pods http/1.1\r\n"), "{request}");
    assert!(request.contains("authorization: bearer abc\r\n"), "{request}");
    let a = request.find("x-flavor: a\r\n").unwrap();
    let b = request.find("x-flavor: b\r\n").unwrap();
    assert!(a < b, "{request}");
}

#[tokio::test(start_paused = true)]
async fn failures_keep_the_last_good_set_and_are_reported() {
    let server = Server::start(Reply::Ok(pod("web").into_bytes())).await;
    let recorder = Recorder::default();
    let mut state = UrlState::new(server.url.clone(), "n".into(), recorder.clone());
    fetch_into(&mut state, &server.url).await;
    let good = state.pods().unwrap();

    let huge = vec![b'#'; 10 * 1024 * 1024];
    let cases: Vec<(Reply, String)> = vec![
        (Reply::Status("404 Not Found", "no"), format!("{}: 404 Not Found", server.url)),
        (
            Reply::Status("500 Internal Server Error", ""),
            format!("{}: 500 Internal Server Error", server.url),
        ),
        (
            Reply::Hang,
            format!(
                "Get {:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                server.url
            ),
        ),
        (
            Reply::Ok(huge),
            format!(
                "{}: the answer is larger than the 3145728-byte limit for a manifest URL",
                server.url
            ),
        ),
        (
            Reply::Ok(b"apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\n".to_vec()),
            format!("{}: YAML: line 3: key \"name\" already set in map", server.url),
        ),
        (
            Reply::Ok(pod("web").replace("busybox:1.35", "").into_bytes()),
            format!("{}: invalid pod: spec.containers[0].image: Required value", server.url),
        ),
    ];
    for (reply, want) in cases {
        server.answer(reply);
        let started = tokio::time::Instant::now();
        fetch_into(&mut state, &server.url).await;
        assert!(started.elapsed() <= TIMEOUT + Duration::from_secs(1));
        assert_eq!(state.pods().as_ref(), Some(&good), "{want}: the last good set stays");
        let reports = state.reports();
        assert_eq!(reports.len(), 1, "{reports:?}");
        let r = &reports[0];
        assert_eq!(r.state, ManifestState::Rejected);
        assert!(r.running_previous_version);
        assert_eq!(r.pod.as_deref(), Some("web-n"));
        let reason = r.reason.clone().unwrap();
        assert!(reason.starts_with(&want), "{reason}\n should start with\n{want}");
    }
    // An unreachable URL too.
    let gone = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}/pods", l.local_addr().unwrap())
    };
    let mut other = UrlState::new(gone.clone(), "n".into(), Recorder::default());
    fetch_into(&mut other, &gone).await;
    assert_eq!(other.pods(), None, "no answer yet: no set, the source is not seen");
    let reason = other.reports()[0].reason.clone().unwrap();
    assert!(reason.starts_with(&format!("Get {gone:?}: dial tcp 127.0.0.1:")), "{reason}");
    assert!(reason.contains("onnection refused"), "{reason}");

    // A good answer again: the problem is gone, each problem was recorded once.
    server.answer(Reply::Ok(pod("web").into_bytes()));
    fetch_into(&mut state, &server.url).await;
    assert_eq!(state.reports()[0].state, ManifestState::Accepted);
    let failed = recorder.list().iter().filter(|e| e.reason == FAILED).count();
    assert_eq!(failed, 6);
    server.stop.cancel();
}

#[tokio::test]
async fn an_invalid_item_names_its_index_and_field() {
    let list = format!(
        "apiVersion: v1\nkind: PodList\nitems:\n- {}\n- {}",
        pod("a").trim_end().replace('\n', "\n  "),
        pod("b").replace("busybox:1.35", "\"\"").trim_end().replace('\n', "\n  "),
    );
    let server = Server::start(Reply::Ok(list.into_bytes())).await;
    let mut state = UrlState::new(server.url.clone(), "n".into(), Recorder::default());
    fetch_into(&mut state, &server.url).await;
    assert_eq!(state.pods(), None);
    let reason = state.reports()[0].reason.clone().unwrap();
    assert_eq!(
        reason,
        format!("{}: items[1]: invalid pod: spec.containers[0].image: Required value", server.url)
    );
}

#[tokio::test]
async fn a_byte_order_mark_and_an_empty_answer() {
    let server = Server::start(Reply::Ok(format!("\u{feff}{}", pod("web")).into_bytes())).await;
    let mut state = UrlState::new(server.url.clone(), "n".into(), Recorder::default());
    fetch_into(&mut state, &server.url).await;
    assert_eq!(names(&mut state), ["web-n"]);
    server.answer(Reply::Ok(Vec::new()));
    fetch_into(&mut state, &server.url).await;
    assert_eq!(state.pods(), Some(Vec::new()), "upstream: an empty answer is an empty set");
    let reason = state.reports()[0].reason.clone().unwrap();
    assert_eq!(reason, format!("zero-length data received from {}", server.url));
}

#[tokio::test]
async fn urls_parse_as_go_reads_them() {
    let u = fetch::ManifestUrl::parse("https://user:pw@example.com/a/b?c=d").unwrap();
    assert!(u.https);
    assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("example.com", 443, "/a/b?c=d"));
    assert_eq!(u.userinfo.as_deref(), Some("user:pw"));
    let u = fetch::ManifestUrl::parse("http://[::1]:8080").unwrap();
    assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("::1", 8080, "/"));
    let err = fetch::ManifestUrl::parse("ftp://x/y").unwrap_err();
    assert_eq!(err, "unsupported protocol scheme \"ftp\"");
    assert!(fetch::ManifestUrl::parse("/just/a/path").is_err());
    let e = get("ftp://x/y", &[], TIMEOUT, MAX_BODY_BYTES).await.unwrap_err();
    assert!(matches!(e, FetchError::Transport { .. }), "{e}");
    assert_eq!(e.to_string(), "Get \"ftp://x/y\": unsupported protocol scheme \"ftp\"");
}

#[tokio::test(start_paused = true)]
async fn the_source_sends_its_first_set_and_keeps_it_when_the_url_goes_away() {
    let server = Server::start(Reply::Ok(pod("web").into_bytes())).await;
    let (tx, mut rx) = mpsc::channel(4);
    let (report_tx, mut report_rx) = watch::channel(Vec::new());
    let stop = CancellationToken::new();
    let source = HttpSource {
        url: server.url.clone(),
        headers: Vec::new(),
        node_name: "n".into(),
        period: Duration::from_secs(20),
        timeout: TIMEOUT,
        recorder: Recorder::default(),
        running: Vec::new(),
    };
    let task = tokio::spawn(source.run(tx, report_tx, stop.clone()));
    let first = rx.recv().await.unwrap();
    assert_eq!(first.source, Source::Http);
    assert_eq!(first.pods.len(), 1);
    server.answer(Reply::Status("503 Service Unavailable", ""));
    loop {
        report_rx.changed().await.unwrap();
        if report_rx.borrow().first().is_some_and(|r| r.state == ManifestState::Rejected) {
            break;
        }
    }
    assert!(rx.try_recv().is_err(), "a failure sends no new set");
    stop.cancel();
    task.await.unwrap();
    server.stop.cancel();
}

#[tokio::test]
async fn https_checks_the_certificate_against_the_systems_roots() {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/pods", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        // The client refuses the certificate: the handshake fails on this side too.
        let _ = acceptor.accept(tcp).await;
    });
    let err = get(&url, &[], TIMEOUT, MAX_BODY_BYTES).await.unwrap_err().to_string();
    assert!(err.starts_with(&format!("Get {url:?}: tls: invalid peer certificate")), "{err}");
    server.await.unwrap();
}

#[tokio::test]
async fn redirects_are_followed_and_credentials_go_to_the_first_host_only() {
    let target = Server::start(Reply::Ok(pod("web").into_bytes())).await;
    let port = target.url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap();
    let same_host = Server::start(Reply::Redirect(target.url.clone())).await;
    let other_host = Server::start(Reply::Redirect(format!("http://localhost:{port}/pods"))).await;
    let headers = [
        ("Authorization".to_string(), "Bearer abc".to_string()),
        ("X-Flavor".to_string(), "a".to_string()),
    ];
    for (start, authorization) in [(&same_host, true), (&other_host, false)] {
        let body = get(&start.url, &headers, TIMEOUT, MAX_BODY_BYTES).await.unwrap();
        assert_eq!(body, pod("web").into_bytes());
        let request = target.requests.lock().unwrap().pop().unwrap().to_ascii_lowercase();
        assert!(request.contains("x-flavor: a\r\n"), "{request}");
        assert_eq!(request.contains("authorization: bearer abc\r\n"), authorization, "{request}");
    }
    let looping = Server::start(Reply::Redirect("/pods".into())).await;
    let err = get(&looping.url, &[], TIMEOUT, MAX_BODY_BYTES).await.unwrap_err().to_string();
    assert_eq!(err, format!("Get {:?}: stopped after 10 redirects", looping.url));
}

#[test]
fn a_urls_pod_keeps_its_uid_across_an_in_place_edit() {
    let url = "http://example.test/pods";
    let mut state = UrlState::new(url.into(), "n".into(), Recorder::default());
    let pod = |label: &str, image: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {{v: {label}}}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
        )
    };
    state.apply(Ok(pod("one", "busybox:1.35").into_bytes()));
    let first = state.pods().unwrap().remove(0);
    state.apply(Ok(pod("two", "busybox:1.36").into_bytes()));
    let edited = state.pods().unwrap().remove(0);
    assert_eq!(edited.metadata.uid, first.metadata.uid, "a label and an image keep the pod");
    assert_eq!(edited.metadata.labels.as_ref().unwrap()["v"], "two");
    state.apply(Ok(pod("two", "busybox:1.36").replace("- name: c", "- name: d").into_bytes()));
    let replaced = state.pods().unwrap().remove(0);
    assert_ne!(replaced.metadata.uid, first.metadata.uid, "another container: a new pod");
}
