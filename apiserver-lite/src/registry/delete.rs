//! Deletion as upstream's generic store decides it (`BeforeDelete`,
//! `deletionFinalizersForGarbageCollection`, `markAsDeleting`): graceful deletion for pods
//! bound to a node, the garbage collector's `orphan` and `foregroundDeletion` finalizers from
//! `propagationPolicy` (or the legacy `orphanDependents`, or the kind's default policy), and an
//! object that waits for its finalizers to be removed. [`decide`] is pure: the stored object and
//! the options in, what to store out.

use api::validation::meta::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use api::validation::{ErrorList, FieldError, Path};
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::kinds::Deletion;
use crate::resources::ResourceType;

/// `propagationPolicy`: what happens to the object's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are kept, their owner reference removed (the `orphan` finalizer).
    Orphan,
    /// The object goes now; the garbage collector deletes the dependents after.
    Background,
    /// The object waits (`foregroundDeletion`) until its blocking dependents are gone.
    Foreground,
}

/// The options of a delete: grace period, preconditions, propagation, dry run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation: Option<Propagation>,
    /// The deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `dryRun: [All]` in the body (the query's `dryRun` is read by the caller).
    pub dry_run: bool,
}

/// The query parameters a delete may carry instead of a body.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeleteQuery<'a> {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<&'a str>,
    pub orphan_dependents: Option<bool>,
}

impl DeleteOptions {
    /// Reads and validates a `DeleteOptions` body and the query's parameters (which win).
    pub fn parse(body: Option<Value>, query: DeleteQuery<'_>) -> Result<Self, ApiError> {
        type Options = k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
        let body = match body {
            None => Options::default(),
            Some(v) => {
                api::decode::decode::<Options>(v)
                    .map_err(|e| {
                        ApiError::bad_request(format!("the DeleteOptions body cannot be read: {e}"))
                    })?
                    .value
            }
        };
        let policy = query.propagation_policy.map(str::to_string).or(body.propagation_policy);
        let orphan_dependents = query.orphan_dependents.or(body.orphan_dependents);
        let mut errs = ErrorList::default();
        let propagation = match policy.as_deref() {
            None => None,
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                errs.push(FieldError::not_supported(
                    &Path::root("propagationPolicy"),
                    other,
                    &["Foreground", "Background", "Orphan", "nil"],
                ));
                None
            }
        };
        if let (Some(p), Some(_)) = (&policy, orphan_dependents) {
            errs.push(FieldError::invalid(
                &Path::root("propagationPolicy"),
                p.as_str(),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let mut dry_run = false;
        for v in body.dry_run.iter().flatten() {
            if v == "All" {
                dry_run = true;
            } else {
                errs.push(FieldError::not_supported(&Path::root("dryRun"), v, &["All"]));
            }
        }
        if body.ignore_store_read_error_with_cluster_breaking_potential == Some(true) {
            errs.push(FieldError::forbidden(
                &Path::root("ignoreStoreReadErrorWithClusterBreakingPotential"),
                "this server stores no unreadable objects to delete this way",
            ));
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid_delete_options(&errs));
        }
        let preconditions = body.preconditions.unwrap_or_default();
        Ok(Self {
            grace_period_seconds: query.grace_period_seconds.or(body.grace_period_seconds),
            precondition_uid: preconditions.uid,
            precondition_resource_version: preconditions.resource_version,
            propagation,
            orphan_dependents,
            dry_run,
        })
    }

    /// Neither a policy nor the legacy flag was given.
    pub fn no_policy(&self) -> bool {
        self.propagation.is_none() && self.orphan_dependents.is_none()
    }
}

/// The warning upstream gives for deleting batch/v1 Jobs without a policy.
pub const JOB_ORPHAN_WARNING: &str = "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

/// What to do with the stored object.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Remove it from the store.
    Remove(Value),
    /// Store it as given: marked for deletion, waiting for its grace period or finalizers.
    Mark(Value),
    /// Leave it as it is (a graceful deletion already under way).
    Keep(Value),
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

/// `deletionFinalizersForGarbageCollection`: the finalizers the object should have for the
/// requested propagation (explicit options first, then a GC finalizer it already has, then the
/// kind's default).
fn gc_finalizers(r: &ResourceType, current: &[String], opts: &DeleteOptions) -> Vec<String> {
    let has = |f: &str| current.iter().any(|c| c == f);
    let existing = if has(ORPHAN_FINALIZER) {
        Some(Propagation::Orphan)
    } else if has(FOREGROUND_FINALIZER) {
        Some(Propagation::Foreground)
    } else {
        None
    };
    let wanted = match (opts.orphan_dependents, opts.propagation) {
        (Some(true), _) => Propagation::Orphan,
        (Some(false), _) => Propagation::Background,
        (None, Some(p)) => p,
        (None, None) => existing.unwrap_or(r.strategy.default_propagation),
    };
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
        .cloned()
        .collect();
    match wanted {
        Propagation::Orphan => out.push(ORPHAN_FINALIZER.into()),
        Propagation::Foreground => out.push(FOREGROUND_FINALIZER.into()),
        Propagation::Background => {}
    }
    out
}

fn timestamp(v: &Value) -> Option<jiff::Timestamp> {
    v.as_str().and_then(|t| t.parse().ok())
}

fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn bump_generation(obj: &mut Value) {
    if let Some(g) = obj["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
        obj["metadata"]["generation"] = json!(g + 1);
    }
}

/// Decides a delete of `obj` (preconditions already checked).
pub fn decide(r: &ResourceType, obj: Value, opts: &DeleteOptions, now: jiff::Timestamp) -> Outcome {
    let mut obj = obj;
    let requested = opts.grace_period_seconds.map(|g| if g < 0 { 1 } else { g });
    let deleting = timestamp(&obj["metadata"]["deletionTimestamp"]);
    let old_grace = obj["metadata"]["deletionGracePeriodSeconds"].as_i64();
    // BeforeDelete for the graceful kind: a period to wait, or a shorter one than before.
    let mut graceful_period = None;
    if let Deletion::Graceful(grace_period) = r.strategy.deletion {
        match (deleting, old_grace) {
            (Some(ts), Some(old)) if old > 0 => match requested {
                Some(new) if new < old => {
                    let when = ts - jiff::SignedDuration::from_secs(old)
                        + jiff::SignedDuration::from_secs(new);
                    obj["metadata"]["deletionTimestamp"] = json!(rfc3339(when));
                    obj["metadata"]["deletionGracePeriodSeconds"] = json!(new);
                    graceful_period = Some(new);
                }
                // A graceful deletion under way: nothing changes, its finalizers neither.
                _ => return Outcome::Keep(obj),
            },
            // Marked with no period left: handled as a plain deletion below.
            (Some(_), _) => {}
            (None, _) => {
                let period = grace_period(&obj, requested);
                let when = now + jiff::SignedDuration::from_secs(period);
                obj["metadata"]["deletionTimestamp"] = json!(rfc3339(when));
                obj["metadata"]["deletionGracePeriodSeconds"] = json!(period);
                bump_generation(&mut obj);
                graceful_period = Some(period);
            }
        }
    }
    let wanted = gc_finalizers(r, &finalizers(&obj), opts);
    let pending = !wanted.is_empty();
    if !wanted.is_empty() || obj["metadata"].get("finalizers").is_some() {
        obj["metadata"]["finalizers"] = json!(wanted);
    }
    if pending {
        if graceful_period.is_none() {
            // markAsDeleting: now, unless an earlier deletion set a sooner time; no grace.
            if deleting.is_none() {
                bump_generation(&mut obj);
            }
            if deleting.is_none_or(|d| d > now) {
                obj["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
            }
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
        return Outcome::Mark(obj);
    }
    match graceful_period {
        Some(p) if p > 0 => Outcome::Mark(obj),
        _ => Outcome::Remove(obj),
    }
}

/// `shouldDeleteDuringUpdate`: an update that leaves no finalizers on an object marked for
/// deletion with no grace period left removes it.
pub fn remove_on_update(old: &Value, new: &Value) -> bool {
    let no_finalizers = finalizers(new).is_empty();
    let marked = old["metadata"]["deletionTimestamp"].is_string();
    let no_grace = old["metadata"]["deletionGracePeriodSeconds"].as_i64().is_none_or(|g| g == 0);
    no_finalizers && marked && no_grace
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn now() -> jiff::Timestamp {
        "2024-01-01T00:00:00Z".parse().unwrap()
    }

    fn with(p: Propagation) -> DeleteOptions {
        DeleteOptions { propagation: Some(p), ..Default::default() }
    }

    fn deploy() -> Value {
        json!({"metadata": {"name": "web", "generation": 3}, "spec": {}})
    }

    #[test]
    fn propagation_picks_the_gc_finalizer_and_marks_or_removes() {
        let d = &crate::resources::DEPLOYMENTS;
        assert!(matches!(
            decide(d, deploy(), &with(Propagation::Background), now()),
            Outcome::Remove(_)
        ));
        assert!(
            matches!(decide(d, deploy(), &DeleteOptions::default(), now()), Outcome::Remove(_)),
            "apps/v1 defaults to background"
        );
        let Outcome::Mark(o) = decide(d, deploy(), &with(Propagation::Foreground), now()) else {
            panic!()
        };
        assert_eq!(o["metadata"]["finalizers"], json!(["foregroundDeletion"]));
        assert_eq!(o["metadata"]["deletionTimestamp"], "2024-01-01T00:00:00Z");
        assert_eq!(
            (
                o["metadata"]["deletionGracePeriodSeconds"].as_i64(),
                o["metadata"]["generation"].as_i64()
            ),
            (Some(0), Some(4))
        );
        // Asked again with another policy, the GC finalizer is swapped; the time stays.
        let later: jiff::Timestamp = "2024-01-01T00:05:00Z".parse().unwrap();
        let Outcome::Mark(o2) = decide(d, o.clone(), &with(Propagation::Orphan), later) else {
            panic!()
        };
        assert_eq!(o2["metadata"]["finalizers"], json!(["orphan"]));
        assert_eq!(
            (o2["metadata"]["deletionTimestamp"].as_str(), o2["metadata"]["generation"].as_i64()),
            (Some("2024-01-01T00:00:00Z"), Some(4))
        );
        // With no policy, the finalizer it has decides; background lets it go at once.
        let Outcome::Mark(o3) = decide(d, o2.clone(), &DeleteOptions::default(), later) else {
            panic!()
        };
        assert_eq!(o3["metadata"]["finalizers"], json!(["orphan"]));
        assert!(matches!(decide(d, o2, &with(Propagation::Background), later), Outcome::Remove(_)));
        // The legacy flag, and other finalizers kept beside the GC's.
        let mut held = deploy();
        held["metadata"]["finalizers"] = json!(["example.com/keep"]);
        let legacy = DeleteOptions { orphan_dependents: Some(true), ..Default::default() };
        let Outcome::Mark(o4) = decide(d, held.clone(), &legacy, now()) else { panic!() };
        assert_eq!(o4["metadata"]["finalizers"], json!(["example.com/keep", "orphan"]));
        let Outcome::Mark(o5) = decide(d, held, &DeleteOptions::default(), now()) else { panic!() };
        assert_eq!(o5["metadata"]["finalizers"], json!(["example.com/keep"]));
    }

    #[test]
    fn batch_v1_jobs_orphan_their_pods_by_default() {
        let jobs = &crate::resources::JOBS;
        let Outcome::Mark(o) = decide(jobs, deploy(), &DeleteOptions::default(), now()) else {
            panic!()
        };
        assert_eq!(o["metadata"]["finalizers"], json!(["orphan"]));
        assert!(matches!(
            decide(jobs, deploy(), &with(Propagation::Background), now()),
            Outcome::Remove(_)
        ));
        let cronjobs = &crate::resources::CRON_JOBS;
        assert!(matches!(
            decide(cronjobs, deploy(), &DeleteOptions::default(), now()),
            Outcome::Remove(_)
        ));
    }

    #[test]
    fn pods_on_a_node_wait_their_grace_period_which_may_only_shorten() {
        let pods = &crate::resources::PODS;
        let pod = json!({"metadata": {"name": "p", "generation": 1}, "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30}, "status": {"phase": "Running"}});
        let Outcome::Mark(marked) = decide(pods, pod.clone(), &DeleteOptions::default(), now())
        else {
            panic!()
        };
        assert_eq!(
            (
                marked["metadata"]["deletionTimestamp"].as_str(),
                marked["metadata"]["deletionGracePeriodSeconds"].as_i64()
            ),
            (Some("2024-01-01T00:00:30Z"), Some(30))
        );
        assert!(matches!(
            decide(pods, marked.clone(), &DeleteOptions::default(), now()),
            Outcome::Keep(_)
        ));
        let shorter = DeleteOptions { grace_period_seconds: Some(10), ..Default::default() };
        let Outcome::Mark(short) = decide(pods, marked.clone(), &shorter, now()) else { panic!() };
        assert_eq!(short["metadata"]["deletionTimestamp"], "2024-01-01T00:00:10Z");
        let confirm = DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
        assert!(matches!(decide(pods, marked, &confirm, now()), Outcome::Remove(_)));
        // A pod on no node has no one to wait for.
        let mut unbound = pod;
        unbound["spec"]["nodeName"] = Value::Null;
        assert!(matches!(
            decide(pods, unbound, &DeleteOptions::default(), now()),
            Outcome::Remove(_)
        ));
    }

    #[test]
    fn options_are_read_and_checked_as_upstream() {
        let o = DeleteOptions::parse(
            Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground", "gracePeriodSeconds": 5, "preconditions": {"uid": "u"}})),
            DeleteQuery::default(),
        )
        .unwrap();
        assert_eq!(
            (o.propagation, o.grace_period_seconds, o.precondition_uid.as_deref()),
            (Some(Propagation::Foreground), Some(5), Some("u"))
        );
        let q = DeleteQuery { propagation_policy: Some("Orphan"), ..Default::default() };
        assert_eq!(DeleteOptions::parse(None, q).unwrap().propagation, Some(Propagation::Orphan));
        let err = DeleteOptions::parse(
            Some(json!({"propagationPolicy": "Sideways"})),
            DeleteQuery::default(),
        )
        .unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (
                422,
                "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
            )
        );
        let both = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
        let err = DeleteOptions::parse(Some(both), DeleteQuery::default()).unwrap_err();
        assert!(
            err.message.ends_with("orphanDependents and deletionPropagation cannot be both set"),
            "{}",
            err.message
        );
        assert_eq!(
            DeleteOptions::parse(Some(json!({"gracePeriodSeconds": "x"})), DeleteQuery::default())
                .unwrap_err()
                .code,
            400
        );
    }
}
