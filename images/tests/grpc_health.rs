//! The gRPC health server of the grpc-health image ([`images::GRPC_HEALTH_BINARY`]), run on the
//! host and asked by a real gRPC client (tonic-health, h2 underneath: Huffman-coded headers, the
//! dynamic table, flow control, concurrent streams).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

/// The server binary copied out of the crate, running on a loopback port with its status
/// directory and delay file in a temp dir. Killed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

/// Writes the embedded binary to `dir` as an executable.
fn install(dir: &Path) -> PathBuf {
    let path = dir.join("grpc-health-server");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(images::GRPC_HEALTH_BINARY).unwrap();
    f.set_permissions(std::fs::Permissions::from_mode(0o755)).unwrap();
    f.sync_all().unwrap();
    path
}

/// Spawns, retrying while another test thread's fork still holds a copy of our write handle
/// (ETXTBSY until that child execs).
fn spawn(cmd: &mut Command) -> Child {
    for _ in 0..100 {
        match cmd.spawn() {
            Ok(child) => return child,
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("start grpc-health-server: {e}"),
        }
    }
    panic!("grpc-health-server stayed busy (ETXTBSY)")
}

impl Server {
    fn start(flags: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let binary = install(dir.path());
        std::fs::create_dir(dir.path().join("health")).unwrap();
        let mut child = spawn(
            Command::new(&binary)
                .args(["--address", "127.0.0.1", "--port", "0", "--status-dir"])
                .arg(dir.path().join("health"))
                .arg("--delay-file")
                .arg(dir.path().join("delay-ms"))
                .args(flags)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        );
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("grpc-health-server: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        Server { child, addr, dir }
    }

    /// Writes a control file atomically (as a test inside a container should: write, rename).
    fn write(&self, name: &str, content: &str) {
        let tmp = self.dir.path().join(".tmp");
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, self.dir.path().join(name)).unwrap();
    }

    fn status_file(&self, service: &str) -> String {
        format!("health/{}", if service.is_empty() { "default" } else { service })
    }

    /// A new HTTP/2 connection.
    async fn channel(&self) -> Channel {
        Endpoint::from_shared(format!("http://{}", self.addr)).unwrap().connect().await.unwrap()
    }

    async fn client(&self) -> HealthClient<Channel> {
        HealthClient::new(self.channel().await)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn check(
    client: &mut HealthClient<Channel>,
    service: &str,
) -> Result<ServingStatus, tonic::Status> {
    let response = client.check(HealthCheckRequest { service: service.into() }).await?;
    Ok(response.into_inner().status())
}

#[tokio::test]
async fn check_answers_serving_for_the_server_declared_statuses_and_not_found_for_others() {
    let server = Server::start(&["--service", "declared=NOT_SERVING", "--service", "up=SERVING"]);
    let mut client = server.client().await;
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
    assert_eq!(check(&mut client, "declared").await.unwrap(), ServingStatus::NotServing);
    assert_eq!(check(&mut client, "up").await.unwrap(), ServingStatus::Serving);
    let unknown = check(&mut client, "nobody.Knows").await.unwrap_err();
    assert_eq!((unknown.code(), unknown.message()), (Code::NotFound, "unknown service"));
}

#[tokio::test]
async fn a_status_file_flips_a_service_and_back() {
    let server = Server::start(&["--service", "svc=SERVING"]);
    let mut client = server.client().await;
    server.write(&server.status_file(""), "NOT_SERVING\n");
    server.write(&server.status_file("svc"), "NOT_SERVING");
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::NotServing);
    assert_eq!(check(&mut client, "svc").await.unwrap(), ServingStatus::NotServing);
    server.write(&server.status_file(""), "SERVING");
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
    std::fs::remove_file(server.dir.path().join(server.status_file("svc"))).unwrap();
    assert_eq!(check(&mut client, "svc").await.unwrap(), ServingStatus::Serving);
    // A file makes a service known, with any status.
    server.write(&server.status_file("late"), "SERVICE_UNKNOWN");
    assert_eq!(check(&mut client, "late").await.unwrap(), ServingStatus::ServiceUnknown);
    // A file that holds no status is an error naming it, not a guess.
    server.write(&server.status_file(""), "MAYBE");
    let bad = check(&mut client, "").await.unwrap_err();
    assert_eq!(bad.code(), Code::Internal);
    assert!(bad.message().contains("default") && bad.message().contains("MAYBE"), "{bad:?}");
}

#[tokio::test]
async fn watch_and_unknown_methods_are_unimplemented() {
    let server = Server::start(&[]);
    let mut client = server.client().await;
    let watch = client.watch(HealthCheckRequest { service: String::new() }).await.unwrap_err();
    assert_eq!(watch.code(), Code::Unimplemented);

    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    for (path, message) in [
        ("/grpc.health.v1.Health/List", "unknown method List for service grpc.health.v1.Health"),
        ("/other.Service/Check", "unknown service other.Service"),
    ] {
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
        let request = tonic::Request::new(HealthCheckRequest { service: String::new() });
        let err = grpc.unary(request, PathAndQuery::from_static(path), codec).await.unwrap_err();
        assert_eq!((err.code(), err.message()), (Code::Unimplemented, message));
    }
    // The connection still answers after the errors.
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
}

/// Reads until the server closes the connection; returns what it sent.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        // Closed while our garbage was still unread on its side.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server did not close the connection: {e}"),
    }
    got
}

/// Splits what the server sent into (frame type, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut all = Vec::new();
    while bytes.len() >= 9 {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let payload = bytes.get(9..9 + len).expect("whole frames");
        all.push((bytes[3], payload.to_vec()));
        bytes = &bytes[9 + len..];
    }
    assert!(bytes.is_empty(), "a partial frame");
    all
}

#[tokio::test]
async fn garbage_closes_the_connection_and_the_server_keeps_serving() {
    let server = Server::start(&[]);
    // Not HTTP/2 at all: closed without a word.
    let mut http1 = TcpStream::connect(server.addr).unwrap();
    http1.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let got = read_to_close(&mut http1);
    // Only the server's SETTINGS (sent on accept) precede the close.
    let kinds: Vec<u8> = frames(&got).iter().map(|(kind, _)| *kind).collect();
    assert_eq!(kinds, [4], "{got:?}");

    // A valid preface followed by nonsense frames: GOAWAY, then closed.
    let mut h2 = TcpStream::connect(server.addr).unwrap();
    let mut input = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // empty SETTINGS
    input.extend_from_slice(&[0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 3]); // DATA on stream 0
    h2.write_all(&input).unwrap();
    let got = read_to_close(&mut h2);
    let goaway = frames(&got).into_iter().find(|(kind, _)| *kind == 7);
    let (_, payload) = goaway.unwrap_or_else(|| panic!("no GOAWAY frame in {got:?}"));
    assert_eq!(payload[4..8], [0, 0, 0, 1], "PROTOCOL_ERROR");

    // Random bytes after the preface.
    let mut x: u32 = 0x1234_5678;
    let mut noise = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        noise.push(x as u8);
    }
    let mut random = TcpStream::connect(server.addr).unwrap();
    let _ = random.write_all(&noise);
    read_to_close(&mut random);

    let mut client = server.client().await;
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
}

#[tokio::test]
async fn concurrent_clients_with_many_streams_each_get_their_own_answers() {
    let server = Server::start(&["--service", "down=NOT_SERVING", "--delay-ms", "50"]);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let client = server.client().await;
        for i in 0..40 {
            let mut client = client.clone();
            tasks.spawn(async move {
                let (service, want) = match i % 3 {
                    0 => ("", Ok(ServingStatus::Serving)),
                    1 => ("down", Ok(ServingStatus::NotServing)),
                    _ => ("missing", Err(Code::NotFound)),
                };
                let got = check(&mut client, service).await.map_err(|s| s.code());
                assert_eq!(got, want, "service {service:?}");
            });
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

#[tokio::test]
async fn answers_wait_for_the_delay_and_a_client_giving_up_leaves_the_connection_usable() {
    let server = Server::start(&["--delay-ms", "300"]);
    let mut client = server.client().await;
    let started = Instant::now();
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
    assert!(started.elapsed() >= Duration::from_millis(300), "answered before the delay");

    // The delay file overrides the flag: the client's deadline passes first and it resets the
    // stream (as a probe's timeout does).
    server.write("delay-ms", "60000");
    let mut request = tonic::Request::new(HealthCheckRequest { service: String::new() });
    request.set_timeout(Duration::from_millis(200));
    let gave_up = tokio::time::timeout(Duration::from_millis(500), client.check(request)).await;
    assert!(gave_up.is_err() || gave_up.is_ok_and(|r| r.is_err()), "no answer during the delay");

    server.write("delay-ms", "0");
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
}

#[tokio::test]
async fn an_oversized_request_is_resource_exhausted_and_the_connection_survives() {
    let server = Server::start(&[]);
    let mut client = server.client().await;
    let err = check(&mut client, &"x".repeat(40_000)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(check(&mut client, "").await.unwrap(), ServingStatus::Serving);
}

#[test]
fn bad_flags_exit_2_naming_the_flag_and_sigterm_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let binary = install(dir.path());
    let out = loop {
        match Command::new(&binary).args(["--service", "x=MAYBE"]).output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--service \"x=MAYBE\""), "{stderr}");

    let mut child = spawn(
        Command::new(&binary)
            .args(["--address", "127.0.0.1", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening on 127.0.0.1:"), "{line}");
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0), "SIGTERM ends the server cleanly");
}
