//! The field manager every write goes through, as upstream's `FieldManager` chain: an update's
//! entry merged into the writer's earlier Update entry (timed when it changed something), at
//! most ten Update managers (the oldest merged into `ancient-changes`), objects that never had
//! managedFields left without (except creations), a written `managedFields` replacing the
//! stored one (`[]` clearing it), `before-first-apply` owning what an object had before its
//! first apply, the version check of an applied configuration, and kubectl's client-side →
//! server-side upgrade (the `kubectl` manager may take the fields its last-applied annotation
//! still shows, and keeps that annotation current).

use serde_json::{Value, json};

use super::conflict::Conflicts;
use super::entries::{Managed, ManagerId};
use super::merge::{self, VersionedSet};
use super::path::Path;
use super::set::FieldSet;
use super::typed::{self, TypeError};

pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";
pub const MAX_UPDATE_MANAGERS: usize = 10;
pub const ANCIENT_CHANGES: &str = "ancient-changes";
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The manager whose apply upgrades client-side apply (kubectl's default for `--server-side`).
const KUBECTL: &str = "kubectl";
const CURRENT_OPERATION: &str = "current-operation";

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Typed(#[from] TypeError),
    #[error(transparent)]
    Conflicts(#[from] Conflicts),
    #[error("failed to decode managed fields: {0}")]
    Managed(#[from] super::entries::EntryError),
}

/// The field manager of one resource type and subresource.
#[derive(Debug, Clone)]
pub struct FieldManager {
    pub api_version: String,
    pub kind: String,
    /// `""` for the resource itself.
    pub subresource: String,
    /// Fields the writer of this endpoint never owns (upstream's reset fields).
    pub ignored: FieldSet,
    /// The time entries written now get.
    pub now: String,
}

/// What no manager owns (upstream's `stripMeta`).
fn stripped() -> &'static FieldSet {
    static STRIPPED: std::sync::OnceLock<FieldSet> = std::sync::OnceLock::new();
    STRIPPED.get_or_init(|| {
        let mut s = FieldSet::new();
        for p in [&["apiVersion"][..], &["kind"], &["metadata"]] {
            s.insert(&Path::fields(p).0);
        }
        for f in [
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        ] {
            s.insert(&Path::fields(&["metadata", f]).0);
        }
        s
    })
}

fn without_managed_fields(v: &Value) -> Value {
    let mut out = v.clone();
    if let Some(m) = out["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    out
}

/// A `managedFields` that asks to be cleared: `[]`, or one empty entry.
fn is_reset(v: Option<&Value>) -> bool {
    match v.and_then(Value::as_array).map(Vec::as_slice) {
        Some([]) => true,
        Some([only]) => only.as_object().is_some_and(|o| o.is_empty()),
        _ => false,
    }
}

impl FieldManager {
    /// For `subresource` (`""`, `status` or `scale`) of a kind; `has_status` says whether the
    /// kind's status is written through its status subresource.
    pub fn new(api_version: &str, kind: &str, subresource: &str, has_status: bool) -> Self {
        let mut ignored = FieldSet::new();
        match subresource {
            "" if has_status => ignored.insert(&Path::fields(&["status"]).0),
            "status" => {
                ignored.insert(&Path::fields(&["spec"]).0);
                ignored.insert(&Path::fields(&["metadata"]).0);
            }
            _ => {}
        }
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            subresource: subresource.into(),
            ignored,
            now: crate::objects::now_rfc3339(),
        }
    }

    /// The object a creation starts from: what upstream's empty typed object holds (its
    /// metadata, and the structs that are no pointers in Go).
    pub fn empty_object(&self) -> Value {
        let template = json!({"metadata": {}, "spec": {"containers": null}});
        let mut v = json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": {}});
        match self.kind.as_str() {
            "Pod" => {
                v["spec"] = json!({"containers": null});
                v["status"] = json!({});
            }
            "Deployment" => {
                v["spec"] = json!({"template": template, "strategy": {}});
                v["status"] = json!({});
            }
            "ReplicaSet" | "Job" => {
                v["spec"] = json!({"template": template});
                v["status"] = json!({});
            }
            "DaemonSet" => {
                v["spec"] = json!({"template": template, "updateStrategy": {}});
                v["status"] = json!({});
            }
            "CronJob" => {
                v["spec"] =
                    json!({"jobTemplate": {"metadata": {}, "spec": {"template": template}}});
                v["status"] = json!({});
            }
            "Service" | "Namespace" | "Node" => {
                v["spec"] = json!({});
                v["status"] = json!({});
            }
            _ => {}
        }
        v
    }

    /// Records an update (create, update, patch) by `manager` from `live` (the empty object
    /// for a creation) to `new`, in `new`'s `metadata.managedFields`.
    pub fn update(&self, live: &Value, new: &mut Value, manager: &str, creating: bool) {
        let from_new = new["metadata"].get("managedFields").cloned();
        let from_live =
            || Managed::decode(live["metadata"].get("managedFields")).unwrap_or_default();
        let mut managed = if !self.subresource.is_empty() {
            from_live()
        } else if is_reset(from_new.as_ref()) {
            Managed::default()
        } else {
            match Managed::decode(from_new.as_ref()) {
                Ok(m) if !m.is_empty() => m,
                _ => from_live(),
            }
        };
        if let Some(m) = new["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        if managed.is_empty() && !creating {
            return;
        }
        self.record_update(&without_managed_fields(live), new, &mut managed, manager);
        self.write(new, &managed);
    }

    fn write(&self, obj: &mut Value, managed: &Managed) {
        match (managed.encode(), obj["metadata"].as_object_mut()) {
            (Some(entries), Some(m)) => {
                m.insert("managedFields".into(), entries);
            }
            (None, Some(m)) => {
                m.remove("managedFields");
            }
            _ => {}
        }
    }

    fn record_update(&self, live: &Value, new: &Value, managed: &mut Managed, manager: &str) {
        let fields = &mut managed.fields;
        merge::update(live, new, &self.api_version, fields, CURRENT_OPERATION, &self.ignored);
        self.strip(fields, CURRENT_OPERATION);
        if let Some(vs) = fields.remove(CURRENT_OPERATION) {
            let id = ManagerId {
                manager,
                apply: false,
                api_version: &self.api_version,
                subresource: &self.subresource,
            }
            .encode();
            let mut set = vs.set;
            if let Some(previous) = fields.get(&id) {
                set.extend(&previous.set);
            }
            let api_version = self.api_version.clone();
            fields.insert(id.clone(), VersionedSet { set, api_version, applied: false });
            managed.times.insert(id, Some(self.now.clone()));
        }
        cap_update_managers(managed);
    }

    fn strip(&self, fields: &mut merge::ManagedFields, id: &str) {
        if let Some(vs) = fields.get_mut(id) {
            vs.set.remove(stripped());
            if vs.set.is_empty() {
                fields.remove(id);
            }
        }
    }

    /// The applied configuration's type must be the endpoint's, and it may not carry
    /// managedFields.
    pub fn check_config(&self, config: &Value) -> Result<(), ApplyError> {
        let api_version = config["apiVersion"].as_str().unwrap_or_default();
        let kind = config["kind"].as_str().unwrap_or_default();
        if api_version != self.api_version || kind != self.kind {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            return Err(ApplyError::BadRequest(format!(
                "invalid object type: {group}/{version}, Kind={kind}"
            )));
        }
        if config["metadata"].get("managedFields").is_some_and(|m| !m.is_null()) {
            return Err(ApplyError::BadRequest("metadata.managedFields must be nil".into()));
        }
        Ok(())
    }

    /// Applies `config` for `manager` to `live` (the empty object when creating): the new
    /// object with its managedFields, or why not.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, ApplyError> {
        self.check_config(config)?;
        typed::check(config)?;
        let mut managed = Managed::decode(live["metadata"].get("managedFields"))?;
        let live = without_managed_fields(live);
        if managed.is_empty() {
            self.record_update(&self.empty_object(), &live, &mut managed, BEFORE_FIRST_APPLY);
        }
        let mut attempt = managed.clone();
        let mut new = match self.apply_once(&live, config, &mut attempt, manager, force) {
            Ok(new) => new,
            Err(conflicts) if manager == KUBECTL => {
                let Some(allowed) = self.allowed_by_last_applied(&live) else {
                    return Err(conflicts.into());
                };
                let rest = conflicts.without(&allowed);
                if !rest.0.is_empty() {
                    return Err(rest.into());
                }
                attempt = managed.clone();
                self.apply_once(&live, config, &mut attempt, manager, true)?
            }
            Err(conflicts) => return Err(conflicts.into()),
        };
        if manager == KUBECTL
            && live["metadata"]["annotations"][LAST_APPLIED].as_str().is_some_and(|s| !s.is_empty())
        {
            let mut applied = config.clone();
            if let Some(a) = applied["metadata"]["annotations"].as_object_mut() {
                a.remove(LAST_APPLIED);
            }
            new["metadata"]["annotations"][LAST_APPLIED] =
                json!(serde_json::to_string(&applied).unwrap_or_default());
        }
        self.write(&mut new, &attempt);
        Ok(new)
    }

    fn apply_once(
        &self,
        live: &Value,
        config: &Value,
        managed: &mut Managed,
        manager: &str,
        force: bool,
    ) -> Result<Value, Conflicts> {
        let id =
            ManagerId { manager, apply: true, api_version: "", subresource: &self.subresource }
                .encode();
        let fields = &mut managed.fields;
        let new = merge::apply(live, config, &self.api_version, fields, &id, force, &self.ignored)?;
        self.strip(fields, &id);
        if new != *live {
            managed.times.insert(id, Some(self.now.clone()));
        }
        Ok(new)
    }

    /// The fields the last-applied annotation set that still hold its values (upstream's
    /// `allowedConflictsFromLastApplied`); `None` without a usable annotation.
    fn allowed_by_last_applied(&self, live: &Value) -> Option<FieldSet> {
        let text =
            live["metadata"]["annotations"][LAST_APPLIED].as_str().filter(|s| !s.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last["apiVersion"].as_str() != Some(self.api_version.as_str()) {
            return None;
        }
        let c = typed::compare(&last, live);
        let mut allowed = typed::to_set(&last);
        for changed in [&c.modified, &c.added, &c.removed] {
            allowed.remove(changed);
        }
        Some(allowed)
    }
}

/// The manager of a write that names none: its User-Agent up to the first `/`, unprintable
/// characters dropped, cut at 128 bytes (upstream's `prefixFromUserAgent`).
pub fn prefix_from_user_agent(ua: &str) -> String {
    let mut out = String::new();
    for c in ua.split('/').next().unwrap_or_default().chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > 128 {
            break;
        }
        out.push(c);
    }
    out
}

/// At most [`MAX_UPDATE_MANAGERS`] Update entries: the oldest merged, per version, into
/// `ancient-changes` (upstream's `capManagers`).
fn cap_update_managers(managed: &mut Managed) {
    let mut updaters: Vec<(String, String)> = managed
        .fields
        .iter()
        .filter(|(_, vs)| !vs.applied)
        .map(|(id, _)| {
            let t = managed.times.get(id).cloned().flatten().unwrap_or_default();
            (t, id.clone())
        })
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort();
    let mut length = updaters.len();
    let mut first_of_version: std::collections::BTreeMap<String, String> = Default::default();
    for (time, id) in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(vs) = managed.fields.get(&id).cloned() else { continue };
        let bucket = ManagerId {
            manager: ANCIENT_CHANGES,
            apply: false,
            api_version: &vs.api_version,
            subresource: "",
        }
        .encode();
        match first_of_version.get(&vs.api_version) {
            Some(first) => {
                if !managed.fields.contains_key(&bucket)
                    && let Some(s) = managed.fields.remove(first)
                {
                    managed.fields.insert(bucket.clone(), s);
                }
                if let Some(b) = managed.fields.get_mut(&bucket) {
                    b.set.extend(&vs.set);
                }
                managed.fields.remove(&id);
                managed.times.insert(bucket, Some(time));
                length -= 1;
            }
            None => {
                first_of_version.insert(vs.api_version.clone(), id);
            }
        }
    }
    managed.times.retain(|id, _| managed.fields.contains_key(id));
}

#[cfg(test)]
mod tests;
