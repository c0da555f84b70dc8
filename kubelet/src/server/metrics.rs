//! `/metrics` and `/metrics/probes` (the kubelet's [`KubeletMetrics`] in the Prometheus text
//! format), on the secure port (`nodes/metrics`) and the read-only port, as upstream serves
//! them; and the request counting both servers do ([`crate::metrics::http`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::KubeletMetrics;
use crate::metrics::http::ServerType;
use crate::metrics::text::TEXT_FORMAT;

async fn metrics(State(m): State<Arc<KubeletMetrics>>) -> Response {
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], m.render()).into_response()
}

async fn probes(State(m): State<Arc<KubeletMetrics>>) -> Response {
    ([(header::CONTENT_TYPE, TEXT_FORMAT)], m.render_probes()).into_response()
}

/// The metrics routes over `metrics`.
pub fn router(metrics: Arc<KubeletMetrics>) -> axum::Router {
    axum::Router::new()
        .route("/metrics", get(self::metrics))
        .route("/metrics/probes", get(probes))
        .with_state(metrics)
}

/// Counts the read-only server's requests (the secure server counts its own before
/// authentication, as upstream's handler does).
pub async fn count_read_only(
    State(m): State<Arc<KubeletMetrics>>,
    req: Request,
    next: Next,
) -> Response {
    let _in_flight = m.http.track(req.method().as_str(), req.uri().path(), ServerType::ReadOnly);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    #[tokio::test]
    async fn both_routes_answer_in_the_text_format_and_requests_are_counted() {
        let m = Arc::new(KubeletMetrics::new("node-a"));
        let app = router(m.clone())
            .layer(axum::middleware::from_fn_with_state(m.clone(), count_read_only));
        for uri in ["/metrics", "/metrics/probes", "/metrics"] {
            let req = axum::http::Request::get(uri).body(axum::body::Body::empty()).unwrap();
            let r = app.clone().oneshot(req).await.unwrap();
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()[header::CONTENT_TYPE], TEXT_FORMAT);
        }
        let req = axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap();
        let r = app.oneshot(req).await.unwrap();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(text.contains("kubelet_http_requests_total{long_running=\"false\",method=\"GET\",path=\"metrics\",server_type=\"readonly\"} 3\n"), "{text}");
        assert!(text.contains("kubelet_http_requests_total{long_running=\"false\",method=\"GET\",path=\"metrics/probes\",server_type=\"readonly\"} 1\n"), "{text}");
        assert!(text.contains("kubelet_http_inflight_requests{long_running=\"false\",method=\"GET\",path=\"metrics\",server_type=\"readonly\"} 1\n"), "this scrape is in flight:\n{text}");
    }
}
