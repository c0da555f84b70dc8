//! The resource operations over the store: get, list, create, update, delete and watch, with
//! upstream's semantics (optimistic concurrency, no-op updates keep their revision, graceful pod
//! deletion, finalizers, namespaces that empty themselves before they go).
//!
//! - this file: the options, get, create, update and delete;
//! - [`delete`]: what a delete does: grace periods, finalizers, propagation to dependents;
//! - [`list`]: pages over one snapshot, and continue tokens;
//! - [`watch`]: watches from a revision through selectors;
//! - [`namespace`]: the namespace controller that empties Terminating namespaces;
//! - [`ipalloc`]: the Services' cluster IPs, one record per address, safe across apiservers;
//! - [`versioner`]: a stored object's resourceVersion is its revision (over etcd, set on read).

mod delete;
pub mod ipalloc;
mod list;
mod namespace;
pub mod versioner;
mod watch;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::admission::Admission;
use crate::errors::ApiError;
use crate::kinds::Deletion;

pub use crate::list::{ListAt, ListOptions, ListPage};
use crate::managedfields::FieldManager;
use crate::objects::{self, FieldValidation};
use crate::resources::{self, ResourceType, Subresource};
use crate::storage::EventType;
use crate::storage::Store;
use crate::storage::memory::Mutation;
pub use delete::{DeleteOptions, DeleteQuery, Propagation};
pub use watch::{WatchItem, WatchOptions, WatchStart, WatchStream};

mod apply;
pub use apply::{Applied, ApplyOptions};

/// The field manager of writes made inside the server (bootstrap objects, RBAC reconciliation
/// and aggregation), as upstream's loopback client names itself.
pub const INTERNAL_MANAGER: &str = "kube-apiserver";

/// How a write's `managedFields` are kept: recorded as an update by a manager, or already
/// made by an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Track<'a> {
    Update(&'a str),
    Applied,
}

/// The field manager of a resource type's endpoint (`None`, `status` or `scale`).
pub(crate) fn field_manager(r: &ResourceType, sub: Option<&str>) -> FieldManager {
    FieldManager::new(
        &r.group_version(),
        r.kind,
        sub.unwrap_or_default(),
        r.has_subresource(Subresource::Status),
    )
}

/// How many names a `generateName` create tries (upstream's retry on a taken name).
const GENERATE_NAME_ATTEMPTS: usize = 8;

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

/// What a deletion did.
#[derive(Debug, Clone)]
pub struct Deleted {
    /// The object as it is now (marked for deletion) or was (removed).
    pub object: Value,
    pub removed: bool,
    /// Warnings for the client (a batch/v1 Job deleted with no propagation policy).
    pub warnings: Vec<String>,
}

/// A created object, with its warnings and, when they are exactly the object, the bytes
/// stored: the answer can be those bytes rather than a second encoding of the same object.
#[derive(Debug)]
pub struct Created {
    pub object: Value,
    pub warnings: Vec<String>,
    /// `None` for a dry run, and when the store gave a revision other than the one encoded.
    pub encoded: Option<Bytes>,
}

fn parse(bytes: &[u8]) -> Result<Value, ApiError> {
    parse_as(bytes)
}

/// A stored object read as `T` (only what `T` holds is built).
fn parse_as<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::internal(format!("stored object: {e}")))
}

fn encode(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn rv(obj: &Value) -> Option<&str> {
    obj["metadata"]["resourceVersion"].as_str().filter(|s| !s.is_empty())
}

/// The resource operations.
#[derive(Debug, Clone)]
pub struct Registry {
    pub store: Arc<Store>,
    /// The admission plugins' settings.
    pub admission: Admission,
}

impl Registry {
    pub fn new(store: Arc<Store>) -> Self {
        Self { store, admission: Admission::default() }
    }

    /// With admission settings other than upstream's defaults.
    pub fn with_admission(self, admission: Admission) -> Self {
        Self { admission, ..self }
    }

    /// Creates the initial namespaces that are missing, and records the cluster IPs of Services
    /// stored without one.
    pub async fn bootstrap(&self) -> Result<(), ApiError> {
        let ns = &resources::NAMESPACES;
        for name in INITIAL_NAMESPACES {
            if self.store.get(&ns.key(None, name)).is_none() {
                let body = json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } });
                let w = WriteOptions { dry_run: false, validation: FieldValidation::Ignore };
                match self.create(ns, None, body, w).await {
                    // Another apiserver sharing the store made it meanwhile.
                    Err(e) if e.code == 409 => {}
                    done => {
                        done?;
                    }
                }
            }
        }
        self.repair_cluster_ips().await
    }

    fn require_namespace(&self, r: &ResourceType, ns: Option<&str>) -> Result<(), ApiError> {
        let Some(ns) = ns.filter(|_| r.namespaced) else { return Ok(()) };
        let nsr = &resources::NAMESPACES;
        let stored =
            self.store.get(&nsr.key(None, ns)).ok_or_else(|| ApiError::namespace_not_found(ns))?;
        // Only the phase is read: the rest of the namespace is skipped, not built.
        #[derive(serde::Deserialize)]
        struct Namespace {
            status: Option<Status>,
        }
        #[derive(serde::Deserialize)]
        struct Status {
            phase: Option<String>,
        }
        let ns_obj: Namespace = parse_as(&stored.value)?;
        if ns_obj.status.and_then(|s| s.phase).as_deref() == Some("Terminating") {
            return Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            )));
        }
        Ok(())
    }

    pub fn get(&self, r: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let stored =
            self.store.get(&r.key(ns, name)).ok_or_else(|| ApiError::not_found(r, name))?;
        parse(&stored.value)
    }

    /// Whether the object is stored (nothing is decoded).
    pub fn exists(&self, r: &ResourceType, ns: Option<&str>, name: &str) -> bool {
        self.store.get(&r.key(ns, name)).is_some()
    }

    /// Creates an object. Returns it and any warnings (unknown fields with `Warn`). A name made
    /// from `generateName` that is taken is made again, up to upstream's eight attempts.
    pub async fn create(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        body: Value,
        w: WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let c = self.create_as(r, ns, body, w, INTERNAL_MANAGER).await?;
        Ok((c.object, c.warnings))
    }

    /// [`create`](Self::create) by a named field manager.
    pub async fn create_as(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        body: Value,
        w: WriteOptions,
        manager: &str,
    ) -> Result<Created, ApiError> {
        self.create_tracked(r, ns, body, w, Track::Update(manager)).await
    }

    pub(crate) async fn create_tracked(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        body: Value,
        w: WriteOptions,
        track: Track<'_>,
    ) -> Result<Created, ApiError> {
        let meta = &body["metadata"];
        let generated = meta["name"].as_str().unwrap_or_default().is_empty()
            && meta["generateName"].as_str().is_some_and(|p| !p.is_empty());
        if !generated {
            return self.create_once(r, ns, body, w, track).await;
        }
        let mut last = None;
        for _ in 0..GENERATE_NAME_ATTEMPTS {
            match self.create_once(r, ns, body.clone(), w, track).await {
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| ApiError::internal("create made no attempt")))
    }

    async fn create_once(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        body: Value,
        w: WriteOptions,
        track: Track<'_>,
    ) -> Result<Created, ApiError> {
        let WriteOptions { dry_run, validation } = w;
        let mut obj = body;
        objects::check_type(r, &mut obj)?;
        objects::prepare_create(r, ns, &mut obj)?;
        let (mut obj, unknown) = objects::decode(r, obj)?;
        let warnings = field_warnings(&unknown, validation)?;
        objects::apply_defaults(r, &mut obj)?;
        if let Track::Update(manager) = track {
            let fm = field_manager(r, None);
            fm.update(&fm.empty_object(), &mut obj, manager, true);
        }
        // Upstream's NamespaceLifecycle admits first: no account is looked up in a namespace
        // that does not exist.
        self.require_namespace(r, ns)?;
        self.admission.admit_create(r, ns, &mut obj, self).await?;
        objects::prepare_for_create(r, &mut obj)?;
        objects::validate(r, &obj)?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = r.key(ns, &name);
        if dry_run {
            if self.store.get(&key).is_some() {
                return Err(ApiError::already_exists(r, &name));
            }
            if *r == resources::SERVICES {
                self.preview_cluster_ip(&mut obj);
            }
            return Ok(Created { object: obj, warnings, encoded: None });
        }
        // Service storage allocates the cluster IP (released again if the Service is not stored).
        let reserved = match *r == resources::SERVICES {
            true => self.allocate_cluster_ip(&mut obj, ns.unwrap_or("default")).await?,
            false => None,
        };
        // What is stored is `obj` with its resourceVersion: the answer is that object (with the
        // revision it got), not a parse of the bytes just encoded.
        let mut encoded = None;
        let applied = self
            .store
            .mutate(&key, |current, rev| {
                if current.is_some() {
                    return Err(ApiError::already_exists(r, &name));
                }
                obj["metadata"]["resourceVersion"] = json!(rev.to_string());
                let bytes = encode(&obj);
                encoded = Some((rev, bytes.clone()));
                Ok(Mutation::Put(bytes))
            })
            .await;
        let applied = match (applied, reserved) {
            (Err(e), Some(ip)) => {
                self.release_cluster_ip(&ip, ns.unwrap_or("default"), &name).await;
                return Err(e);
            }
            (applied, _) => applied?,
        };
        obj["metadata"]["resourceVersion"] = json!(applied.revision.to_string());
        let encoded = encoded.filter(|(rev, _)| *rev == applied.revision).map(|(_, b)| b);
        Ok(Created { object: obj, warnings, encoded })
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
        self.update_guarded(r, ns, name, sub, body, w, INTERNAL_MANAGER, |_, _| Ok(())).await
    }

    /// [`update`](Self::update), with `guard` deciding on the (current, new) pair first (RBAC's
    /// escalation check).
    #[allow(clippy::too_many_arguments)]
    pub async fn update_guarded(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        body: Value,
        w: WriteOptions,
        manager: &str,
        mut guard: impl FnMut(&Value, &Value) -> Result<(), ApiError>,
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
        self.update_tracked(r, ns, name, sub, w, Track::Update(manager), move |old| {
            guard(old, &body)?;
            Ok(body.clone())
        })
        .await
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
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        self.update_tracked(r, ns, name, sub, w, Track::Update(INTERNAL_MANAGER), change).await
    }

    /// [`update_with`](Self::update_with) by a named field manager.
    #[allow(clippy::too_many_arguments)]
    pub async fn update_with_as<F>(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        w: WriteOptions,
        manager: &str,
        change: F,
    ) -> Result<(Value, Vec<String>), ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        self.update_tracked(r, ns, name, sub, w, Track::Update(manager), change).await
    }

    /// The read-modify-write every update shares; `track` says how `managedFields` are kept
    /// (a binding is no tracked write, as upstream's).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn update_tracked<F>(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        w: WriteOptions,
        track: Track<'_>,
        mut change: F,
    ) -> Result<(Value, Vec<String>), ApiError>
    where
        F: FnMut(&Value) -> Result<Value, ApiError>,
    {
        let WriteOptions { dry_run, validation } = w;
        let subresource = sub
            .map(|s| {
                Subresource::parse(s)
                    .ok_or_else(|| ApiError::internal(format!("no subresource {s:?}")))
            })
            .transpose()?;
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
                objects::apply_defaults(r, &mut new)?;
                self.admission.admit_update(r, sub, &mut new)?;
                let applied_fields = new["metadata"].get("managedFields").cloned();
                objects::prepare_update(r, subresource, &old, &mut new)?;
                match track {
                    Track::Update(manager) if subresource != Some(Subresource::Binding) => {
                        field_manager(r, sub).update(&old, &mut new, manager, false);
                    }
                    Track::Update(_) => {}
                    Track::Applied => match applied_fields {
                        Some(f) => new["metadata"]["managedFields"] = f,
                        None => {
                            if let Some(m) = new["metadata"].as_object_mut() {
                                m.remove("managedFields");
                            }
                        }
                    },
                }
                objects::validate_update(r, subresource, &old, &new)?;
                new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
                if new == old {
                    result = Some(old);
                    return Ok(Mutation::Unchanged);
                }
                if delete::remove_on_update(&old, &new) {
                    result = Some(new);
                    return Ok(if dry_run { Mutation::Unchanged } else { Mutation::Delete });
                }
                new["metadata"]["resourceVersion"] = json!(rev.to_string());
                let put = encode(&new);
                result = Some(new);
                Ok(if dry_run { Mutation::Unchanged } else { Mutation::Put(put) })
            })
            .await?;
        let mut obj = result.ok_or_else(|| ApiError::internal("update produced nothing"))?;
        if applied.kind == Some(EventType::Modified) {
            obj["metadata"]["resourceVersion"] = json!(applied.revision.to_string());
        }
        if applied.kind == Some(EventType::Deleted) && *r == resources::SERVICES {
            self.service_removed(&obj).await;
        }
        Ok((obj, warnings))
    }

    /// Deletes an object: at once, or by marking it (pods bound to a node wait for their
    /// kubelet's grace-0 confirmation; objects with finalizers, the garbage collector's
    /// included, wait for them; namespaces empty themselves first).
    pub async fn delete(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Deleted, ApiError> {
        let dry_run = dry_run || opts.dry_run;
        let key = r.key(ns, name);
        let namespace = matches!(r.strategy.deletion, Deletion::Terminate);
        let now = jiff::Timestamp::now();
        let mut out = None;
        let applied = self
            .store
            .mutate::<ApiError, _>(&key, |current, rev| {
                let current = current.ok_or_else(|| ApiError::not_found(r, name))?;
                let stored = parse(&current.value)?;
                check_preconditions(r, name, &stored, opts)?;
                let outcome = if namespace {
                    terminate_namespace(stored.clone(), now)
                } else {
                    delete::decide(r, stored.clone(), opts, now)
                };
                let (object, mutation) = match outcome {
                    delete::Outcome::Remove(o) => {
                        out = Some((o, true));
                        return Ok(if dry_run { Mutation::Unchanged } else { Mutation::Delete });
                    }
                    delete::Outcome::Mark(o) if o != stored => {
                        let mut o = o;
                        o["metadata"]["resourceVersion"] = json!(rev.to_string());
                        let put = encode(&o);
                        (o, if dry_run { Mutation::Unchanged } else { Mutation::Put(put) })
                    }
                    delete::Outcome::Mark(o) | delete::Outcome::Keep(o) => (o, Mutation::Unchanged),
                };
                out = Some((object, false));
                Ok(mutation)
            })
            .await?;
        let (mut object, removed) =
            out.ok_or_else(|| ApiError::internal("delete produced nothing"))?;
        if applied.kind == Some(EventType::Modified) {
            object["metadata"]["resourceVersion"] = json!(applied.revision.to_string());
        }
        if applied.kind == Some(EventType::Deleted) && *r == resources::SERVICES {
            self.service_removed(&object).await;
        }
        let mut warnings = Vec::new();
        if r.strategy.default_propagation == Propagation::Orphan && opts.no_policy() {
            warnings.push(delete::JOB_ORPHAN_WARNING.to_string());
        }
        Ok(Deleted { object, removed, warnings })
    }
}

fn check_preconditions(
    r: &ResourceType,
    name: &str,
    obj: &Value,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
    if let Some(want) = opts.precondition_uid.as_deref().filter(|w| *w != uid) {
        let why =
            format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}");
        return Err(ApiError::conflict(r, name, &why));
    }
    if let Some(want) = opts.precondition_resource_version.as_deref()
        && rv(obj) != Some(want)
    {
        let why = format!(
            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in meta: {}",
            rv(obj).unwrap_or_default()
        );
        return Err(ApiError::conflict(r, name, &why));
    }
    Ok(())
}

/// A namespace is marked Terminating (once); the namespace controller empties and removes it.
fn terminate_namespace(mut ns: Value, now: jiff::Timestamp) -> delete::Outcome {
    if ns["metadata"]["deletionTimestamp"].is_string() {
        return delete::Outcome::Keep(ns);
    }
    ns["metadata"]["deletionTimestamp"] = json!(now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    ns["metadata"]["deletionGracePeriodSeconds"] = json!(0);
    ns["status"]["phase"] = json!("Terminating");
    delete::Outcome::Mark(ns)
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
