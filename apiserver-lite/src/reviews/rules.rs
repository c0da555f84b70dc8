//! `selfsubjectrulesreviews` (`kubectl auth can-i --list`): what [`auth::authorize`] allows one
//! user in one namespace, written out as RBAC-style rules. Rights the authorizer decides from
//! the object sent or stored (a node creating its own Node, writing the pods bound to it) have
//! no rule that could say so; the answer is then marked incomplete and names them, as upstream
//! marks an authorizer that cannot list what it allows.
//!
//! [`auth::authorize`]: crate::auth::authorize

use k8s_openapi::api::authorization::v1::{
    NonResourceRule, ResourceRule, SubjectRulesReviewStatus,
};

use crate::auth::User;
use crate::resources::{RESOURCES, ResourceType};

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> ResourceRule {
    ResourceRule {
        verbs: strings(verbs),
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        resource_names: Some(strings(names)).filter(|n| !n.is_empty()),
    }
}

fn paths(verbs: &[&str]) -> NonResourceRule {
    NonResourceRule { verbs: strings(verbs), non_resource_urls: Some(strings(&["*"])) }
}

/// The rules `user` holds in `namespace` (cluster-scoped rules included, as upstream lists
/// them).
pub fn rules(user: &User, namespace: &str) -> SubjectRulesReviewStatus {
    if user.is_master() {
        return SubjectRulesReviewStatus {
            resource_rules: vec![rule(&["*"], &["*"], &["*"], &[])],
            non_resource_rules: vec![paths(&["*"])],
            incomplete: false,
            evaluation_error: None,
        };
    }
    let mut resource_rules = vec![rule(&["get", "list", "watch"], &["*"], &["*"], &[])];
    let (about_others, about_self): (Vec<_>, Vec<_>) = RESOURCES
        .iter()
        .filter(|r| !r.is_stored())
        .partition(|r| crate::auth::ABOUT_OTHERS.contains(&r.name));
    let create = |review: &ResourceType| rule(&["create"], &[review.group], &[review.name], &[]);
    resource_rules.extend(about_self.into_iter().map(create));
    let mut evaluation_error = None;
    if let Some(node) = user.node() {
        resource_rules.push(rule(&["*"], &[""], &["nodes", "nodes/status"], &[node]));
        resource_rules.extend(about_others.into_iter().map(create));
        if namespace == "kube-node-lease" {
            resource_rules.push(rule(&["*"], &["coordination.k8s.io"], &["leases"], &[node]));
        }
        resource_rules.push(rule(&["*"], &[""], &["pods/status"], &[]));
        resource_rules.push(rule(&["create", "patch"], &["", "events.k8s.io"], &["events"], &[]));
        evaluation_error = Some(format!(
            "rights that depend on the object are not listed: node {node:?} may also create its own Node, write the pods bound to it (spec.nodeName {node:?}) and request tokens for their service accounts, bound to them"
        ));
    }
    SubjectRulesReviewStatus {
        resource_rules,
        non_resource_rules: vec![paths(&["get"])],
        incomplete: evaluation_error.is_some(),
        evaluation_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::authorize;
    use crate::resources::ResourceType;

    fn user(name: &str, groups: &[&str]) -> User {
        User { name: name.into(), groups: strings(groups), ..User::default() }
    }

    /// RBAC's matching: a rule allows a request when each of verb, group, resource (with its
    /// subresource) and name is listed or `*`, and names, when given, include the request's.
    fn allows(rules: &[ResourceRule], verb: &str, group: &str, resource: &str, name: &str) -> bool {
        let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        rules.iter().any(|r| {
            has(&r.verbs, verb)
                && r.api_groups.as_deref().is_some_and(|g| has(g, group))
                && r.resources.as_deref().is_some_and(|rs| has(rs, resource))
                && r.resource_names.as_deref().is_none_or(|n| n.iter().any(|x| x == name))
        })
    }

    /// Every verb on every served type and subresource, by name or not, in two namespaces:
    /// the listed rules allow exactly what the authorizer allows when it sees no object.
    #[test]
    fn the_listed_rules_allow_exactly_what_the_authorizer_allows() {
        let users = [
            user("admin", &["system:masters", "system:authenticated"]),
            user("dev", &["system:authenticated"]),
            user("system:node:node-a", &["system:nodes", "system:authenticated"]),
        ];
        let verbs =
            ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
        let mut checked = 0;
        for u in &users {
            for ns in ["default", "kube-node-lease"] {
                let listed = rules(u, ns).resource_rules;
                for t in RESOURCES {
                    let subs =
                        std::iter::once(None).chain(t.subresources.iter().copied().map(Some));
                    for sub in subs {
                        for name in [None, Some("node-a"), Some("node-b")] {
                            for verb in verbs {
                                let ns = t.namespaced.then_some(ns);
                                let want = authorize(u, verb, t, ns, name, sub, None).is_ok();
                                let got = allows(
                                    &listed,
                                    verb,
                                    t.group,
                                    &resource(t, sub),
                                    name.unwrap_or(""),
                                );
                                assert_eq!(
                                    got, want,
                                    "{} {verb} {} {sub:?} {name:?} in {ns:?}",
                                    u.name, t.name
                                );
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 1_000, "{checked}");
    }

    fn resource(t: &ResourceType, sub: Option<&str>) -> String {
        match sub {
            Some(s) => format!("{}/{s}", t.name),
            None => t.name.to_string(),
        }
    }

    #[test]
    fn only_a_node_gets_an_incomplete_list_naming_what_is_missing() {
        let dev = rules(&user("dev", &["system:authenticated"]), "default");
        assert!(!dev.incomplete && dev.evaluation_error.is_none());
        let node = rules(&user("system:node:n1", &["system:nodes"]), "default");
        assert!(node.incomplete);
        let why = node.evaluation_error.unwrap_or_default();
        assert!(why.contains("own Node") && why.contains("spec.nodeName \"n1\""), "{why}");
        let admin = rules(&user("root", &["system:masters"]), "default");
        assert_eq!(admin.non_resource_rules[0].verbs, ["*"]);
    }
}
