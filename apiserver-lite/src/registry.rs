//! The resource operations over the store: get, list, create, update, delete and watch, with
//! upstream's semantics (optimistic concurrency, no-op updates keep their revision, graceful pod
//! deletion, finalizers, namespaces that empty themselves before they go).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::list::{ContinueToken, Snapshot};
pub use crate::list::{ListAt, ListOptions, ListPage};
use crate::objects::{self, FieldValidation};
use crate::resources::{self, RESOURCES, ResourceType};
use crate::storage::memory::Mutation;
use crate::storage::{self, EventType, Revision, Store, Stored};

/// Namespaces that exist from the start.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How a write is made: for real or as a dry run, and what unknown fields do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub validation: FieldValidation,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self { dry_run: false, validation: FieldValidation::Strict }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body and the query's `gracePeriodSeconds`.
    pub fn from(body: Option<&Value>, grace_query: Option<i64>) -> Self {
        let b = body.cloned().unwrap_or(Value::Null);
        Self {
            grace_period_seconds: grace_query.or_else(|| b["gracePeriodSeconds"].as_i64()),
            precondition_uid: b["preconditions"]["uid"].as_str().map(str::to_string),
            precondition_resource_version: b["preconditions"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
        }
    }
}

/// What a deletion did.
#[derive(Debug, Clone)]
pub struct Deleted {
    /// The object as it is now (marked for deletion) or was (removed).
    pub object: Value,
    pub removed: bool,
}

/// An event of a watch, after selectors.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchItem {
    Event { kind: &'static str, object: Value },
    Bookmark { revision: Revision, initial_events_end: bool },
    Error(Value),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// `resourceVersion` unset or "0": the current objects as ADDED events first.
    Now,
    /// Events after this revision.
    After(Revision),
    /// `sendInitialEvents=true`: current objects, a bookmark marking their end, then changes.
    InitialEvents,
}

#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub start: WatchStart,
    pub list: ListOptions,
    pub bookmarks: bool,
}

/// A watch in progress.
#[derive(Debug)]
pub struct WatchStream {
    queued: VecDeque<WatchItem>,
    watch: Option<storage::Watch>,
    list: ListOptions,
}

fn parse(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::internal(format!("stored object: {e}")))
}

fn encode(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn rv(obj: &Value) -> Option<&str> {
    obj["metadata"]["resourceVersion"].as_str().filter(|s| !s.is_empty())
}

fn now_plus(secs: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn is_graceful_pod(r: &ResourceType, obj: &Value) -> bool {
    r.group.is_empty()
        && r.kind == "Pod"
        && obj["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty())
        && !matches!(obj["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

fn has_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty())
}

/// The resource operations.
#[derive(Debug, Clone)]
pub struct Registry {
    pub store: Arc<Store>,
}

impl Registry {
    pub fn new(store: Arc<Store>) -> Self {
        Self { store }
    }

    /// Creates the initial namespaces that are missing.
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        let ns = resources::find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces resource"))?;
        for name in INITIAL_NAMESPACES {
            if self.store.get(&ns.key(None, name)).is_none() {
                let body = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } });
                self.create(
                    ns,
                    None,
                    body,
                    WriteOptions { dry_run: false, validation: FieldValidation::Ignore },
                )
                .await?;
            }
        }
        Ok(())
    }

    fn require_namespace(&self, r: &ResourceType, ns: Option<&str>) -> Result<(), ApiError> {
        let Some(ns) = ns.filter(|_| r.namespaced) else { return Ok(()) };
        let nsr = resources::find("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("no namespaces resource"))?;
        let stored =
            self.store.get(&nsr.key(None, ns)).ok_or_else(|| ApiError::namespace_not_found(ns))?;
        let obj = parse(&stored.value)?;
        if obj["status"]["phase"] == "Terminating" {
            return Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            )));
        }
        Ok(())
    }

    /// Gives a ClusterIP service a free address from 10.96.0.0/16 (upstream's default service
    /// range begins there), unless it asked for one or for none (`None`, headless).
    fn allocate_cluster_ip(&self, svc: &mut Value) {
        let wants = svc["spec"]["type"].as_str().unwrap_or("ClusterIP") != "ExternalName";
        if !wants || svc["spec"]["clusterIP"].as_str().is_some_and(|ip| !ip.is_empty()) {
            return;
        }
        let Some(services) = resources::find("", "v1", "services") else { return };
        let (existing, _) = self.store.list(&services.prefix(None));
        let used: std::collections::HashSet<String> = existing
            .iter()
            .filter_map(|(_, s)| serde_json::from_slice::<Value>(&s.value).ok())
            .filter_map(|v| v["spec"]["clusterIP"].as_str().map(str::to_string))
            .collect();
        let free = (10u32..65_534)
            .map(|n| format!("10.96.{}.{}", n >> 8, n & 0xff))
            .find(|ip| !used.contains(ip));
        if let Some(ip) = free {
            svc["spec"]["clusterIP"] = json!(ip);
            svc["spec"]["clusterIPs"] = json!([ip]);
        }
    }

    pub fn get(&self, r: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let stored =
            self.store.get(&r.key(ns, name)).ok_or_else(|| ApiError::not_found(r, name))?;
        parse(&stored.value)
    }

    /// One page of the collection (all namespaces when `ns` is `None`). The first page reads
    /// the state `opts.at` asks for; later pages read the first page's revision.
    pub fn list(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        let prefix = r.prefix(ns);
        let token = opts.continue_from.as_deref().map(ContinueToken::decode).transpose()?;
        let current = self.store.revision();
        let (entries, revision) = match (&token, opts.at) {
            (None, ListAt::Latest) => self.store.list(&prefix),
            (None, ListAt::NotOlderThan(min)) if min > current => {
                return Err(ApiError::too_large_resource_version(min, current));
            }
            (None, ListAt::NotOlderThan(_)) => self.store.list(&prefix),
            (None, ListAt::Exact(at)) if at > current => {
                return Err(ApiError::too_large_resource_version(at, current));
            }
            (None, ListAt::Exact(at)) => {
                let entries = self.store.list_at(&prefix, None, at).map_err(|e| {
                    ApiError::gone(format!("too old resource version: {at} ({})", e.oldest))
                })?;
                (entries, at)
            }
            (Some(t), _) => self.continue_list(&prefix, t)?,
        };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0usize;
        for (key, stored) in entries {
            if opts.filtering() && !opts.matches(&parse(&stored.value)?) {
                continue;
            }
            if opts.limit.is_some_and(|l| items.len() >= l) {
                remaining += 1;
                continue;
            }
            last_key = Some(key);
            items.push(stored.value);
        }
        let more = remaining > 0;
        Ok(ListPage {
            items,
            revision,
            continue_token: more
                .then(|| {
                    let snapshot = Snapshot::At(revision);
                    last_key.map(|after_key| ContinueToken { snapshot, after_key }.encode())
                })
                .flatten(),
            remaining: more.then_some(remaining),
        })
    }

    /// The entries after a continue token's key, and the revision they are at: the token's
    /// snapshot, or the newest state for a token that said so. A snapshot no longer kept is
    /// 410 Expired carrying a token for the rest at the newest state.
    fn continue_list(
        &self,
        prefix: &str,
        t: &ContinueToken,
    ) -> Result<(Vec<(String, Stored)>, Revision), ApiError> {
        let after = t.after_key.as_str();
        match t.snapshot {
            Snapshot::Newest => {
                let (mut entries, revision) = self.store.list(prefix);
                entries.retain(|(k, _)| k.as_str() > after);
                Ok((entries, revision))
            }
            Snapshot::At(at) => match self.store.list_at(prefix, Some(after), at) {
                Ok(entries) => Ok((entries, at)),
                Err(e) => {
                    let next =
                        ContinueToken { snapshot: Snapshot::Newest, after_key: after.into() };
                    Err(ApiError::expired_continue(
                        format!(
                            "the continue token's resource version {at} is older than the oldest kept ({}), so it cannot continue a consistent list: start a new list without it, or continue with the token in this answer to read the rest as it is now (objects written since the first page may then be missing or appear)",
                            e.oldest
                        ),
                        next.encode(),
                    ))
                }
            },
        }
    }

    /// Creates an object. Returns it and any warnings (unknown fields with `Warn`).
    pub async fn create(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        body: Value,
        w: WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let WriteOptions { dry_run, validation } = w;
        let mut obj = body;
        objects::check_type(r, &mut obj)?;
        objects::prepare_create(r, ns, &mut obj)?;
        let (mut obj, unknown) = objects::decode(r, obj)?;
        let warnings = field_warnings(&unknown, validation)?;
        objects::apply_defaults(r, &mut obj);
        objects::validate(r, &obj)?;
        self.require_namespace(r, ns)?;
        if r.group.is_empty() && r.kind == "Service" {
            self.allocate_cluster_ip(&mut obj);
        }
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = r.key(ns, &name);
        if dry_run {
            if self.store.get(&key).is_some() {
                return Err(ApiError::already_exists(r, &name));
            }
            return Ok((obj, warnings));
        }
        let applied = self
            .store
            .mutate(&key, |current, rev| {
                if current.is_some() {
                    return Err(ApiError::already_exists(r, &name));
                }
                obj["metadata"]["resourceVersion"] = json!(rev.to_string());
                Ok(Mutation::Put(encode(&obj)))
            })
            .await?;
        Ok((parse(applied.value.as_deref().unwrap_or_default())?, warnings))
    }

    /// Replaces an object (or its status), with optimistic concurrency on `resourceVersion`.
    pub async fn update(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        body: Value,
        w: WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let mut body = body;
        objects::check_type(r, &mut body)?;
        if let Some(given) =
            body["metadata"]["name"].as_str().filter(|n| !n.is_empty() && *n != name)
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        self.update_with(r, ns, name, sub, w, move |_| Ok(body)).await
    }

    /// Read-modify-write: `change` gets the current object and returns the new one (used by
    /// update, patch, scale and binding), which is decoded as the resource's type before any
    /// rule touches it. A `resourceVersion` in the new object must match.
    pub async fn update_with<F>(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        w: WriteOptions,
        change: F,
    ) -> Result<(Value, Vec<String>), ApiError>
    where
        F: FnOnce(&Value) -> Result<Value, ApiError>,
    {
        let WriteOptions { dry_run, validation } = w;
        let key = r.key(ns, name);
        let mut result = None;
        let mut warnings = Vec::new();
        let applied = self
            .store
            .mutate(&key, |current, rev| {
                let current = current.ok_or_else(|| ApiError::not_found(r, name))?;
                let old = parse(&current.value)?;
                let mut new = change(&old)?;
                objects::check_type(r, &mut new)?;
                let (decoded, unknown) = objects::decode(r, new)?;
                warnings = field_warnings(&unknown, validation)?;
                let mut new = decoded;
                if let Some(given) = rv(&new)
                    && Some(given) != rv(&old)
                {
                    return Err(ApiError::stale(r, name));
                }
                objects::prepare_update(r, sub, &old, &mut new)?;
                objects::apply_defaults(r, &mut new);
                objects::validate(r, &new)?;
                new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
                if new == old {
                    result = Some(old);
                    return Ok(Mutation::Unchanged);
                }
                if new["metadata"]["deletionTimestamp"].is_string()
                    && !has_finalizers(&new)
                    && !is_graceful_pod(r, &new)
                {
                    result = Some(new);
                    return Ok(if dry_run { Mutation::Unchanged } else { Mutation::Delete });
                }
                new["metadata"]["resourceVersion"] = json!(rev.to_string());
                let put = encode(&new);
                result = Some(new);
                Ok(if dry_run { Mutation::Unchanged } else { Mutation::Put(put) })
            })
            .await?;
        let _ = applied;
        let obj = result.ok_or_else(|| ApiError::internal("update produced nothing"))?;
        Ok((obj, warnings))
    }

    /// Deletes an object: at once, or by marking it (pods bound to a node wait for their
    /// kubelet's grace-0 confirmation; objects with finalizers wait for them; namespaces empty
    /// themselves first).
    pub async fn delete(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Deleted, ApiError> {
        let key = r.key(ns, name);
        let mut out = None;
        self.store
            .mutate(&key, |current, rev| {
                let current = current.ok_or_else(|| ApiError::not_found(r, name))?;
                let mut obj = parse(&current.value)?;
                if let Some(uid) = &opts.precondition_uid
                    && obj["metadata"]["uid"].as_str() != Some(uid) {
                        return Err(ApiError::conflict(r, name, &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", obj["metadata"]["uid"].as_str().unwrap_or_default())));
                    }
                if let Some(want) = &opts.precondition_resource_version
                    && rv(&obj) != Some(want.as_str()) {
                        return Err(ApiError::conflict(r, name, &format!("Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in meta: {}", rv(&obj).unwrap_or_default())));
                    }
                let grace = opts.grace_period_seconds.unwrap_or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64().unwrap_or(30)).max(0);
                let namespace = r.group.is_empty() && r.kind == "Namespace";
                let mark = (is_graceful_pod(r, &obj) && grace > 0) || has_finalizers(&obj) || namespace;
                if !mark {
                    out = Some(Deleted { object: obj, removed: true });
                    return Ok(if dry_run { Mutation::Unchanged } else { Mutation::Delete });
                }
                let already = obj["metadata"]["deletionGracePeriodSeconds"].as_i64();
                if obj["metadata"]["deletionTimestamp"].is_string() && already.is_some_and(|a| a <= grace) {
                    out = Some(Deleted { object: obj, removed: false });
                    return Ok(Mutation::Unchanged);
                }
                let grace = if is_graceful_pod(r, &obj) { grace } else { 0 };
                obj["metadata"]["deletionTimestamp"] = json!(now_plus(grace));
                obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                if namespace {
                    obj["status"]["phase"] = json!("Terminating");
                }
                obj["metadata"]["resourceVersion"] = json!(rev.to_string());
                let put = encode(&obj);
                out = Some(Deleted { object: obj, removed: false });
                Ok(if dry_run { Mutation::Unchanged } else { Mutation::Put(put) })
            })
            .await?;
        out.ok_or_else(|| ApiError::internal("delete produced nothing"))
    }

    /// The namespace controller, as upstream's: namespaces marked Terminating are emptied, then
    /// removed. Runs until `stop`.
    pub async fn run_namespace_controller(
        self: Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let Some(nsr) = resources::find("", "v1", "namespaces") else { return };
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
            let Ok(page) = self.list(nsr, None, &ListOptions::default()) else { continue };
            for item in page.items {
                let Ok(obj) = parse(&item) else { continue };
                if obj["status"]["phase"] == "Terminating" {
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    self.finalize_namespace(&name).await;
                }
            }
        }
    }

    /// One pass of emptying a Terminating namespace; removes it once empty.
    async fn finalize_namespace(&self, ns: &str) {
        {
            let mut left = 0;
            for r in RESOURCES.iter().filter(|r| r.namespaced) {
                let Ok(page) = self.list(r, Some(ns), &ListOptions::default()) else { continue };
                for item in page.items {
                    left += 1;
                    let Ok(obj) = parse(&item) else { continue };
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    if obj["metadata"]["deletionTimestamp"].is_null()
                        && let Err(e) =
                            self.delete(r, Some(ns), &name, &DeleteOptions::default(), false).await
                    {
                        tracing::debug!(namespace = ns, name, error = %e, "deleting namespace content");
                    }
                }
            }
            if left > 0 {
                return;
            }
        }
        if let Some(nsr) = resources::find("", "v1", "namespaces") {
            let key = nsr.key(None, ns);
            let result = self
                .store
                .mutate::<ApiError, _>(&key, |cur, _| {
                    Ok(if cur.is_some() { Mutation::Delete } else { Mutation::Unchanged })
                })
                .await;
            if let Err(e) = result {
                tracing::warn!(namespace = ns, error = %e, "removing the namespace");
            }
        }
    }

    /// Starts a watch.
    pub fn watch(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        opts: WatchOptions,
    ) -> Result<WatchStream, ApiError> {
        let prefix = r.prefix(ns);
        let mut queued = VecDeque::new();
        let after = match opts.start {
            WatchStart::After(rev) => rev,
            WatchStart::Now | WatchStart::InitialEvents => {
                let (entries, revision) = self.store.list(&prefix);
                for (_, stored) in entries {
                    let obj = parse(&stored.value)?;
                    if opts.list.matches(&obj) {
                        queued.push_back(WatchItem::Event { kind: "ADDED", object: obj });
                    }
                }
                if opts.start == WatchStart::InitialEvents {
                    queued.push_back(WatchItem::Bookmark { revision, initial_events_end: true });
                }
                revision
            }
        };
        let watch = match self.store.watch(&prefix, Some(after)) {
            Ok(w) => w,
            Err(expired) => {
                let status = ApiError::gone(expired.to_string()).status();
                return Ok(WatchStream {
                    queued: VecDeque::from([WatchItem::Error(status)]),
                    watch: None,
                    list: opts.list,
                });
            }
        };
        let mut stream = WatchStream { queued, watch: None, list: opts.list };
        for e in &watch.initial {
            if let Some(item) = stream.translate(e)? {
                stream.queued.push_back(item);
            }
        }
        stream.watch = Some(watch);
        Ok(stream)
    }
}

pub(crate) fn field_warnings(
    unknown: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    match validation {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => {
            Ok(unknown.iter().map(|f| format!("unknown field {f:?}")).collect())
        }
        FieldValidation::Strict if unknown.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => {
            let list: Vec<String> =
                unknown.iter().map(|f| format!("unknown field {f:?}")).collect();
            Err(ApiError::bad_request(format!("strict decoding error: {}", list.join(", "))))
        }
    }
}

impl WatchStream {
    /// An event as this watcher sees it through its selectors: an object that starts matching is
    /// ADDED, one that stops matching is DELETED.
    fn translate(&self, e: &storage::Event) -> Result<Option<WatchItem>, ApiError> {
        let obj = parse(&e.value)?;
        let now = self.list.matches(&obj);
        let before = match &e.prev {
            Some(p) if self.list.filtering() => self.list.matches(&parse(&p.value)?),
            Some(_) => true,
            None => false,
        };
        let kind = match (e.kind, before, now) {
            (EventType::Deleted, _, true) => "DELETED",
            (EventType::Deleted, _, false) => return Ok(None),
            (_, false, true) => "ADDED",
            (_, true, true) => "MODIFIED",
            (_, true, false) => "DELETED",
            (_, false, false) => return Ok(None),
        };
        Ok(Some(WatchItem::Event { kind, object: obj }))
    }

    /// The next item; `None` when the watch ended (after an error, or the store closed, or the
    /// watcher fell too far behind and was dropped).
    pub async fn next(&mut self) -> Option<WatchItem> {
        loop {
            if let Some(item) = self.queued.pop_front() {
                return Some(item);
            }
            let watch = self.watch.as_mut()?;
            match watch.next().await {
                Ok(e) => match self.translate(&e) {
                    Ok(Some(item)) => return Some(item),
                    Ok(None) => {}
                    Err(err) => return Some(WatchItem::Error(err.status())),
                },
                Err(end) => {
                    tracing::debug!(?end, "watch ended");
                    self.watch = None;
                    return None;
                }
            }
        }
    }
}
