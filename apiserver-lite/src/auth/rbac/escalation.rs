//! Escalation prevention, as upstream's `pkg/registry/rbac` policy-based storage: a Role or
//! ClusterRole may be created or changed only by someone who holds every permission it grants
//! (or may `escalate` it); a binding only by someone who holds the permissions of the role it
//! names (or may `bind` that role). Members of `system:masters` may do both. Setting an
//! `aggregationRule` needs every permission (`*` on everything), as the rule can gather
//! anything. An update that changes neither the rules and aggregation rule (roles) nor the
//! role reference and subjects (bindings) is not checked, so that the garbage collector and
//! label edits go through (upstream exempts garbage-collection fields only).

use k8s_openapi::api::rbac::v1::{AggregationRule, PolicyRule, RoleRef, Subject};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::index::RoleRefError;
use super::rule;
use crate::auth::User;
use crate::auth::authorizer::{
    Attributes, Authorizer, PRIVILEGED_GROUP, ResourceAttributes, Target,
};
use crate::errors::ApiError;
use crate::objects::rbac::GROUP;
use crate::resources::ResourceType;

fn field<T: DeserializeOwned + Default>(obj: &Value, name: &str) -> T {
    serde_json::from_value(obj[name].clone()).unwrap_or_default()
}

/// Checks a create (`old` none) or update of `new`, a `r`, by `user`; other kinds pass.
pub fn check(
    authz: &Authorizer,
    user: &User,
    r: &ResourceType,
    ns: Option<&str>,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if r.group != GROUP || user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Ok(());
    }
    let ns = ns.filter(|_| r.namespaced).unwrap_or_default();
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let allowed = |verb: &str, resource: &str, target_name: &str| {
        let attrs = ResourceAttributes {
            group: GROUP,
            resource,
            namespace: ns,
            name: target_name,
            ..Default::default()
        };
        authz.decide(&Attributes { user, verb, target: Target::Resource(attrs) }).allowed()
    };
    match r.kind {
        "Role" | "ClusterRole" => {
            let rules: Vec<PolicyRule> = field(new, "rules");
            let aggregation: Option<AggregationRule> = field(new, "aggregationRule");
            let unchanged = old.is_some_and(|o| {
                field::<Vec<PolicyRule>>(o, "rules") == rules
                    && field::<Option<AggregationRule>>(o, "aggregationRule") == aggregation
            });
            if unchanged || allowed("escalate", r.name, name) {
                return Ok(());
            }
            confirm_no_escalation(authz, user, ns, &rules)
                .map_err(|why| ApiError::forbidden_object(r, name, &why))?;
            if aggregation.is_some() {
                let all =
                    [rule::resource_rule(&["*"], &["*"], &["*"]), rule::url_rule(&["*"], &["*"])];
                confirm_no_escalation(authz, user, ns, &all).map_err(|_| {
                    ApiError::forbidden_object(
                        r,
                        name,
                        "must have cluster-admin privileges to use the aggregationRule",
                    )
                })?;
            }
            Ok(())
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_ref: RoleRef = field(new, "roleRef");
            let subjects: Vec<Subject> = field(new, "subjects");
            let unchanged = old.is_some_and(|o| {
                field::<RoleRef>(o, "roleRef") == role_ref
                    && field::<Vec<Subject>>(o, "subjects") == subjects
            });
            let role_resource = match role_ref.kind.as_str() {
                "Role" => "roles",
                _ => "clusterroles",
            };
            if unchanged || allowed("bind", role_resource, &role_ref.name) {
                return Ok(());
            }
            let binding_ns = r.namespaced.then_some(ns);
            let rules = authz.rbac().role_ref_rules(&role_ref, binding_ns).map_err(|e| {
                let why = match e {
                    // The registry's words (plural), as upstream's storage-backed getter.
                    RoleRefError::NotFound { kind, name } => {
                        format!("{kind}s.rbac.authorization.k8s.io {name:?} not found")
                    }
                    other => other.to_string(),
                };
                ApiError::forbidden_object(r, name, &why)
            })?;
            confirm_no_escalation(authz, user, ns, &rules)
                .map_err(|why| ApiError::forbidden_object(r, name, &why))
        }
        _ => Ok(()),
    }
}

/// Upstream's `ConfirmNoEscalation`: `Err` with its message when `user`'s RBAC rules in `ns`
/// do not cover `rules`.
pub fn confirm_no_escalation(
    authz: &Authorizer,
    user: &User,
    ns: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owned, errors) = authz.rbac().rules_for(user, ns);
    let missing = rule::covers(&owned, rules);
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = rule::compact(missing).iter().map(rule::compact_string).collect();
    lines.sort();
    lines.dedup();
    let mut msg = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        rule::go_quoted(&user.groups),
        lines.join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
    }
    Err(msg)
}

#[cfg(test)]
mod tests;
