//! `grpc` probes: `grpc.health.v1.Health/Check` over plaintext HTTP/2 to the pod, as upstream's
//! `probe/grpc` (same messages); `SERVING` is healthy.

use std::time::Duration;

use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use super::Outcome;
use super::http::USER_AGENT;
use super::tcp::join_host_port;

/// Asks `host:port` whether `service` (`""`: the whole server) is serving.
pub async fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> Outcome {
    let addr = join_host_port(host, port);
    let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{addr}")) {
        Ok(e) => e.connect_timeout(timeout).timeout(timeout),
        Err(e) => return Outcome::Failure(format!("error: invalid address {addr:?}: {e}")),
    };
    let endpoint = match endpoint.user_agent(USER_AGENT) {
        Ok(e) => e,
        Err(e) => return Outcome::Unknown(e.to_string()),
    };
    let connect = tokio::time::timeout(timeout, endpoint.connect()).await;
    let channel = match connect {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service {addr:?} within {}: {e}",
                go_duration(timeout)
            ));
        }
        Err(_) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service {addr:?} within {}: context deadline exceeded",
                go_duration(timeout)
            ));
        }
    };
    let request = HealthCheckRequest { service: service.to_string() };
    let answer = tokio::time::timeout(timeout, HealthClient::new(channel).check(request)).await;
    match answer {
        Err(_) => Outcome::Failure(format!(
            "timeout: health rpc did not complete within {}",
            go_duration(timeout)
        )),
        Ok(Err(status)) => match status.code() {
            tonic::Code::Unimplemented => Outcome::Failure(format!(
                "this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
                status.message()
            )),
            tonic::Code::DeadlineExceeded => Outcome::Failure(format!(
                "timeout: health rpc did not complete within {}",
                go_duration(timeout)
            )),
            _ => Outcome::Failure(format!("error: health rpc probe failed: {status}")),
        },
        Ok(Ok(response)) => {
            let status = response.into_inner().status;
            if status == ServingStatus::Serving as i32 {
                Outcome::Success("service healthy".into())
            } else {
                let name = ServingStatus::try_from(status)
                    .map_or_else(|_| status.to_string(), |s| s.as_str_name().to_string());
                Outcome::Failure(format!("service unhealthy (responded with {name:?})"))
            }
        }
    }
}

/// A duration as Go prints whole seconds (`1s`), which upstream's messages show.
fn go_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 { format!("{}s", d.as_secs()) } else { format!("{d:?}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_health::server::health_reporter;

    #[tokio::test]
    async fn serving_not_serving_and_unknown_services_are_told_apart() {
        let (reporter, service) = health_reporter();
        reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
        reporter.set_service_status("db", tonic_health::ServingStatus::NotServing).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let server = tokio::spawn(
            tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming),
        );
        let t = Duration::from_secs(2);
        assert_eq!(
            probe("127.0.0.1", port, "", t).await,
            Outcome::Success("service healthy".into())
        );
        assert_eq!(
            probe("127.0.0.1", port, "db", t).await,
            Outcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
        );
        let unknown = probe("127.0.0.1", port, "nope", t).await;
        assert!(
            matches!(&unknown, Outcome::Failure(m) if m.starts_with("error: health rpc probe failed")),
            "{unknown:?}"
        );
        server.abort();
        let gone = probe("127.0.0.1", port, "", Duration::from_millis(500)).await;
        assert!(
            matches!(&gone, Outcome::Failure(m) if m.starts_with("timeout: failed to connect service")),
            "{gone:?}"
        );
    }
}
