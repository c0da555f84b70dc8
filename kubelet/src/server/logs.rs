//! `GET /containerLogs/{namespace}/{pod}/{container}`: a container's log as `text/plain`, as
//! upstream's `getContainerLogs`. The query is upstream's `PodLogOptions`: `follow`,
//! `previous`, `timestamps`, `tailLines`, `sinceSeconds`/`sinceTime`, `limitBytes`.
//!
//! The log is found from the kubelet's own state: the pod and its container status from the
//! status manager (the current container's id, or the last terminated one's for `previous`),
//! then the runtime's `ContainerStatus.log_path`; a container the runtime has already removed is
//! found at its path under the pod's log directory (`<restartCount>.log`). The file is streamed
//! by [`runtime::logs`](crate::runtime::logs) from a task on the server's tracker, so a follower
//! ends with its client, with the container, or with the kubelet.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use proto::cri;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::request::{RequestError, container_status, find_pod, runtime_id};
use super::secure::SecureState;
use crate::runtime::logs::{self, LogOptions, ReadRequest};

/// The parsed query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    pub follow: bool,
    pub previous: bool,
    pub tail_lines: Option<u64>,
    pub opts: LogOptions,
}

fn parse_bool(param: &'static str, v: &str) -> Result<bool, RequestError> {
    match v {
        "" | "true" | "True" | "1" => Ok(true),
        "false" | "False" | "0" => Ok(false),
        _ => Err(RequestError::BadParam { param, reason: format!("{v:?} is not a boolean") }),
    }
}

fn parse_positive(param: &'static str, v: &str, zero_ok: bool) -> Result<u64, RequestError> {
    let bad = |reason: String| RequestError::BadParam { param, reason };
    let n: i64 = v.parse().map_err(|_| bad(format!("{v:?} is not an integer")))?;
    match (n, zero_ok) {
        (n, true) if n >= 0 => Ok(n.unsigned_abs()),
        (n, false) if n > 0 => Ok(n.unsigned_abs()),
        (_, true) => Err(bad("must be greater than or equal to 0".into())),
        (_, false) => Err(bad("must be greater than 0".into())),
    }
}

impl LogQuery {
    /// Parses the query as of `now_nanos` (for `sinceSeconds`).
    pub fn parse(pairs: &[(String, String)], now_nanos: i128) -> Result<Self, RequestError> {
        let mut q = LogQuery::default();
        let mut since_seconds = None;
        let mut since_time = None;
        for (k, v) in pairs {
            match k.as_str() {
                "follow" => q.follow = parse_bool("follow", v)?,
                "previous" => q.previous = parse_bool("previous", v)?,
                "timestamps" => q.opts.timestamps = parse_bool("timestamps", v)?,
                "tailLines" => q.tail_lines = Some(parse_positive("tailLines", v, true)?),
                "limitBytes" => q.opts.limit_bytes = Some(parse_positive("limitBytes", v, false)?),
                "sinceSeconds" => since_seconds = Some(parse_positive("sinceSeconds", v, false)?),
                "sinceTime" => {
                    let t: jiff::Timestamp = v.parse().map_err(|_| RequestError::BadParam {
                        param: "sinceTime",
                        reason: format!("{v:?} is not an RFC 3339 time"),
                    })?;
                    since_time = Some(t.as_nanosecond());
                }
                _ => {}
            }
        }
        q.opts.since_nanos = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(RequestError::BadRequest(
                    "at most one of sinceTime or sinceSeconds may be specified".into(),
                ));
            }
            (Some(s), None) => Some(now_nanos - i128::from(s) * 1_000_000_000),
            (None, t) => t,
        };
        Ok(q)
    }
}

/// The handler.
pub async fn container_logs(
    State(state): State<SecureState>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    match serve(state, namespace, pod, container, &pairs).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(error = %e, "containerLogs refused");
            e.into_response()
        }
    }
}

async fn serve(
    state: SecureState,
    namespace: String,
    name: String,
    container: String,
    pairs: &[(String, String)],
) -> Result<Response, RequestError> {
    let now = jiff::Timestamp::now().as_nanosecond();
    let q = LogQuery::parse(pairs, now)?;
    let pod = find_pod(&state, &namespace, &name)?;
    let status = container_status(&pod, &container)?;
    let restart_count = status.map_or(0, |s| u32::try_from(s.restart_count).unwrap_or(0));
    let (id, fallback_count) = if q.previous {
        let id = status
            .and_then(|s| s.last_state.as_ref()?.terminated.as_ref()?.container_id.clone())
            .ok_or_else(|| RequestError::NoPrevious {
                pod: name.clone(),
                container: container.clone(),
            })?;
        (id, restart_count.checked_sub(1))
    } else {
        let id = status.and_then(|s| s.container_id.clone()).ok_or_else(|| {
            let reason = status
                .and_then(|s| s.state.as_ref()?.waiting.as_ref()?.reason.clone())
                .unwrap_or_else(|| "ContainerCreating".into());
            RequestError::Waiting { pod: name.clone(), container: container.clone(), reason }
        })?;
        (id, Some(restart_count))
    };
    let id = runtime_id(&id).to_string();
    let cri = state.runtime.cri.clone();
    let path = match cri
        .container_status(cri::ContainerStatusRequest { container_id: id.clone(), verbose: false })
        .await
    {
        Ok(r) => r.status.map(|s| s.log_path).filter(|p| !p.is_empty()),
        Err(e) if e.is_not_found() => None,
        Err(source) => {
            return Err(RequestError::Runtime {
                namespace,
                pod: name,
                container,
                source: Box::new(source),
            });
        }
    };
    let path = match (path, fallback_count) {
        (Some(p), _) => std::path::PathBuf::from(p),
        (None, Some(n)) => logs::container_log_path(
            &crate::runtime::sandbox::pod_log_dir(&state.runtime.config.pod_logs_dir, &pod),
            &container,
            n,
        ),
        (None, None) => return Err(RequestError::NoPrevious { pod: name, container }),
    };
    let file = tokio::fs::File::open(&path).await.map_err(|source| RequestError::Logs {
        namespace: namespace.clone(),
        pod: name.clone(),
        container: container.clone(),
        source: logs::LogsError::Io { path: path.clone(), source },
    })?;

    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let req =
        ReadRequest { path, opts: q.opts, tail: q.tail_lines, follow: q.follow && !q.previous };
    let stop = state.stop.child_token();
    state.streams.spawn(async move {
        let running = || {
            let (cri, id) = (cri.clone(), id.clone());
            async move {
                let req = cri::ContainerStatusRequest { container_id: id, verbose: false };
                match cri.container_status(req).await {
                    Ok(r) => r.status.is_some_and(|s| s.state == cri::ContainerState::ContainerRunning as i32),
                    Err(e) => !e.is_not_found(),
                }
            }
        };
        if let Err(e) = logs::read_logs(file, req, tx, running, stop).await {
            tracing::warn!(pod = %format!("{namespace}/{name}"), %container, error = %e, "streaming container log");
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, std::convert::Infallible>));
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<LogQuery, RequestError> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect();
        LogQuery::parse(&pairs, 100_000_000_000)
    }

    #[test]
    fn parses_upstreams_log_options() {
        let got = q(&[
            ("container", "c"),
            ("follow", "true"),
            ("tailLines", "2"),
            ("timestamps", "1"),
            ("limitBytes", "10"),
            ("sinceSeconds", "30"),
        ])
        .unwrap();
        assert!(got.follow && !got.previous && got.opts.timestamps);
        assert_eq!((got.tail_lines, got.opts.limit_bytes), (Some(2), Some(10)));
        assert_eq!(got.opts.since_nanos, Some(70_000_000_000));
        let t = q(&[("sinceTime", "1970-01-01T00:01:00Z"), ("previous", "false")]).unwrap();
        assert_eq!(t.opts.since_nanos, Some(60_000_000_000));
        assert_eq!(q(&[]).unwrap(), LogQuery::default());
        assert_eq!(q(&[("tailLines", "0")]).unwrap().tail_lines, Some(0));
    }

    #[test]
    fn bad_options_name_the_parameter() {
        for (pairs, want) in [
            (vec![("tailLines", "-1")], "invalid tailLines: must be greater than or equal to 0"),
            (vec![("limitBytes", "0")], "invalid limitBytes: must be greater than 0"),
            (vec![("follow", "maybe")], "invalid follow: \"maybe\" is not a boolean"),
            (
                vec![("sinceTime", "yesterday")],
                "invalid sinceTime: \"yesterday\" is not an RFC 3339 time",
            ),
            (
                vec![("sinceSeconds", "5"), ("sinceTime", "1970-01-01T00:00:00Z")],
                "at most one of sinceTime or sinceSeconds may be specified",
            ),
        ] {
            let err = q(&pairs).unwrap_err();
            assert_eq!(err.status(), StatusCode::BAD_REQUEST);
            assert_eq!(err.to_string(), want);
        }
    }
}
