//! `metrics.k8s.io/v1beta1` `nodes` and `pods` over HTTP, as metrics-server answers them: get
//! and list (label selectors, and `metadata.name`/`metadata.namespace` field selectors) over
//! the Nodes and Pods the store holds, each with its usage from [`crate::metrics`]; objects
//! with no usage yet are left out of lists, and a get of one is a 404 naming
//! `nodemetrics.metrics.k8s.io` or `podmetrics.metrics.k8s.io` (a pod as `namespace/name`).
//! Authorized as every resource request. Also the [`Source`] the scrape loop reads kubelets
//! through: `GET /metrics/resource` over the same connection code as `nodes/proxy`.

use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Method, Response};
use serde_json::{Value, json};

use super::ApiState;
use super::body::{self, Body};
use super::proxy::{KubeletClient, Location, kubelet_request, node_endpoint, send};
use crate::auth::User;
use crate::errors::ApiError;
use crate::metrics::render;
use crate::metrics::scraper::{ScrapeError, Source};
use crate::registry::ListOptions;
use crate::request::{Query, ResourceRequest, Verb};
use crate::resources::{self, ResourceType};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::table;

/// The most of a `/metrics/resource` answer read (110 pods' worth is about 100 KiB).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// What the metrics of one kind are computed over.
fn base(r: &ResourceType) -> &'static ResourceType {
    if r.namespaced { &resources::PODS } else { &resources::NODES }
}

/// metrics-server's resource names in its NotFound errors.
fn not_found(r: &ResourceType, name: &str) -> ApiError {
    let resource = if r.namespaced { "podmetrics" } else { "nodemetrics" };
    ApiError::new(404, "NotFound", format!("{resource}.metrics.k8s.io {name:?} not found"))
}

fn compute(state: &ApiState, r: &ResourceType, objects: &[Value]) -> Vec<Value> {
    let now = jiff::Timestamp::now();
    state.metrics.read(|s| {
        objects
            .iter()
            .filter_map(|o| {
                if r.namespaced {
                    render::pod_metrics(s, o, now)
                } else {
                    render::node_metrics(s, o, now)
                }
            })
            .collect()
    })
}

/// Serves a get or list of NodeMetrics or PodMetrics.
pub fn handle(
    state: &ApiState,
    user: &User,
    method: &Method,
    accept: &str,
    rr: &ResourceRequest,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let r = rr.resource;
    let ns = rr.namespace.as_deref();
    let verb = Verb::of(method, rr.name.is_some(), q.flag("watch"))
        .filter(|v| r.verbs.contains(v) && rr.subresource.is_none())
        .ok_or_else(ApiError::method_not_allowed)?;
    let items = match (verb, rr.name.as_deref()) {
        (Verb::Get, Some(name)) => {
            state.authz.authorize(user, "get", r, ns, Some(name), None)?;
            let obj = state.registry.get(base(r), ns, name)?;
            let shown = match ns {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_string(),
            };
            let one = compute(state, r, &[obj]);
            let item = one.into_iter().next().ok_or_else(|| not_found(r, &shown))?;
            if !table::wants_table(accept) {
                return Ok(body::json(200, &item));
            }
            vec![item]
        }
        (Verb::List, None) => {
            let fields = q.get("fieldSelector").unwrap_or_default();
            state.authz.authorize_list(user, "list", r, ns, fields)?;
            let opts = ListOptions {
                labels: LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?,
                fields: FieldSelector::parse(fields, r)?,
                ..ListOptions::default()
            };
            let page = state.registry.list(base(r), ns, &opts)?;
            let objects: Vec<Value> =
                page.items.iter().filter_map(|b| serde_json::from_slice(b).ok()).collect();
            let mut items = compute(state, r, &objects);
            items.sort_by(|a, b| {
                let key = |v: &Value| {
                    (
                        v["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
                        v["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                    )
                };
                key(a).cmp(&key(b))
            });
            if !table::wants_table(accept) {
                return Ok(body::json(200, &render::list(r.kind, items)));
            }
            items
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    Ok(body::json(200, &metrics_table(r, items)))
}

/// metrics-server's Table: Name, `cpu`, `memory` (a pod's containers summed) and Window.
fn metrics_table(r: &ResourceType, items: Vec<Value>) -> Value {
    let column = |name: &str, format: &str, description: &str| json!({"name": name, "type": "string", "format": format, "description": description, "priority": 0});
    let columns = vec![
        column("Name", "name", "Name of the resource"),
        column("cpu", "quantity", ""),
        column("memory", "quantity", ""),
        column("Window", "duration", ""),
    ];
    let rows: Vec<Value> = items
        .into_iter()
        .map(|item| {
            let (cpu, memory) = if r.namespaced {
                let mut sums = (0u64, 0u64);
                for c in item["containers"].as_array().into_iter().flatten() {
                    sums.0 += nanos(&c["usage"]["cpu"]);
                    sums.1 += bytes(&c["usage"]["memory"]);
                }
                (render::decimal_nanos(sums.0), render::binary_bytes(sums.1))
            } else {
                (
                    item["usage"]["cpu"].as_str().unwrap_or_default().to_string(),
                    item["usage"]["memory"].as_str().unwrap_or_default().to_string(),
                )
            };
            let mut object = item.clone();
            object["kind"] = json!(r.kind);
            object["apiVersion"] = json!(render::GROUP_VERSION);
            json!({"cells": [item["metadata"]["name"], cpu, memory, item["window"]], "object": object})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "columnDefinitions": columns, "rows": rows})
}

fn quantity(v: &Value) -> Option<api::quantity::Quantity> {
    api::quantity::Quantity::parse(v.as_str()?).ok()
}

fn nanos(v: &Value) -> u64 {
    quantity(v).map_or(0, |q| u64::try_from(q.nanos().max(0)).unwrap_or(u64::MAX))
}

fn bytes(v: &Value) -> u64 {
    quantity(v).map_or(0, |q| u64::try_from(q.value().max(0)).unwrap_or(0))
}

impl Source for KubeletClient {
    async fn resource_metrics(&self, node: &Value) -> Result<String, ScrapeError> {
        let name = node["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let unreachable =
            |e: ApiError| ScrapeError::Unreachable { node: name.clone(), message: e.message };
        let (host, port) = node_endpoint(node, &self.address_types).map_err(unreachable)?;
        let loc = Location { host, port, container: String::new() };
        let req = kubelet_request(Method::GET, &loc, "/metrics/resource")
            .map_err(unreachable)?
            .body(Empty::<bytes::Bytes>::new())
            .map_err(|e| ScrapeError::Unreachable { node: name.clone(), message: e.to_string() })?;
        let resp = send(self, &loc, req).await.map_err(unreachable)?;
        if !resp.status().is_success() {
            return Err(ScrapeError::Status { node: name, status: resp.status().to_string() });
        }
        let body = Limited::new(resp.into_body(), MAX_BODY).collect().await.map_err(|e| {
            ScrapeError::Unreachable {
                node: name.clone(),
                message: format!("failed to read response body - {e}"),
            }
        })?;
        Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
    }
}
