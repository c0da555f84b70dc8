//! `kubectl describe`'s describers: an object (and what kubectl reads beside it: its events,
//! a node's pods, a deployment's ReplicaSets, a service's endpoints) turned into kubectl's
//! text, character for character. The table picks a describer by group and kind, as
//! kubectl's `describerMap`; every other kind gets the generic describer.
//!
//! Each kind's room fetches in `describe` and renders in a pure `render` (objects, the clock
//! and the time zone in, text out), so the text is tested without a server.
//!
//! - [`tabwriter`]: Go's `text/tabwriter`; [`writer`]: kubectl's `PrefixWriter` over it.
//! - [`fields`]: labels, annotations, taints, tolerations, selectors, times as kubectl prints
//!   them; [`quantity`]: quantities as apimachinery prints them.
//! - [`events`]: the events about an object, found by kubectl's field selector, and their table.
//! - [`containers`], [`volumes`]: a pod's (or template's) containers and volumes.
//! - [`pod`], [`node`], [`deployment`], [`replicaset`], [`service`], [`configmap`], [`generic`].

pub mod configmap;
pub mod containers;
pub mod deployment;
pub mod events;
pub mod fields;
pub mod generic;
pub mod node;
pub mod pod;
pub mod quantity;
pub mod replicaset;
pub mod service;
pub mod tabwriter;
pub mod volumes;
pub mod writer;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::Value;

use crate::builder::Info;
use crate::errors::Result;
use crate::factory::Factory;

/// `--show-events`, `--chunk-size`.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub show_events: bool,
    /// The page size of lists (0: unpaged).
    pub chunk_size: i64,
}

/// What ages and times are computed against: now, and the zone times are shown in (kubectl
/// shows the local one).
#[derive(Debug, Clone)]
pub struct Clock {
    pub now: Timestamp,
    pub tz: TimeZone,
}

impl Clock {
    pub fn system() -> Clock {
        Clock { now: Timestamp::now(), tz: TimeZone::system() }
    }
}

/// A describer of kubectl's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Describer {
    Pod,
    Node,
    Deployment,
    ReplicaSet,
    Service,
    ConfigMap,
    /// Every field of the object, as kubectl's generic describer prints unstructured objects.
    Generic,
}

/// Group, kind → describer; kinds not listed are described generically.
const TABLE: &[(&str, &str, Describer)] = &[
    ("", "Pod", Describer::Pod),
    ("", "Node", Describer::Node),
    ("", "Service", Describer::Service),
    ("", "ConfigMap", Describer::ConfigMap),
    ("apps", "Deployment", Describer::Deployment),
    ("apps", "ReplicaSet", Describer::ReplicaSet),
];

pub fn describer_for(group: &str, kind: &str) -> Describer {
    TABLE
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map_or(Describer::Generic, |(_, _, d)| *d)
}

/// The text `kubectl describe` prints for one object.
pub async fn describe(f: &Factory, info: &Info, s: Settings, clock: &Clock) -> Result<String> {
    let r = &info.resource;
    match describer_for(&r.group, &r.kind) {
        Describer::Pod => pod::describe(f, info, s, clock).await,
        Describer::Node => node::describe(f, info, s, clock).await,
        Describer::Deployment => deployment::describe(f, info, s, clock).await,
        Describer::ReplicaSet => replicaset::describe(f, info, s, clock).await,
        Describer::Service => service::describe(f, info, s, clock).await,
        Describer::ConfigMap => configmap::describe(f, info, s, clock).await,
        Describer::Generic => generic::describe(f, info, s, clock).await,
    }
}

/// A list followed through its pages (`limit`, `continue`), its items.
pub async fn list_all(f: &Factory, url: &str, chunk_size: i64) -> Result<Vec<Value>> {
    let mut items = Vec::new();
    let mut token = String::new();
    loop {
        let mut q = Vec::new();
        if chunk_size > 0 {
            q.push(format!("limit={chunk_size}"));
        }
        if !token.is_empty() {
            q.push(format!("continue={}", crate::builder::encode(&token)));
        }
        let sep = if url.contains('?') { '&' } else { '?' };
        let page_url =
            if q.is_empty() { url.to_string() } else { format!("{url}{sep}{}", q.join("&")) };
        let page = f.get_json(&page_url).await?;
        if let Some(a) = page["items"].as_array() {
            items.extend(a.iter().cloned());
        }
        token = page["metadata"]["continue"].as_str().unwrap_or_default().to_string();
        if token.is_empty() {
            return Ok(items);
        }
    }
}

/// The string at a JSON pointer, or `""`.
pub fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The array at a JSON pointer, or nothing.
pub fn items<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.pointer(ptr).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// The integer at a JSON pointer, or 0.
pub fn int(v: &Value, ptr: &str) -> i64 {
    v.pointer(ptr).and_then(Value::as_i64).unwrap_or_default()
}

/// The boolean at a JSON pointer, or false.
pub fn flag(v: &Value, ptr: &str) -> bool {
    v.pointer(ptr).and_then(Value::as_bool).unwrap_or_default()
}

/// Whether a JSON pointer names something (not null).
pub fn has(v: &Value, ptr: &str) -> bool {
    v.pointer(ptr).is_some_and(|x| !x.is_null())
}
