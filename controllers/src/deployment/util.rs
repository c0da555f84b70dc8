//! What the Deployment controller computes without side effects, as upstream's
//! `deployment/util`: the `pod-template-hash`, template equality ignoring it, revisions and the
//! revision annotations, `maxSurge`/`maxUnavailable` resolved against the replicas (surge
//! rounded up, unavailable down, both 0 → unavailable 1), replica counts over ReplicaSets, the
//! orderings, and the conditions.
//!
//! The hash: upstream's `ComputeHash` is FNV-32a over Go's `%#v` dump (go-spew) of the
//! `PodTemplateSpec` struct, plus the collision count, its decimal digits mapped through
//! `rand.SafeEncodeString`. Reproducing go-spew's dump byte for byte would mean mirroring every
//! Go field of every type in the pod spec (including `resource.Quantity`'s internals), and no Go
//! toolchain is here to check it against, so ours is FNV-32a over the template's JSON (field
//! order fixed by the types, map keys sorted, empty values dropped) plus the same 8-byte collision count, rendered
//! the same way: the same alphabet (`bcdfghjklmnpqrstvwxz2456789`) and length (up to 10
//! characters), stable across restarts, but not the value upstream would compute for the same
//! template. Nothing depends on the value itself: ReplicaSets are matched to the template by
//! [`equal_ignore_hash`], as upstream does.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// Upstream's `maxRevHistoryLengthInChars`.
pub const MAX_REVISION_HISTORY_CHARS: usize = 2000;

pub const PROGRESSING: &str = "Progressing";
pub const AVAILABLE: &str = "Available";
pub const REPLICA_FAILURE: &str = "ReplicaFailure";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// `rand.SafeEncodeString`'s alphabet: no vowels, no look-alikes.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn fnv32a(bytes: &[u8], mut h: u32) -> u32 {
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Upstream's `rand.SafeEncodeString`.
pub fn safe_encode(s: &str) -> String {
    s.bytes().map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()])).collect()
}

/// The `pod-template-hash` of a template (see the module docs for how it relates to
/// upstream's).
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(&canonical(template)).unwrap_or_default();
    let mut h = fnv32a(&json, 0x811c_9dc5);
    if let Some(c) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&u32::from_ne_bytes(c.to_ne_bytes()).to_le_bytes());
        h = fnv32a(&bytes, h);
    }
    safe_encode(&h.to_string())
}

/// The template as JSON with nulls, empty objects and empty lists removed: Go's typed structs
/// make an absent and an empty value the same (`resources: {}` from kubectl is no resources),
/// and upstream's semantic equality treats empty and nil lists and maps alike.
fn canonical(t: &PodTemplateSpec) -> serde_json::Value {
    fn prune(v: &mut serde_json::Value) -> bool {
        match v {
            serde_json::Value::Null => false,
            serde_json::Value::Object(m) => {
                m.retain(|_, v| prune(v));
                !m.is_empty()
            }
            serde_json::Value::Array(a) => {
                for v in a.iter_mut() {
                    prune(v);
                }
                !a.is_empty()
            }
            _ => true,
        }
    }
    let mut v = serde_json::to_value(t).unwrap_or_default();
    prune(&mut v);
    v
}

/// Whether two templates are equal once `pod-template-hash` is removed from both labels.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.remove(POD_TEMPLATE_HASH);
        }
        canonical(&t)
    };
    strip(a) == strip(b)
}

pub fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default()
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The revision annotation as a number (0 when absent or not a number).
pub fn revision(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, REVISION).and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn max_revision(rss: &[Arc<ReplicaSet>]) -> i64 {
    rss.iter().map(|r| revision(r)).max().unwrap_or(0)
}

/// A `maxSurge`/`maxUnavailable` value scaled to `total` (upstream's
/// `GetScaledValueFromIntOrPercent`).
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid type: string is not a percentage ({s:?})"))?;
            let n = pct * i64::from(total);
            let v = if round_up { (n + 99).div_euclid(100) } else { n.div_euclid(100) };
            i32::try_from(v).map_err(|_| format!("{s} of {total} is out of range"))
        }
    }
}

fn is_rolling(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate"
}

pub fn is_recreate(d: &Deployment) -> bool {
    !is_rolling(d)
}

/// Upstream's `ResolveFenceposts`: (surge, unavailable) for the deployment's replicas.
pub fn fenceposts(d: &Deployment) -> Result<(i32, i32), String> {
    let ru =
        d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
    let zero = IntOrString::Int(0);
    let n = desired(d);
    let surge = scaled_value(ru.and_then(|r| r.max_surge.as_ref()).unwrap_or(&zero), n, true)?;
    let mut unavailable =
        scaled_value(ru.and_then(|r| r.max_unavailable.as_ref()).unwrap_or(&zero), n, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

pub fn max_surge(d: &Deployment) -> Result<i32, String> {
    if !is_rolling(d) {
        return Ok(0);
    }
    Ok(fenceposts(d)?.0)
}

pub fn max_unavailable(d: &Deployment) -> Result<i32, String> {
    if !is_rolling(d) || desired(d) == 0 {
        return Ok(0);
    }
    Ok(fenceposts(d)?.1.min(desired(d)))
}

/// Sum of `spec.replicas`.
pub fn replica_count(rss: &[Arc<ReplicaSet>]) -> i32 {
    rss.iter().map(|r| replicas(r)).sum()
}

fn status_count(
    rss: &[Arc<ReplicaSet>],
    f: impl Fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> i32,
) -> i32 {
    rss.iter().map(|r| r.status.as_ref().map_or(0, &f)).sum()
}

/// Sum of `status.replicas`.
pub fn actual_count(rss: &[Arc<ReplicaSet>]) -> i32 {
    status_count(rss, |s| s.replicas)
}

pub fn ready_count(rss: &[Arc<ReplicaSet>]) -> i32 {
    status_count(rss, |s| s.ready_replicas.unwrap_or(0))
}

pub fn available_count(rss: &[Arc<ReplicaSet>]) -> i32 {
    status_count(rss, |s| s.available_replicas.unwrap_or(0))
}

pub fn active(rss: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    rss.iter().filter(|r| replicas(r) > 0).cloned().collect()
}

/// Oldest first, ties by name (`ReplicaSetsByCreationTimestamp`).
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Larger first, ties older first (`ReplicaSetsBySizeOlder`).
pub fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replicas(b).cmp(&replicas(a)).then_with(|| by_creation(a, b))
}

/// Larger first, ties newer first (`ReplicaSetsBySizeNewer`).
pub fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    replicas(b).cmp(&replicas(a)).then_with(|| by_creation(b, a))
}

/// Lower revision first, ties by creation (`ReplicaSetsByRevision`).
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    revision(a).cmp(&revision(b)).then_with(|| by_creation(a, b))
}

fn skip_copy(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | ROLLBACK_TO
    )
}

/// Upstream's `SetNewReplicaSetAnnotations`: copies the deployment's annotations, raises the
/// revision (keeping the former ones in `revision-history` when an old ReplicaSet becomes new
/// again: a rollback), and on creation sets the replica annotations. Whether anything changed.
pub fn set_new_rs_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> Result<bool, String> {
    let mut changed = false;
    let anns = rs.metadata.annotations.get_or_insert_default();
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy(k) || anns.get(k) == Some(v) {
            continue;
        }
        anns.insert(k.clone(), v.clone());
        changed = true;
    }
    let old = anns.get(REVISION).cloned();
    let old_revision: i64 = match old.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse() {
            Ok(n) => n,
            Err(_) => return Ok(false),
        },
    };
    if old_revision < new_revision {
        anns.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            let history = anns.get(REVISION_HISTORY).cloned().unwrap_or_default();
            if history.is_empty() {
                anns.insert(REVISION_HISTORY.into(), old);
            } else {
                let mut revisions: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                let mut start = 0;
                while total > MAX_REVISION_HISTORY_CHARS && start < revisions.len() {
                    total -= revisions[start].len() + 1;
                    start += 1;
                }
                if total <= MAX_REVISION_HISTORY_CHARS {
                    revisions = revisions.split_off(start);
                    revisions.push(&old);
                    anns.insert(REVISION_HISTORY.into(), revisions.join(","));
                }
            }
        }
    }
    if !exists {
        let n = desired(d);
        changed |= set_replicas_annotations(rs, n, n + max_surge(d)?);
    }
    Ok(changed)
}

/// Sets `desired-replicas` and `max-replicas`; whether they changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let anns = rs.metadata.annotations.get_or_insert_default();
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        if anns.get(k) != Some(&v.to_string()) {
            anns.insert(k.into(), v.to_string());
            changed = true;
        }
    }
    changed
}

pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    annotation(&rs.metadata, DESIRED_REPLICAS) != Some(desired.to_string().as_str())
        || annotation(&rs.metadata, MAX_REPLICAS) != Some(max.to_string().as_str())
}

pub fn desired_annotation(rs: &ReplicaSet) -> Option<i32> {
    annotation(&rs.metadata, DESIRED_REPLICAS)?.parse().ok()
}

pub fn max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    annotation(&rs.metadata, MAX_REPLICAS)?.parse().ok()
}

pub fn condition<'a>(s: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.iter().flatten().find(|c| c.type_ == type_)
}

pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: jiff::Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Upstream's `SetDeploymentCondition`: the same status and reason changes nothing; the same
/// status keeps its transition time.
pub fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = condition(s, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &c.type_);
    s.conditions.get_or_insert_default().push(c);
}

pub fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
    }
}

pub fn progress_deadline(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).filter(|s| *s != i32::MAX)
}

/// Every replica updated, present and available, and the spec observed.
pub fn complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let n = desired(d);
    s.updated_replicas.unwrap_or(0) == n
        && s.replicas.unwrap_or(0) == n
        && s.available_replicas.unwrap_or(0) == n
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// Any progress since the stored status.
pub fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let z = |v: Option<i32>| v.unwrap_or(0);
    let old_old = z(old.replicas) - z(old.updated_replicas);
    let new_old = z(new.replicas) - z(new.updated_replicas);
    z(new.updated_replicas) > z(old.updated_replicas)
        || new_old < old_old
        || z(new.ready_replicas) > z(old.ready_replicas)
        || z(new.available_replicas) > z(old.available_replicas)
}

/// No progress reported for `progressDeadlineSeconds`.
pub fn timed_out(d: &Deployment, new: &DeploymentStatus, now: jiff::Timestamp) -> bool {
    let Some(deadline) = progress_deadline(d) else { return false };
    let Some(c) = condition(new, PROGRESSING) else { return false };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .and_then(|t| {
                t.0.checked_add(jiff::SignedDuration::from_secs(i64::from(deadline))).ok()
            })
            .is_some_and(|at| at < now),
    }
}

#[cfg(test)]
mod tests;
