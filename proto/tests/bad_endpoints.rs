//! A bad runtime endpoint gives a clear error naming it, within the connect deadline.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use proto::{ClientOptions, ConnectError, CriClient, UnixEndpoint};
use tokio::io::AsyncWriteExt;

const DEADLINE: Duration = Duration::from_millis(500);

fn options() -> ClientOptions {
    ClientOptions { connect_timeout: DEADLINE, ..ClientOptions::default() }
}

/// Connects and checks that the error names the endpoint and came within the deadline.
async fn connect_err(endpoint: &UnixEndpoint) -> ConnectError {
    let started = Instant::now();
    let err = CriClient::connect(endpoint, options()).await.expect_err("connect must fail");
    let took = started.elapsed();
    assert!(took < DEADLINE + Duration::from_millis(500), "took {took:?} for {err}");
    assert!(err.to_string().contains(&endpoint.to_string()), "error must name the endpoint: {err}");
    err
}

#[tokio::test]
async fn missing_socket_is_named_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = UnixEndpoint::new(dir.path().join("nothing.sock"));
    let err = connect_err(&endpoint).await;
    assert!(matches!(err, ConnectError::SocketMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("no socket at"), "{err}");
}

#[tokio::test]
async fn a_regular_file_is_not_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file.sock");
    std::fs::write(&path, "not a socket").unwrap();
    let err = connect_err(&UnixEndpoint::new(path)).await;
    assert!(matches!(err, ConnectError::NotASocket { .. }), "{err:?}");
}

#[tokio::test]
async fn a_stale_socket_refuses_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap()); // the file stays, nobody listens
    let err = connect_err(&UnixEndpoint::new(path)).await;
    assert!(matches!(err, ConnectError::Refused { .. }), "{err:?}");
}

#[tokio::test]
async fn a_hung_server_times_out_at_the_version_check() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hung.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    // Accepts connections and never says a word.
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = listener.accept().await {
            conns.push(c);
        }
    });
    let err = connect_err(&UnixEndpoint::new(path)).await;
    assert!(matches!(err, ConnectError::Timeout { stage: "Version", .. }), "{err:?}");
    held.abort();
}

#[tokio::test]
async fn a_server_that_is_not_grpc_is_not_cri() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("http.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n").await;
        }
    });
    let err = connect_err(&UnixEndpoint::new(path)).await;
    assert!(matches!(err, ConnectError::NotCri { .. }), "{err:?}");
    assert!(err.to_string().contains("is not a CRI v1 runtime"), "{err}");
    server.abort();
}

#[test]
fn endpoint_strings_name_the_problem() {
    let err = "tcp://127.0.0.1:10010".parse::<UnixEndpoint>().unwrap_err();
    assert!(err.to_string().contains("tcp://127.0.0.1:10010"), "{err}");
    assert!(err.to_string().contains("unix:///path"), "{err}");
}
