//! The stats routes, as upstream's `server/stats` handler and the resource metrics endpoint,
//! on the secure port (`nodes/stats` and `nodes/metrics`) and the read-only port:
//!
//! - `GET|POST /stats/summary[?only_cpu_and_memory=true]`: the summary API as JSON; a summary
//!   that cannot be made is a 500 saying why (`Internal Error: ...`).
//! - `GET /metrics/resource`: [`resource_metrics`] in the Prometheus text format
//!   ([`crate::metrics::text`]);
//!   always 200, a failed summary answered with `resource_scrape_error 1`.

pub mod resource_metrics;

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::request::text_error;
use crate::stats::layers::Want;
use crate::stats::{Detail, StatsProvider};

pub use crate::metrics::text::TEXT_FORMAT;

/// Whether the query asks for CPU and memory only: exactly one `only_cpu_and_memory`, `true`.
fn only_cpu_and_memory(query: &[(String, String)]) -> bool {
    let mut values = query.iter().filter(|(k, _)| k == "only_cpu_and_memory");
    matches!((values.next(), values.next()), (Some((_, v)), None) if v == "true")
}

async fn summary(
    State(stats): State<Arc<StatsProvider>>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let detail =
        if only_cpu_and_memory(&query) { Detail::CpuAndMemory } else { Detail::Full(Want::Recent) };
    match stats.summary(detail).await {
        Ok(s) => Json(s).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "/stats/summary");
            text_error(StatusCode::INTERNAL_SERVER_ERROR, format!("Internal Error: {e}"))
        }
    }
}

async fn resource_metrics(State(stats): State<Arc<StatsProvider>>) -> Response {
    let summary = stats.summary(Detail::CpuAndMemory).await;
    if let Err(e) = &summary {
        tracing::error!(error = %e, "getting the summary for /metrics/resource");
    }
    let body = resource_metrics::render(summary.as_ref().ok());
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], body).into_response()
}

/// The stats routes over `stats`.
pub fn router(stats: Arc<StatsProvider>) -> axum::Router {
    axum::Router::new()
        .route("/stats/summary", get(summary).post(summary))
        .route("/metrics/resource", get(resource_metrics))
        .with_state(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_status::machine::ReadingSource;
    use fake_cri::{FakeCriServer, Rpc};
    use tower::ServiceExt;

    async fn get(router: &axum::Router, uri: &str) -> (StatusCode, String, String) {
        let req = axum::http::Request::get(uri).body(axum::body::Body::empty()).unwrap();
        let r = router.clone().oneshot(req).await.unwrap();
        let kind = r.headers().get(header::CONTENT_TYPE).unwrap().to_str().unwrap().to_string();
        let status = r.status();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, kind, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_runtime_error_is_a_500_for_the_summary_and_a_whole_200_scrape_for_the_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeCriServer::start(&dir.path().join("cri.sock")).unwrap();
        let cri = proto::CriClient::connect(fake.endpoint(), Default::default()).await.unwrap();
        let root = dir.path().to_path_buf();
        let readings =
            ReadingSource { root: root.clone(), kubelet_dir: root.clone(), image_fs_dir: None };
        let stats = Arc::new(StatsProvider::new(cri, "node-a".into(), readings, root));
        let router = router(stats);

        let (code, kind, body) = get(&router, "/stats/summary?only_cpu_and_memory=true").await;
        assert_eq!((code, kind.as_str()), (StatusCode::OK, "application/json"));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v["node"]["nodeName"].as_str(), v["pods"].as_array().map(Vec::len)),
            (Some("node-a"), Some(0))
        );
        let (code, kind, body) = get(&router, "/metrics/resource").await;
        assert_eq!((code, kind.as_str()), (StatusCode::OK, TEXT_FORMAT));
        assert!(body.ends_with("resource_scrape_error 0\n"), "{body}");

        fake.runtime().fail_next(Rpc::ListPodSandbox, tonic::Status::unavailable("restarting"));
        let (code, _, body) = get(&router, "/stats/summary").await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.starts_with("Internal Error: failed to list pod stats: "), "{body}");
        assert!(body.contains("restarting"), "{body}");

        fake.runtime().fail_next(Rpc::ListPodSandboxStats, tonic::Status::internal("cgroup gone"));
        fake.runtime().fail_next(Rpc::ListContainerStats, tonic::Status::internal("cgroup gone"));
        let (code, kind, body) = get(&router, "/metrics/resource").await;
        assert_eq!((code, kind.as_str()), (StatusCode::OK, TEXT_FORMAT));
        assert_eq!(body, resource_metrics::render(None), "the error gauge alone, at 1");
    }

    #[test]
    fn only_one_true_only_cpu_and_memory_narrows_the_summary() {
        let q = |pairs: &[(&str, &str)]| {
            let v: Vec<(String, String)> =
                pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            only_cpu_and_memory(&v)
        };
        assert!(q(&[("only_cpu_and_memory", "true")]));
        assert!(!q(&[]));
        assert!(!q(&[("only_cpu_and_memory", "1")]));
        assert!(!q(&[("only_cpu_and_memory", "true"), ("only_cpu_and_memory", "true")]));
        assert!(q(&[("x", "y"), ("only_cpu_and_memory", "true")]));
    }
}
