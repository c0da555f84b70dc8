//! `tcpSocket` probes: a connection that opens within the timeout is healthy.

use std::time::Duration;

use super::Outcome;

/// Opens a TCP connection to `host:port` and closes it at once.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> Outcome {
    let target = join_host_port(host, port);
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_stream)) => Outcome::Success(String::new()),
        Ok(Err(e)) => Outcome::Failure(format!("dial tcp {target}: connect: {e}")),
        Err(_) => Outcome::Failure(format!("dial tcp {target}: i/o timeout")),
    }
}

/// `host:port`, with brackets around an IPv6 address, as Go's `net.JoinHostPort`.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_open_port_is_healthy_and_a_closed_one_is_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(probe("127.0.0.1", port, Duration::from_secs(1)).await.is_success());
        drop(listener);
        let closed = probe("127.0.0.1", port, Duration::from_secs(1)).await;
        assert!(
            matches!(&closed, Outcome::Failure(m) if m.starts_with(&format!("dial tcp 127.0.0.1:{port}: connect:"))),
            "{closed:?}"
        );
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(join_host_port("::1", 80), "[::1]:80");
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
    }
}
