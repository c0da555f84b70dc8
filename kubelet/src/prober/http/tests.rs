use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A server answering each request by its path; records the request heads it saw.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                log.lock().unwrap().push(head.clone());
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                let reply = |status: &str, extra: &str, body: &str| {
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\n{extra}\r\n{body}",
                        body.len()
                    )
                };
                let out = match path.as_str() {
                    "/ok" => reply("200 OK", "", "fine"),
                    "/fail" => reply("503 Service Unavailable", "", "down"),
                    "/here" => reply("302 Found", "Location: /ok\r\n", ""),
                    "/elsewhere" => {
                        reply("302 Found", "Location: http://192.0.2.1:9/ok\r\n", "moved away")
                    }
                    "/loop" => reply("302 Found", "Location: /loop\r\n", ""),
                    "/hang" => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        String::new()
                    }
                    "/huge" => {
                        let head = "HTTP/1.1 200 OK\r\nContent-Length: 10737418240\r\n\r\n";
                        if s.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        let chunk = vec![b'x'; 64 * 1024];
                        while s.write_all(&chunk).await.is_ok() {}
                        return;
                    }
                    _ => reply("404 Not Found", "", ""),
                };
                let _ = s.write_all(out.as_bytes()).await;
            });
        }
    });
    Server { port, seen, task }
}

fn target(port: u16, path: &str) -> Target {
    Target {
        scheme: Scheme::Http,
        host: "127.0.0.1".into(),
        port,
        path: path.into(),
        headers: vec![],
    }
}

const T: Duration = Duration::from_secs(2);

#[tokio::test]
async fn status_codes_decide_and_headers_are_upstreams() {
    let s = serve().await;
    assert_eq!(probe(&target(s.port, "/ok"), T).await, Outcome::Success("fine".into()));
    assert_eq!(
        probe(&target(s.port, "/fail"), T).await,
        Outcome::Failure("HTTP probe failed with statuscode: 503".into())
    );
    let head = s.seen.lock().unwrap()[0].to_lowercase();
    assert!(head.starts_with("get /ok http/1.1\r\n"), "{head}");
    assert!(head.contains("user-agent: kube-probe/1.35\r\n"), "{head}");
    assert!(head.contains("accept: */*\r\n") && head.contains("connection: close\r\n"), "{head}");
    assert!(head.contains(&format!("host: 127.0.0.1:{}\r\n", s.port)), "{head}");

    let mut custom = target(s.port, "/ok");
    custom.headers = vec![("Host".into(), "example.test".into()), ("X-Probe".into(), "1".into())];
    assert!(probe(&custom, T).await.is_success());
    let head = s.seen.lock().unwrap()[2].to_lowercase();
    assert!(head.contains("host: example.test\r\n") && head.contains("x-probe: 1\r\n"), "{head}");
}

#[tokio::test]
async fn redirects_are_followed_on_the_same_host_only() {
    let s = serve().await;
    assert_eq!(probe(&target(s.port, "/here"), T).await, Outcome::Success("fine".into()));
    assert_eq!(
        probe(&target(s.port, "/elsewhere"), T).await,
        Outcome::Warning("Probe terminated redirects, Response body: moved away".into())
    );
    let looped = probe(&target(s.port, "/loop"), T).await;
    assert!(
        matches!(&looped, Outcome::Failure(m) if m.ends_with("stopped after 10 redirects")),
        "{looped:?}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_or_answers_forever_is_bounded() {
    let s = serve().await;
    let hang = probe(&target(s.port, "/hang"), Duration::from_millis(300)).await;
    assert!(
        matches!(&hang, Outcome::Failure(m) if m.contains("context deadline exceeded")),
        "{hang:?}"
    );
    // 10 GiB announced and streamed: the status decides after 10 KiB of body.
    let huge = probe(&target(s.port, "/huge"), T).await;
    assert!(
        matches!(&huge, Outcome::Success(b) if b.len() == MAX_OUTPUT),
        "{:?}",
        huge.output().len()
    );
}

#[tokio::test]
async fn a_refused_connection_and_an_unresolvable_host_fail_with_the_reason() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let refused = probe(&target(port, "/"), T).await;
    assert!(matches!(&refused, Outcome::Failure(m) if m.contains("connect:")), "{refused:?}");
    let mut nowhere = target(80, "/");
    nowhere.host = "no-such-host.invalid".into();
    let unresolved = probe(&nowhere, T).await;
    assert!(matches!(unresolved, Outcome::Failure(_)), "{unresolved:?}");
}

#[test]
fn redirect_locations_resolve_like_a_browser() {
    let from = target(8080, "/a/b?x=1");
    let abs = redirect_target(&from, "https://other:8443/c").unwrap();
    assert_eq!(
        (abs.scheme, abs.host.as_str(), abs.port, abs.path.as_str()),
        (Scheme::Https, "other", 8443, "/c")
    );
    assert_eq!(redirect_target(&from, "/c").unwrap().path, "/c");
    assert_eq!(redirect_target(&from, "c").unwrap().path, "/a/c");
    let v6 = redirect_target(&from, "http://[::1]/x").unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("::1", 80));
}
