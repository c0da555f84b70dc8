//! Audit logging, as upstream's: every request is matched against the `--audit-policy-file`
//! ([`policy`]) once it is authenticated; at a level above `None` it is written to the
//! `--audit-log-path` ([`log`]) as `audit.k8s.io/v1` `Event` JSON lines, one per stage:
//! `RequestReceived`, `ResponseStarted` (long-running requests: watches, logs, exec, attach,
//! port-forward, when their headers go out) and `ResponseComplete`. `Metadata` carries who,
//! what, from where and the status; `Request` adds the object sent (the decoded body: JSON,
//! YAML or protobuf); `RequestResponse` the object answered. No body is logged below
//! `Request`, so a Secret's data is in the log only when the policy asks for it.
//!
//! The body a handler decodes reaches its request's [`Record`] through a task-local set for
//! the request ([`scope`]), so handlers stay unaware of auditing.

pub mod log;
pub mod policy;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame, SizeHint};
use serde_json::{Map, Value, json};

use crate::auth::User;
use crate::http::body::Body;
pub use log::{Log, LogError, Rotation};
pub use policy::{Attributes, Decision, Level, Policy, PolicyError, Stage, Target};

/// A body above this is not kept for a `RequestResponse` event (it is still served).
const MAX_LOGGED_RESPONSE: usize = 3 * 1024 * 1024;

/// The policy and the log.
#[derive(Debug)]
pub struct Auditor {
    policy: Policy,
    log: Mutex<Log>,
}

/// What the request line and headers say, taken before the request is served.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub uri: String,
    pub verb: String,
    pub user_agent: Option<String>,
    pub source_ips: Vec<String>,
    /// `objectRef` for resource requests.
    pub object: Option<ObjectRef>,
    pub long_running: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ObjectRef {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl Auditor {
    pub fn new(policy: Policy, log: Log) -> Self {
        Self { policy, log: Mutex::new(log) }
    }

    /// Starts a request's record (writing `RequestReceived`), or `None` at level `None`.
    /// `user` is who authenticated; `impersonated` who they act as.
    pub fn begin(
        self: &Arc<Self>,
        info: RequestInfo,
        user: Option<&User>,
        impersonated: Option<&User>,
    ) -> Option<Arc<Record>> {
        let path = info.uri.split('?').next().unwrap_or_default().to_string();
        let target = match &info.object {
            Some(o) => Target::Resource {
                group: &o.group,
                resource: &o.resource,
                subresource: &o.subresource,
                namespace: &o.namespace,
                name: &o.name,
            },
            None => Target::Path(&path),
        };
        let (name, groups) = user.map_or(("", &[][..]), |u| (u.name.as_str(), &u.groups[..]));
        let decision =
            self.policy.decide(&Attributes { user: name, groups, verb: &info.verb, target });
        if decision.level == Level::None {
            return None;
        }
        let record = Arc::new(Record {
            auditor: self.clone(),
            decision,
            id: crate::objects::new_uid(),
            received: jiff::Timestamp::now(),
            user: user.map(user_json).unwrap_or_else(|| json!({})),
            impersonated: impersonated.map(user_json),
            info,
            request_object: Mutex::new(None),
            request_name: Mutex::new(None),
        });
        record.emit(Stage::RequestReceived, None, None);
        Some(record)
    }

    fn write(&self, event: &Value) {
        let mut line = serde_json::to_vec(event).unwrap_or_default();
        line.push(b'\n');
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = log.write_line(&line) {
            tracing::error!(error = %e, "writing the audit log");
        }
    }
}

fn user_json(u: &User) -> Value {
    let mut out = json!({"username": u.name});
    if !u.uid.is_empty() {
        out["uid"] = json!(u.uid);
    }
    if !u.groups.is_empty() {
        out["groups"] = json!(u.groups);
    }
    if !u.extra.is_empty() {
        out["extra"] = json!(u.extra);
    }
    out
}

/// Upstream's `MicroTime`.
fn micro_time(t: jiff::Timestamp) -> String {
    format!("{}.{:06}Z", t.strftime("%Y-%m-%dT%H:%M:%S"), t.subsec_microsecond())
}

/// One audited request.
#[derive(Debug)]
pub struct Record {
    auditor: Arc<Auditor>,
    decision: Decision,
    id: String,
    received: jiff::Timestamp,
    user: Value,
    impersonated: Option<Value>,
    info: RequestInfo,
    request_object: Mutex<Option<Value>>,
    /// The name in the object sent (a create's `objectRef.name`), at every level.
    request_name: Mutex<Option<String>>,
}

impl Record {
    fn emit(&self, stage: Stage, status: Option<Value>, response: Option<Value>) {
        if !self.decision.logs(stage) {
            return;
        }
        let info = &self.info;
        let mut e = Map::new();
        e.insert("kind".into(), json!("Event"));
        e.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
        e.insert("level".into(), json!(self.decision.level.as_str()));
        e.insert("auditID".into(), json!(self.id));
        e.insert("stage".into(), json!(stage.as_str()));
        e.insert("requestURI".into(), json!(info.uri));
        e.insert("verb".into(), json!(info.verb));
        e.insert("user".into(), self.user.clone());
        if let Some(i) = &self.impersonated {
            e.insert("impersonatedUser".into(), i.clone());
        }
        e.insert("sourceIPs".into(), json!(info.source_ips));
        if let Some(ua) = &info.user_agent {
            e.insert("userAgent".into(), json!(ua));
        }
        if let Some(o) = &info.object {
            let mut r = Map::new();
            let mut put = |k: &str, v: &str| {
                if !v.is_empty() {
                    r.insert(k.into(), json!(v));
                }
            };
            put("resource", &o.resource);
            put("namespace", &o.namespace);
            let sent = self.request_name.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            put("name", if o.name.is_empty() { sent.as_deref().unwrap_or("") } else { &o.name });
            drop(sent);
            put("apiGroup", &o.group);
            put("apiVersion", &o.version);
            put("subresource", &o.subresource);
            e.insert("objectRef".into(), Value::Object(r));
        }
        if let Some(s) = status {
            e.insert("responseStatus".into(), s);
        }
        if self.decision.level >= Level::Request
            && let Some(body) = self.lock_request().clone()
        {
            e.insert("requestObject".into(), self.trim(body));
        }
        if let Some(body) = response {
            e.insert("responseObject".into(), self.trim(body));
        }
        e.insert("requestReceivedTimestamp".into(), json!(micro_time(self.received)));
        e.insert("stageTimestamp".into(), json!(micro_time(jiff::Timestamp::now())));
        self.auditor.write(&Value::Object(e));
    }

    fn lock_request(&self) -> std::sync::MutexGuard<'_, Option<Value>> {
        self.request_object.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn trim(&self, mut body: Value) -> Value {
        if self.decision.omit_managed_fields
            && let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("managedFields");
        }
        body
    }

    /// Ends the record with the response: `ResponseComplete` now, or for a long-running
    /// request `ResponseStarted` now and `ResponseComplete` when the body ends.
    pub async fn finish(self: Arc<Self>, resp: hyper::Response<Body>) -> hyper::Response<Body> {
        let code = resp.status().as_u16();
        let exact = resp.body().size_hint().exact().and_then(|n| usize::try_from(n).ok());
        let keep = exact.is_some_and(|n| n <= MAX_LOGGED_RESPONSE)
            && !self.info.long_running
            && (code >= 400 || self.decision.level == Level::RequestResponse);
        if !keep {
            let status = json!({"metadata": {}, "code": code});
            if self.info.long_running {
                self.emit(Stage::ResponseStarted, Some(status.clone()), None);
                let (parts, body) = resp.into_parts();
                let body = Audited { inner: body, end: Some((self, status)) };
                return hyper::Response::from_parts(parts, body.boxed());
            }
            self.emit(Stage::ResponseComplete, Some(status), None);
            return resp;
        }
        let (parts, body) = resp.into_parts();
        let bytes = match body.collect().await {
            Ok(c) => c.to_bytes(),
            Err(never) => match never {},
        };
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        let mut status = json!({"metadata": {}, "code": code});
        if code >= 400
            && let Some(s) = parsed.as_ref().filter(|v| v["kind"] == "Status")
        {
            for k in ["status", "message", "reason", "details"] {
                if !s[k].is_null() {
                    status[k] = s[k].clone();
                }
            }
        }
        let response = parsed.filter(|_| self.decision.level == Level::RequestResponse);
        self.emit(Stage::ResponseComplete, Some(status), response);
        hyper::Response::from_parts(parts, crate::http::body::full(bytes))
    }

    fn capture(&self, body: &Value) {
        if let Some(name) = body["metadata"]["name"].as_str() {
            *self.request_name.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(name.to_string());
        }
        if self.decision.level >= Level::Request {
            *self.lock_request() = Some(body.clone());
        }
    }
}

tokio::task_local! {
    static CURRENT: Arc<Record>;
}

/// Runs `fut` (the request's handling) with `record` receiving the bodies it decodes.
pub async fn scope<F: std::future::Future>(record: Option<Arc<Record>>, fut: F) -> F::Output {
    match record {
        Some(r) => CURRENT.scope(r, fut).await,
        None => fut.await,
    }
}

/// The request body as decoded, for the request being audited (if any): its name at every
/// level, the body itself from `Request` up.
pub fn request_object(body: &Value) {
    let _ = CURRENT.try_with(|r| r.capture(body));
}

/// A raw request body (a patch), kept as JSON, or YAML read as JSON.
pub fn request_bytes(raw: &[u8]) {
    let _ = CURRENT.try_with(|r| {
        if r.decision.level >= Level::Request {
            let parsed = serde_json::from_slice(raw).ok().or_else(|| {
                std::str::from_utf8(raw).ok().and_then(|t| serde_yaml_ng::from_str(t).ok())
            });
            if let Some(v) = parsed.filter(|v: &Value| v.is_object() || v.is_array()) {
                r.capture(&v);
            }
        }
    });
}

/// A long-running response's body: `ResponseComplete` once it ends or is dropped.
struct Audited {
    inner: Body,
    end: Option<(Arc<Record>, Value)>,
}

impl hyper::body::Body for Audited {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled
            && let Some((record, status)) = self.end.take()
        {
            record.emit(Stage::ResponseComplete, Some(status), None);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Audited {
    fn drop(&mut self) {
        if let Some((record, status)) = self.end.take() {
            record.emit(Stage::ResponseComplete, Some(status), None);
        }
    }
}

#[cfg(test)]
mod tests;
