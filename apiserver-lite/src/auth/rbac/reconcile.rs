//! The bootstrap policy reconciled at start, as upstream's `rbac/bootstrap-roles` post-start
//! hook: each [`super::policy`] object is created when absent; an existing one keeps what it
//! has and gets what it lacks (labels, annotations, rules and aggregation selectors for roles;
//! subjects for bindings); a binding whose role reference changed is made again; and an object
//! annotated `rbac.authorization.kubernetes.io/autoupdate: "false"` is left alone. The
//! decisions are pure ([`role`], [`binding`]); [`bootstrap`] carries them out.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::policy::{self, AUTOUPDATE};
use super::rule;
use crate::errors::ApiError;
use crate::objects::FieldValidation;
use crate::registry::{DeleteOptions, Registry, WriteOptions};
use crate::resources::{self, ResourceType};

/// What reconciling one object calls for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action<T> {
    Create(T),
    Update(T),
    /// Delete and create (a binding's role reference cannot change in place).
    Recreate(T),
    Keep,
}

fn autoupdate_off(meta: &ObjectMeta) -> bool {
    meta.annotations.as_ref().and_then(|a| a.get(AUTOUPDATE)).is_some_and(|v| v == "false")
}

/// `existing`'s map with `expected`'s keys it lacks (existing values win).
fn merged(
    existing: &Option<BTreeMap<String, String>>,
    expected: &Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let mut out = existing.clone().unwrap_or_default();
    for (k, v) in expected.iter().flatten() {
        out.entry(k.clone()).or_insert_with(|| v.clone());
    }
    (!out.is_empty() || existing.is_some()).then_some(out)
}

fn merge_meta(existing: &ObjectMeta, expected: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        labels: merged(&existing.labels, &expected.labels),
        annotations: merged(&existing.annotations, &expected.annotations),
        ..existing.clone()
    }
}

/// What a bootstrap cluster role needs.
pub fn role(existing: Option<&ClusterRole>, expected: &ClusterRole) -> Action<ClusterRole> {
    let Some(existing) = existing else { return Action::Create(expected.clone()) };
    if autoupdate_off(&existing.metadata) {
        return Action::Keep;
    }
    let mut out = existing.clone();
    out.metadata = merge_meta(&existing.metadata, &expected.metadata);
    let missing = rule::covers(
        existing.rules.as_deref().unwrap_or_default(),
        expected.rules.as_deref().unwrap_or_default(),
    );
    if !missing.is_empty() {
        out.rules.get_or_insert_with(Vec::new).extend(missing);
    }
    if let Some(want) = &expected.aggregation_rule {
        let have = out.aggregation_rule.get_or_insert_with(Default::default);
        let selectors = have.cluster_role_selectors.get_or_insert_with(Vec::new);
        for s in want.cluster_role_selectors.iter().flatten() {
            if !selectors.contains(s) {
                selectors.push(s.clone());
            }
        }
    }
    if &out == existing { Action::Keep } else { Action::Update(out) }
}

/// What a bootstrap cluster role binding needs.
pub fn binding(
    existing: Option<&ClusterRoleBinding>,
    expected: &ClusterRoleBinding,
) -> Action<ClusterRoleBinding> {
    let Some(existing) = existing else { return Action::Create(expected.clone()) };
    if autoupdate_off(&existing.metadata) {
        return Action::Keep;
    }
    let mut out = existing.clone();
    out.metadata = merge_meta(&existing.metadata, &expected.metadata);
    let subjects = out.subjects.get_or_insert_with(Vec::new);
    for s in expected.subjects.iter().flatten() {
        if !subjects.contains(s) {
            subjects.push(s.clone());
        }
    }
    if existing.role_ref != expected.role_ref {
        out.role_ref = expected.role_ref.clone();
        return Action::Recreate(out);
    }
    if &out == existing { Action::Keep } else { Action::Update(out) }
}

const WRITE: WriteOptions = WriteOptions { dry_run: false, validation: FieldValidation::Ignore };

/// How often reconciling one object starts again after another apiserver sharing the store
/// changed it meanwhile (both reconciling at start).
const ATTEMPTS: usize = 5;

async fn carry_out<T: Serialize + DeserializeOwned + Clone>(
    registry: &Registry,
    r: &ResourceType,
    name: &str,
    decide: impl Fn(Option<&T>) -> Action<T>,
) -> Result<(), ApiError> {
    let mut attempt = 0;
    loop {
        match carry_out_once(registry, r, name, &decide).await {
            // Created, changed or removed meanwhile by another apiserver: look again.
            Err(e) if matches!(e.code, 404 | 409) && attempt + 1 < ATTEMPTS => attempt += 1,
            done => return done,
        }
    }
}

async fn carry_out_once<T: Serialize + DeserializeOwned + Clone>(
    registry: &Registry,
    r: &ResourceType,
    name: &str,
    decide: &impl Fn(Option<&T>) -> Action<T>,
) -> Result<(), ApiError> {
    let existing: Option<T> = match registry.get(r, None, name) {
        Ok(v) => Some(
            serde_json::from_value(v)
                .map_err(|e| ApiError::internal(format!("stored {} {name}: {e}", r.kind)))?,
        ),
        Err(e) if e.code == 404 => None,
        Err(e) => return Err(e),
    };
    let value = |t: &T| serde_json::to_value(t).map_err(|e| ApiError::internal(e.to_string()));
    match decide(existing.as_ref()) {
        Action::Keep => {}
        Action::Create(t) => {
            tracing::info!(kind = r.kind, name, "creating the bootstrap object");
            registry.create(r, None, value(&t)?, WRITE).await?;
        }
        Action::Update(t) => {
            tracing::info!(kind = r.kind, name, "adding what the bootstrap object lacks");
            let mut body = value(&t)?;
            if let Some(m) = body["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            registry.update_with(r, None, name, None, WRITE, move |_| Ok(body.clone())).await?;
        }
        Action::Recreate(t) => {
            tracing::info!(
                kind = r.kind,
                name,
                "making the bootstrap binding again (its role changed)"
            );
            registry.delete(r, None, name, &DeleteOptions::default(), false).await?;
            let mut body = value(&t)?;
            if let Some(m) = body["metadata"].as_object_mut() {
                m.retain(|k, _| matches!(k.as_str(), "name" | "labels" | "annotations"));
            }
            registry.create(r, None, body, WRITE).await?;
        }
    }
    Ok(())
}

/// Reconciles every bootstrap cluster role and binding against the store.
pub async fn bootstrap(registry: &Registry) -> Result<(), ApiError> {
    let roles = &resources::CLUSTER_ROLES;
    for expected in policy::cluster_roles() {
        let name = expected.metadata.name.clone().unwrap_or_default();
        carry_out(registry, roles, &name, |e| role(e, &expected)).await?;
    }
    let bindings = &resources::CLUSTER_ROLE_BINDINGS;
    for expected in policy::cluster_role_bindings() {
        let name = expected.metadata.name.clone().unwrap_or_default();
        carry_out(registry, bindings, &name, |e| binding(e, &expected)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
