//! The kubelet's read-only HTTP API: `GET /pods` (a `PodList`, as upstream's read-only port
//! serves), `GET /healthz`, `/stats/summary` and `/metrics/resource` ([`stats`](super::stats)),
//! `/metrics` and `/metrics/probes` ([`metrics`](super::metrics)),
//! and two additions of ours: `GET /manifests` (each file in the static
//! pod directory, the manifest URL, then each file in the static config directory: accepted,
//! rejected, ignored, duplicate or being written, with the reason) and `GET /events` (the local event list). The
//! secure port serves the same routes to authorized callers (`kubectl-lite --kubelet`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;

use crate::config::file::ManifestReport;
use crate::events::Recorder;
use crate::metrics::KubeletMetrics;
use crate::pleg::PlegHealth;
use crate::stats::StatsProvider;
use crate::status::StatusManager;
use crate::watchdog::SyncLoopHealth;

#[derive(Debug, Clone)]
pub struct ServerState {
    pub statuses: Arc<StatusManager>,
    pub manifests: watch::Receiver<Vec<ManifestReport>>,
    /// The manifest URL's state (the URL as the file).
    pub manifest_url: watch::Receiver<Vec<ManifestReport>>,
    /// The static config directory's files, reported as the manifests are.
    pub static_config: watch::Receiver<Vec<ManifestReport>>,
    pub recorder: Recorder,
    pub pleg: Arc<PlegHealth>,
    /// Whether the sync loop goes round (upstream's `syncloop` check).
    pub sync_loop: Arc<SyncLoopHealth>,
    /// What `/stats/summary` and `/metrics/resource` report.
    pub stats: Arc<StatsProvider>,
    /// What `/metrics` and `/metrics/probes` report; the servers' request counts.
    pub metrics: Arc<KubeletMetrics>,
}

pub(super) async fn pods(State(s): State<ServerState>) -> Response {
    let mut items = s.statuses.pods();
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let list = serde_json::json!({ "kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items });
    Json(list).into_response()
}

pub(super) async fn healthz(State(s): State<ServerState>) -> Response {
    let failed: String = [("syncloop", s.sync_loop.check()), ("pleg", s.pleg.check())]
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|reason| format!("[-]{name} failed: {reason}\n")))
        .collect();
    if failed.is_empty() {
        return "ok".into_response();
    }
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{failed}healthz check failed\n")).into_response()
}

pub(super) async fn manifests(State(s): State<ServerState>) -> Response {
    let mut files = s.manifests.borrow().clone();
    files.extend(s.manifest_url.borrow().iter().cloned());
    files.extend(s.static_config.borrow().iter().cloned());
    Json(files).into_response()
}

pub(super) async fn events(State(s): State<ServerState>) -> Response {
    Json(s.recorder.list()).into_response()
}

/// The read-only API's routes.
pub fn read_only_router(state: ServerState) -> axum::Router {
    let stats = super::stats::router(state.stats.clone());
    let metrics = super::metrics::router(state.metrics.clone());
    let counted = state.metrics.clone();
    axum::Router::new()
        .route("/pods", get(pods))
        .route("/pods/", get(pods))
        .route("/healthz", get(healthz))
        .route("/manifests", get(manifests))
        .route("/events", get(events))
        .with_state(state)
        .merge(stats)
        .merge(metrics)
        .layer(axum::middleware::from_fn_with_state(counted, super::metrics::count_read_only))
}

/// The healthz-only router (upstream's `healthzPort`).
pub fn healthz_router(state: ServerState) -> axum::Router {
    axum::Router::new().route("/healthz", get(healthz)).with_state(state)
}
