//! delete and deletecollection.

use hyper::Response;
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::super::body::{self, Body};
use super::{Call, list_options, success, with_warnings};
use crate::errors::ApiError;
use crate::registry::{DeleteOptions, DeleteQuery};
use crate::request::Query;

pub(in crate::http) async fn delete(
    c: &Call<'_>,
    n: &str,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (r, ns) = (c.r, c.ns);
    c.restriction.admit_delete(r, ns, n)?;
    let opts = delete_options(incoming, c.content_type, c.q).await?;
    let deleted = c.state.registry.delete(r, ns, n, &opts, c.write.dry_run).await?;
    // Upstream answers 202 only to an explicit `orphanDependents: false` still pending.
    let code = if !deleted.removed && opts.orphan_dependents == Some(false) { 202 } else { 200 };
    let resp = if r.strategy.returns_deleted_object || !deleted.removed {
        body::json(code, &deleted.object)
    } else {
        body::json(code, &success(r, n, &deleted.object["metadata"]["uid"]))
    };
    Ok(with_warnings(resp, &deleted.warnings))
}

/// Deletes what a list with the same query would return, one object at a time.
pub(in crate::http) async fn delete_collection(
    c: &Call<'_>,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (r, ns, registry) = (c.r, c.ns, &c.state.registry);
    let opts = delete_options(incoming, c.content_type, c.q).await?;
    let page = registry.list(r, ns, &list_options(r, c.q)?)?;
    let mut warnings = Vec::new();
    let mut items = Vec::new();
    for raw in page.items {
        let obj: Value = serde_json::from_slice(&raw).unwrap_or_default();
        let n = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let ons = obj["metadata"]["namespace"].as_str().map(str::to_string);
        match registry.delete(r, ons.as_deref().or(ns), &n, &opts, c.write.dry_run).await {
            Ok(d) => {
                for w in d.warnings {
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
                items.push(d.object);
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({"kind": r.list_kind(), "apiVersion": r.group_version(), "metadata": {}, "items": items});
    Ok(with_warnings(body::json(200, &list), &warnings))
}

/// A delete's options: the `DeleteOptions` body (JSON or YAML; none is allowed) and the query's
/// `gracePeriodSeconds`, `propagationPolicy` and `orphanDependents`.
async fn delete_options(
    incoming: Incoming,
    content_type: Option<&str>,
    q: &Query,
) -> Result<DeleteOptions, ApiError> {
    let raw = body::read(incoming).await?;
    let body = if raw.is_empty() { None } else { Some(body::parse(&raw, content_type)?) };
    let orphan = q.get("orphanDependents").map(|v| matches!(v, "true" | "True" | "1"));
    let query = DeleteQuery {
        grace_period_seconds: q.number("gracePeriodSeconds")?,
        propagation_policy: q.get("propagationPolicy").filter(|p| !p.is_empty()),
        orphan_dependents: orphan,
    };
    DeleteOptions::parse(body, query)
}
