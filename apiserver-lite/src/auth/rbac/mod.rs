//! RBAC (`--authorization-mode=RBAC`), as upstream's `plugin/pkg/auth/authorizer/rbac`:
//!
//! - this file: [`Rbac`], the decision and the rule listing over the [`index`], kept current
//!   from the store by [`Rbac::run`];
//! - [`rule`]: one rule against one request, and rule sets against each other (coverage);
//! - [`index`]: roles and bindings in memory, and whom a binding names;
//! - [`aggregation`]: ClusterRoles with an `aggregationRule` get the rules of the ClusterRoles
//!   their selectors match (upstream's clusterrole-aggregation controller, run here, beside the
//!   index it reads);
//! - [`escalation`]: a role may only be written, and a role only bound, by someone who holds
//!   what it grants (or has `escalate`/`bind`);
//! - [`policy`] and [`reconcile`]: the bootstrap roles and bindings, reconciled at start.

pub mod aggregation;
pub mod escalation;
pub mod index;
pub mod policy;
pub mod reconcile;
pub mod rule;

use std::sync::{Arc, PoisonError, RwLock};

use k8s_openapi::api::rbac::v1::PolicyRule;
use tokio_util::sync::CancellationToken;

use super::User;
use super::authorizer::{Attributes, Decision};
use crate::registry::Registry;
use crate::storage::memory::WatchEnd;
use crate::storage::{Revision, Store};
pub use index::Index;

/// The RBAC authorizer: decisions over an index of the stored roles and bindings.
#[derive(Debug, Default)]
pub struct Rbac {
    index: RwLock<Index>,
}

impl Rbac {
    /// Over a fixed index (tests, benchmarks).
    pub fn with_index(index: Index) -> Self {
        Self { index: RwLock::new(index) }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the index as it is now.
    pub fn snapshot(&self) -> Index {
        self.read().clone()
    }

    /// Upstream's RBAC decision: allowed by the first rule of a binding that names the user;
    /// otherwise no opinion, with the bindings whose roles are missing as the reason.
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        let namespace = match &a.target {
            super::authorizer::Target::Resource(r) => r.namespace,
            super::authorizer::Target::Path(_) => "",
        };
        let index = self.read();
        let mut allowed_by = None;
        let mut errors = Vec::new();
        index.visit_rules_for(a.user, namespace, |found| match found {
            Ok((binding, subject, rule)) => {
                if rule::allows(rule, a) {
                    allowed_by = Some(binding.describe(subject));
                    return false;
                }
                true
            }
            Err(e) => {
                errors.push(e.to_string());
                true
            }
        });
        match allowed_by {
            Some(by) => Decision::Allow(format!("RBAC: allowed by {by}")),
            None if errors.is_empty() => Decision::NoOpinion(String::new()),
            None if errors.len() == 1 => Decision::NoOpinion(format!("RBAC: {}", errors[0])),
            None => Decision::NoOpinion(format!("RBAC: [{}]", errors.join(", "))),
        }
    }

    /// Upstream's `RulesFor`: the rules `user` holds in `namespace` (cluster-wide ones
    /// included), and the errors of bindings whose roles are missing.
    pub fn rules_for(&self, user: &User, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let (mut rules, mut errors) = (Vec::new(), Vec::new());
        self.read().visit_rules_for(user, namespace, |found| {
            match found {
                Ok((_, _, rule)) => rules.push(rule.clone()),
                Err(e) => errors.push(e.to_string()),
            }
            true
        });
        (rules, errors)
    }

    /// The rules a binding's `roleRef` grants (`ns`: the binding's namespace).
    pub fn role_ref_rules(
        &self,
        r: &k8s_openapi::api::rbac::v1::RoleRef,
        ns: Option<&str>,
    ) -> Result<Vec<PolicyRule>, index::RoleRefError> {
        self.read().role_ref_rules(r, ns).map(<[PolicyRule]>::to_vec)
    }

    /// Rebuilds the index from the store; returns the revision it reflects.
    pub fn load(&self, store: &Store) -> Revision {
        let (items, revision) = store.list(index::PREFIX);
        let mut index = Index::default();
        for (key, stored) in items {
            index.apply(&key, Some(&stored.value));
        }
        *self.write() = index;
        revision
    }

    /// Keeps the index current from a watch on the RBAC keys (re-listing when the watch falls
    /// behind), and aggregates cluster roles after each change, until `stop`.
    pub async fn run(self: Arc<Self>, registry: Arc<Registry>, stop: CancellationToken) {
        loop {
            let revision = self.load(&registry.store);
            let mut watch = match registry.store.watch(index::PREFIX, Some(revision)) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "RBAC index: watch expired; listing again");
                    continue;
                }
            };
            {
                let mut index = self.write();
                for e in watch.initial.drain(..) {
                    index.apply(&e.key, value_of(&e));
                }
            }
            aggregation::run_once(&self, &registry).await;
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    e = watch.next() => e,
                };
                match event {
                    Ok(e) => {
                        self.write().apply(&e.key, value_of(&e));
                        aggregation::run_once(&self, &registry).await;
                    }
                    Err(end @ (WatchEnd::Lagged | WatchEnd::Reloaded)) => {
                        tracing::info!(?end, "RBAC index: the watch ended; listing again");
                        break;
                    }
                    Err(WatchEnd::Closed) => return,
                }
            }
        }
    }
}

fn value_of(e: &crate::storage::Event) -> Option<&[u8]> {
    match e.kind {
        crate::storage::EventType::Deleted => None,
        _ => Some(&e.value),
    }
}

#[cfg(test)]
mod tests;
