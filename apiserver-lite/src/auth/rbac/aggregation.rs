//! ClusterRole aggregation, as upstream's clusterrole-aggregation controller: a ClusterRole
//! with an `aggregationRule` has as its rules those of every other ClusterRole one of its
//! selectors matches (selectors in order, roles by name, each rule once). Run in apiserver-lite
//! beside the index it reads, so an aggregated role is current as soon as the index is, with no
//! controller-manager needed: the computation is pure ([`pending`]), the writes go through the
//! registry like any client's.

use api::validation::selector::Selector;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use serde_json::json;

use super::{Index, Rbac};
use crate::objects::FieldValidation;
use crate::registry::{Registry, WriteOptions};
use crate::resources;

/// The rules `role` should have, if it aggregates; `None` when it has no aggregation rule.
pub fn aggregated_rules(index: &Index, role: &ClusterRole) -> Option<Vec<PolicyRule>> {
    let rule = role.aggregation_rule.as_ref()?;
    let me = role.metadata.name.as_deref().unwrap_or_default();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for sel in rule.cluster_role_selectors.iter().flatten() {
        let selector = match Selector::from_label_selector(Some(sel)) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(role = me, error = %e, "aggregationRule: a selector does not parse");
                continue;
            }
        };
        let empty = Default::default();
        for other in index.cluster_roles() {
            let name = other.metadata.name.as_deref().unwrap_or_default();
            if name == me || !selector.matches(other.metadata.labels.as_ref().unwrap_or(&empty)) {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(rules)
}

/// The aggregated roles whose stored rules differ from what they aggregate, with the rules
/// they should have.
pub fn pending(index: &Index) -> Vec<(String, Vec<PolicyRule>)> {
    index
        .cluster_roles()
        .filter_map(|role| {
            let want = aggregated_rules(index, role)?;
            let have = role.rules.as_deref().unwrap_or_default();
            (have != want.as_slice())
                .then(|| (role.metadata.name.clone().unwrap_or_default(), want))
        })
        .collect()
}

/// Writes the aggregated roles that are behind; returns how many were written.
pub async fn run_once(rbac: &Rbac, registry: &Registry) -> usize {
    let todo = pending(&rbac.read());
    let cluster_roles = &resources::CLUSTER_ROLES;
    let w = WriteOptions { dry_run: false, validation: FieldValidation::Ignore };
    let mut written = 0;
    for (name, rules) in todo {
        let result = registry
            .update_with(cluster_roles, None, &name, None, w, |old| {
                let mut new = old.clone();
                new["rules"] = json!(rules);
                Ok(new)
            })
            .await;
        match result {
            Ok(_) => written += 1,
            Err(e) => tracing::warn!(role = name, error = %e, "aggregating a cluster role"),
        }
    }
    written
}

/// At start, before serving: aggregates until nothing is behind (admin aggregates edit, which
/// aggregates view: a few rounds), re-reading the store between rounds.
pub async fn settle(rbac: &Rbac, registry: &Registry) {
    for _ in 0..8 {
        rbac.load(&registry.store);
        if run_once(rbac, registry).await == 0 {
            return;
        }
    }
    rbac.load(&registry.store);
}
