//! Finding or creating the new ReplicaSet and keeping the revisions, scaling (proportionally
//! during a rollout), cleaning up old ReplicaSets beyond `revisionHistoryLimit`, the paused
//! condition, and the status counts: upstream's `sync.go`.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::util::{self, desired, replicas};
use super::{DeploymentController, SyncError};
use crate::client::Client;
use crate::events::{EventType, reference};
use crate::key::Key;

/// The new ReplicaSet (if any) and the old ones.
#[derive(Debug, Clone)]
pub struct Sets {
    pub new: Option<Arc<ReplicaSet>>,
    pub old: Vec<Arc<ReplicaSet>>,
}

impl Sets {
    pub fn all(&self) -> Vec<Arc<ReplicaSet>> {
        let mut all = self.old.clone();
        all.extend(self.new.clone());
        all
    }
}

/// The ReplicaSet whose template equals the deployment's (the oldest such, as upstream).
pub fn find_new(d: &Deployment, rss: &[Arc<ReplicaSet>]) -> Option<Arc<ReplicaSet>> {
    let t = util::template(d);
    let mut sorted = rss.to_vec();
    sorted.sort_by(|a, b| util::by_creation(a, b));
    sorted.into_iter().find(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|rt| util::equal_ignore_hash(rt, &t))
    })
}

/// Upstream's `NewRSNewReplicas`: what the new ReplicaSet may grow to now.
pub fn new_rs_new_replicas(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new_replicas: i32,
) -> Result<i32, String> {
    if util::is_recreate(d) {
        return Ok(desired(d));
    }
    let surge = util::scaled_value(
        d.spec
            .as_ref()
            .and_then(|s| s.strategy.as_ref())
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.max_surge.as_ref())
            .unwrap_or(&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0)),
        desired(d),
        true,
    )?;
    let current = util::replica_count(all);
    let max_total = desired(d) + surge;
    if current >= max_total {
        return Ok(new_replicas);
    }
    Ok(new_replicas + (max_total - current).min(desired(d) - new_replicas))
}

/// Upstream's `getProportion` for one ReplicaSet.
fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> Result<i32, String> {
    if replicas(rs) == 0 || to_add == 0 || to_add == added {
        return Ok(0);
    }
    let fraction = if desired(d) == 0 {
        -replicas(rs)
    } else {
        let deployment_replicas = desired(d) + util::max_surge(d)?;
        let annotated = util::max_replicas_annotation(rs)
            .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
        if annotated == 0 {
            0
        } else {
            let size =
                f64::from(replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
            // Go's math.Round: half away from zero.
            size.round() as i32 - replicas(rs)
        }
    };
    let allowed = to_add - added;
    Ok(if to_add > 0 { fraction.min(allowed) } else { fraction.max(allowed) })
}

/// One ReplicaSet's new size and the direction, for the `ScalingReplicaSet` event.
#[derive(Debug, Clone)]
pub struct Resize {
    pub rs: Arc<ReplicaSet>,
    pub size: i32,
    /// `up`, `down` or empty.
    pub op: &'static str,
}

/// Upstream's proportional scaling: the new size of each active ReplicaSet when the
/// deployment's replicas change mid-rollout, leftovers to the largest.
pub fn proportional_sizes(
    d: &Deployment,
    active: &[Arc<ReplicaSet>],
) -> Result<Vec<Resize>, String> {
    let mut rss = active.to_vec();
    let allowed = if desired(d) > 0 { desired(d) + util::max_surge(d)? } else { 0 };
    let to_add = allowed - util::replica_count(&rss);
    let op = match to_add {
        n if n > 0 => {
            rss.sort_by(|a, b| util::by_size_newer(a, b));
            "up"
        }
        n if n < 0 => {
            rss.sort_by(|a, b| util::by_size_older(a, b));
            "down"
        }
        _ => "",
    };
    let mut added = 0;
    let mut sizes = Vec::new();
    for rs in &rss {
        let p = if to_add != 0 { proportion(rs, d, to_add, added)? } else { 0 };
        added += p;
        sizes.push(replicas(rs) + p);
    }
    if let Some(first) = sizes.first_mut()
        && to_add != 0
    {
        *first = (*first + to_add - added).max(0);
    }
    Ok(rss.into_iter().zip(sizes).map(|(rs, size)| Resize { rs, size, op }).collect())
}

fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    util::desired_annotation(rs) == Some(desired(d))
        && replicas(rs) == desired(d)
        && rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0) == desired(d)
}

/// The only active ReplicaSet, or the newest when none is active; `None` with several active.
fn active_or_latest(sets: &Sets) -> Option<Arc<ReplicaSet>> {
    let mut old = sets.old.clone();
    old.sort_by(|a, b| util::by_creation(b, a));
    let mut all = old.clone();
    all.extend(sets.new.clone());
    let active = util::active(&all);
    match active.len() {
        0 => sets.new.clone().or_else(|| old.first().cloned()),
        1 => active.first().cloned(),
        _ => None,
    }
}

/// Upstream's status from the ReplicaSets.
pub fn calculate_status(
    d: &Deployment,
    sets: &Sets,
    now: jiff::Timestamp,
) -> Result<DeploymentStatus, String> {
    let all = sets.all();
    let available = util::available_count(&all);
    let unavailable = (util::replica_count(&all) - available).max(0);
    let old = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(util::actual_count(&all)),
        updated_replicas: Some(
            sets.new.as_ref().map_or(0, |n| util::actual_count(std::slice::from_ref(n))),
        ),
        ready_replicas: Some(util::ready_count(&all)),
        available_replicas: Some(available),
        unavailable_replicas: Some(unavailable),
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        terminating_replicas: None,
    };
    let c = if available >= desired(d) - util::max_unavailable(d)? {
        util::new_condition(
            util::AVAILABLE,
            "True",
            util::MIN_AVAILABLE,
            "Deployment has minimum availability.".into(),
            now,
        )
    } else {
        util::new_condition(
            util::AVAILABLE,
            "False",
            util::MIN_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
            now,
        )
    };
    util::set_condition(&mut status, c);
    Ok(status)
}

/// Stored and computed statuses compare equal when only absent-vs-zero differs.
pub fn same_status(a: &DeploymentStatus, b: &DeploymentStatus) -> bool {
    let norm = |s: &DeploymentStatus| {
        let mut s = s.clone();
        let z = |v: &mut Option<i32>| {
            if v.is_none() {
                *v = Some(0);
            }
        };
        z(&mut s.replicas);
        z(&mut s.updated_replicas);
        z(&mut s.ready_replicas);
        z(&mut s.available_replicas);
        z(&mut s.unavailable_replicas);
        if s.conditions.as_ref().is_some_and(Vec::is_empty) {
            s.conditions = None;
        }
        s
    };
    norm(a) == norm(b)
}

impl<C: Client<Deployment> + Client<ReplicaSet>> DeploymentController<C> {
    pub(crate) fn invalid(&self, d: &Deployment, message: String) -> SyncError {
        SyncError::Invalid { key: Key::of(d), message }
    }

    /// Upstream's `getAllReplicaSetsAndSyncRevision`.
    pub(crate) async fn sets(
        &self,
        d: &mut Deployment,
        rss: &[Arc<ReplicaSet>],
        create: bool,
    ) -> Result<Sets, SyncError> {
        let existing = find_new(d, rss);
        let old: Vec<Arc<ReplicaSet>> = rss
            .iter()
            .filter(|r| existing.as_ref().is_none_or(|n| n.metadata.uid != r.metadata.uid))
            .cloned()
            .collect();
        let new = self.new_replica_set(d, existing, &old, create).await?;
        Ok(Sets { new, old })
    }

    /// Upstream's `getNewReplicaSet`.
    async fn new_replica_set(
        &self,
        d: &mut Deployment,
        existing: Option<Arc<ReplicaSet>>,
        old: &[Arc<ReplicaSet>],
        create: bool,
    ) -> Result<Option<Arc<ReplicaSet>>, SyncError> {
        let new_revision = util::max_revision(old) + 1;
        let now = (self.now)();
        if let Some(existing) = existing {
            let mut copy = (*existing).clone();
            let annotations_changed =
                util::set_new_rs_annotations(d, &mut copy, new_revision, true)
                    .map_err(|m| self.invalid(d, m))?;
            let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let spec = copy.spec.get_or_insert_default();
            let min_ready_changed = spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0);
            if annotations_changed || min_ready_changed {
                spec.min_ready_seconds = min_ready;
                let updated = Client::<ReplicaSet>::replace(self.client.as_ref(), &copy).await?;
                return Ok(Some(Arc::new(updated)));
            }
            let rev = copy
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(util::REVISION))
                .cloned()
                .unwrap_or_default();
            let revised = set_deployment_revision(d, &rev);
            let mut needs_update = false;
            if util::progress_deadline(d).is_some()
                && util::condition(d.status.get_or_insert_default(), util::PROGRESSING).is_none()
            {
                let c = util::new_condition(
                    util::PROGRESSING,
                    "True",
                    util::FOUND_NEW_RS,
                    format!("Found new replica set {:?}", copy.name_any()),
                    now,
                );
                util::set_condition(d.status.get_or_insert_default(), c);
                needs_update = true;
            }
            self.write_revision_and_status(d, revised, needs_update).await?;
            return Ok(Some(Arc::new(copy)));
        }
        if !create {
            return Ok(None);
        }
        let template = util::template(d);
        let collisions = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = util::compute_hash(&template, collisions);
        let mut new_template = template.clone();
        new_template
            .metadata
            .get_or_insert_default()
            .labels
            .get_or_insert_default()
            .insert(util::POD_TEMPLATE_HASH.into(), hash.clone());
        let mut selector = d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_default()
            .insert(util::POD_TEMPLATE_HASH.into(), hash.clone());
        let name = format!("{}-{hash}", d.name_any());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: d.metadata.namespace.clone(),
                owner_references: Some(vec![crate::pods::controller_ref(
                    &d.metadata,
                    "apps/v1",
                    "Deployment",
                )]),
                labels: new_template.metadata.as_ref().and_then(|m| m.labels.clone()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
                selector,
                template: Some(new_template),
            }),
            status: None,
        };
        let mut all = old.to_vec();
        all.push(Arc::new(rs.clone()));
        let count = new_rs_new_replicas(d, &all, 0).map_err(|m| self.invalid(d, m))?;
        rs.spec.get_or_insert_default().replicas = Some(count);
        util::set_new_rs_annotations(d, &mut rs, new_revision, false)
            .map_err(|m| self.invalid(d, m))?;
        let (created, already) = match Client::<ReplicaSet>::create(self.client.as_ref(), &rs).await
        {
            Ok(c) => (Arc::new(c), false),
            Err(e) if e.is_already_exists() => {
                let found = self.replica_sets.get(&d.namespace().unwrap_or_default(), &name);
                let ours = found.as_ref().is_some_and(|f| {
                    crate::pods::controller_of(&f.metadata)
                        .is_some_and(|r| Some(&r.uid) == d.metadata.uid.as_ref())
                        && f.spec
                            .as_ref()
                            .and_then(|s| s.template.as_ref())
                            .is_some_and(|t| util::equal_ignore_hash(t, &template))
                });
                match found {
                    Some(f) if ours => (f, true),
                    // Made by an earlier sync and not seen yet (upstream's lister `Get` fails
                    // the same way): retried once the cache has it, never a collision — a
                    // collision's new hash would make a second new ReplicaSet and surge past
                    // maxSurge.
                    None => return Err(e.into()),
                    Some(_) => {
                        let st = d.status.get_or_insert_default();
                        st.collision_count = Some(st.collision_count.unwrap_or(0) + 1);
                        tracing::info!(deployment = %Key::of(d), "hash collision; bumping collisionCount");
                        self.write_status(d).await?;
                        return Err(e.into());
                    }
                }
            }
            Err(e) => {
                let msg = format!("Failed to create new replica set {name:?}: {e}");
                if util::progress_deadline(d).is_some() {
                    let c = util::new_condition(
                        util::PROGRESSING,
                        "False",
                        util::FAILED_RS_CREATE,
                        msg.clone(),
                        now,
                    );
                    util::set_condition(d.status.get_or_insert_default(), c);
                    let _ = self.write_status(d).await;
                }
                self.recorder.record(reference(d), EventType::Warning, util::FAILED_RS_CREATE, msg);
                return Err(e.into());
            }
        };
        if !already && count > 0 {
            self.recorder.record(
                reference(d),
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled up replica set {} from 0 to {count}", created.name_any()),
            );
        }
        let revised = set_deployment_revision(d, &new_revision.to_string());
        let mut needs_update = false;
        if !already && util::progress_deadline(d).is_some() {
            let c = util::new_condition(
                util::PROGRESSING,
                "True",
                util::NEW_RS_CREATED,
                format!("Created new replica set {:?}", created.name_any()),
                now,
            );
            util::set_condition(d.status.get_or_insert_default(), c);
            needs_update = true;
        }
        self.write_revision_and_status(d, revised, needs_update).await?;
        Ok(Some(created))
    }

    /// Upstream writes the deployment's revision annotation with its status update (its status
    /// strategy takes metadata changes); apiserver-lite's status subresource changes only the
    /// status, so a changed annotation is written by an update of the object first.
    async fn write_revision_and_status(
        &self,
        d: &mut Deployment,
        revised: bool,
        status: bool,
    ) -> Result<(), SyncError> {
        if revised {
            let pending = d.status.clone();
            let updated = Client::<Deployment>::replace(self.client.as_ref(), d).await?;
            *d = updated;
            d.status = pending;
        }
        if revised || status {
            self.write_status(d).await?;
        }
        Ok(())
    }

    /// Upstream's `isScalingEvent`: an active ReplicaSet's desired-replicas annotation differs
    /// from the deployment's replicas.
    pub(crate) async fn is_scaling_event(
        &self,
        d: &mut Deployment,
        rss: &[Arc<ReplicaSet>],
    ) -> Result<bool, SyncError> {
        let sets = self.sets(d, rss, false).await?;
        Ok(util::active(&sets.all())
            .iter()
            .any(|rs| util::desired_annotation(rs).is_some_and(|n| n != desired(d))))
    }

    /// Upstream's `sync`: scale, clean up when paused, write the status.
    pub(crate) async fn sync_scale(
        &self,
        d: &mut Deployment,
        rss: &[Arc<ReplicaSet>],
    ) -> Result<(), SyncError> {
        let sets = self.sets(d, rss, false).await?;
        self.scale(d, &sets).await?;
        let sets = self.sets(d, &self.claimed(d), false).await?;
        if d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false) {
            self.cleanup(d, &sets.old).await?;
        }
        self.sync_status(d, &sets).await
    }

    /// The deployment's ReplicaSets as the caches and our writes now show them.
    pub(crate) fn claimed(&self, d: &Deployment) -> Vec<Arc<ReplicaSet>> {
        let uid = d.metadata.uid.clone();
        let mut rss: Vec<_> = self
            .replica_sets
            .list(&d.namespace().unwrap_or_default())
            .into_iter()
            .filter(|r| {
                crate::pods::controller_of(&r.metadata)
                    .is_some_and(|c| Some(&c.uid) == uid.as_ref())
            })
            .collect();
        rss.sort_by(|a, b| util::by_creation(a, b));
        rss
    }

    async fn scale(&self, d: &Deployment, sets: &Sets) -> Result<(), SyncError> {
        if let Some(rs) = active_or_latest(sets) {
            if replicas(&rs) != desired(d) {
                self.scale_and_record(&rs, desired(d), d).await?;
            }
            return Ok(());
        }
        if is_saturated(d, sets.new.as_deref()) {
            for old in util::active(&sets.old) {
                self.scale_and_record(&old, 0, d).await?;
            }
            return Ok(());
        }
        if !util::is_recreate(d) {
            let sizes = proportional_sizes(d, &util::active(&sets.all()))
                .map_err(|m| self.invalid(d, m))?;
            for r in sizes {
                self.scale_rs(&r.rs, r.size, d, r.op).await?;
            }
        }
        Ok(())
    }

    /// Upstream's `scaleReplicaSetAndRecordEvent`.
    pub(crate) async fn scale_and_record(
        &self,
        rs: &ReplicaSet,
        to: i32,
        d: &Deployment,
    ) -> Result<(bool, Arc<ReplicaSet>), SyncError> {
        if replicas(rs) == to {
            return Ok((false, Arc::new(rs.clone())));
        }
        let op = if replicas(rs) < to { "up" } else { "down" };
        self.scale_rs(rs, to, d, op).await
    }

    /// Upstream's `scaleReplicaSet`: the size and the replica annotations, one update.
    pub(crate) async fn scale_rs(
        &self,
        rs: &ReplicaSet,
        to: i32,
        d: &Deployment,
        op: &str,
    ) -> Result<(bool, Arc<ReplicaSet>), SyncError> {
        let max = desired(d) + util::max_surge(d).map_err(|m| self.invalid(d, m))?;
        let size_changed = replicas(rs) != to;
        if !size_changed && !util::replicas_annotations_need_update(rs, desired(d), max) {
            return Ok((false, Arc::new(rs.clone())));
        }
        let from = replicas(rs);
        let mut copy = rs.clone();
        copy.spec.get_or_insert_default().replicas = Some(to);
        util::set_replicas_annotations(&mut copy, desired(d), max);
        let updated = Client::<ReplicaSet>::replace(self.client.as_ref(), &copy).await?;
        if size_changed {
            self.recorder.record(
                reference(d),
                EventType::Normal,
                "ScalingReplicaSet",
                format!("Scaled {op} replica set {} from {from} to {to}", updated.name_any()),
            );
        }
        Ok((size_changed, Arc::new(updated)))
    }

    /// Upstream's `cleanupDeployment`: delete the oldest idle ReplicaSets beyond
    /// `revisionHistoryLimit`.
    pub(crate) async fn cleanup(
        &self,
        d: &Deployment,
        old: &[Arc<ReplicaSet>],
    ) -> Result<(), SyncError> {
        let Some(limit) = d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
            return Ok(());
        };
        let mut cleanable: Vec<_> =
            old.iter().filter(|r| r.metadata.deletion_timestamp.is_none()).cloned().collect();
        let diff = i64::try_from(cleanable.len()).unwrap_or(0) - i64::from(limit);
        if diff <= 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| util::by_revision(a, b));
        for rs in cleanable.iter().take(usize::try_from(diff).unwrap_or(0)) {
            let st = rs.status.clone().unwrap_or_default();
            if st.replicas != 0
                || replicas(rs) != 0
                || rs.metadata.generation > st.observed_generation
            {
                continue;
            }
            tracing::debug!(replicaset = %rs.name_any(), "deleting an old ReplicaSet beyond revisionHistoryLimit");
            match Client::<ReplicaSet>::delete(
                self.client.as_ref(),
                &rs.namespace().unwrap_or_default(),
                &rs.name_any(),
                rs.metadata.uid.as_deref(),
            )
            .await
            {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Upstream's `syncDeploymentStatus`: write the counts when they changed.
    pub(crate) async fn sync_status(
        &self,
        d: &mut Deployment,
        sets: &Sets,
    ) -> Result<(), SyncError> {
        let status = calculate_status(d, sets, (self.now)()).map_err(|m| self.invalid(d, m))?;
        if same_status(&d.status.clone().unwrap_or_default(), &status) {
            return Ok(());
        }
        d.status = Some(status);
        self.write_status(d).await
    }

    pub(crate) async fn sync_status_only(
        &self,
        d: &mut Deployment,
        rss: &[Arc<ReplicaSet>],
    ) -> Result<(), SyncError> {
        let sets = self.sets(d, rss, false).await?;
        self.sync_status(d, &sets).await
    }

    /// Upstream's `checkPausedConditions`.
    pub(crate) async fn check_paused_conditions(
        &self,
        d: &mut Deployment,
    ) -> Result<(), SyncError> {
        if util::progress_deadline(d).is_none() {
            return Ok(());
        }
        let status = d.status.clone().unwrap_or_default();
        let cond = util::condition(&status, util::PROGRESSING);
        if cond.is_some_and(|c| c.reason.as_deref() == Some(util::TIMED_OUT)) {
            return Ok(());
        }
        let paused_cond = cond.is_some_and(|c| c.reason.as_deref() == Some(util::PAUSED));
        let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let now = (self.now)();
        let c = match (paused, paused_cond) {
            (true, false) => util::new_condition(
                util::PROGRESSING,
                "Unknown",
                util::PAUSED,
                "Deployment is paused".into(),
                now,
            ),
            (false, true) => util::new_condition(
                util::PROGRESSING,
                "Unknown",
                util::RESUMED,
                "Deployment is resumed".into(),
                now,
            ),
            _ => return Ok(()),
        };
        util::set_condition(d.status.get_or_insert_default(), c);
        self.write_status(d).await
    }
}

/// Sets the deployment's revision annotation; whether it changed.
fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let anns = d.metadata.annotations.get_or_insert_default();
    if anns.get(util::REVISION).map(String::as_str) == Some(revision) {
        return false;
    }
    anns.insert(util::REVISION.into(), revision.to_string());
    true
}
