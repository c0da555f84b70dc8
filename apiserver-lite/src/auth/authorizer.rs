//! The authorizer chain, as upstream's `--authorization-mode`: the request's [`Attributes`]
//! go to each mode in order; the first that allows or denies decides, and a request no mode
//! has an opinion on is refused. Members of `system:masters` are allowed before any mode is
//! asked (upstream's privileged-group short-circuit). Modes: [`Mode::Node`] (kubelets,
//! [`super::node`]), [`Mode::Rbac`] (roles and bindings, [`super::rbac`]) and
//! [`Mode::AlwaysAllow`].

use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{
    NonResourceRule, ResourceRule, SubjectRulesReviewStatus,
};
use serde_json::json;

use super::User;
use super::node::NodeAuthorizer;
use super::node::graph::Graph;
use super::rbac::Rbac;
use crate::errors::ApiError;
use crate::resources::ResourceType;

/// The group whose members may do anything, whatever the modes say.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// What a resource request is about, as strings (a review may ask about types this server does
/// not serve).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceAttributes<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    /// The request's raw `fieldSelector` (a list or watch), as upstream's attributes carry it.
    pub field_selector: &'a str,
}

/// The value a field selector requires `field` to equal (`field=v` or `field==v` among its
/// comma-separated terms), as upstream's `RequiresExactMatch`.
pub fn field_equals<'s>(selector: &'s str, field: &str) -> Option<&'s str> {
    selector.split(',').find_map(|term| {
        if term.contains("!=") {
            return None;
        }
        let (f, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (f.trim() == field).then(|| v.trim())
    })
}

/// The name a list or watch is about, as upstream's RequestInfo reads it: a
/// `metadata.name=<name>` field selector naming a valid path segment.
pub fn selected_name(selector: &str) -> Option<&str> {
    field_equals(selector, "metadata.name")
        .filter(|n| !n.is_empty() && !matches!(*n, "." | "..") && !n.contains(['/', '%']))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    Resource(ResourceAttributes<'a>),
    /// A non-resource path: `/version`, `/apis/apps`.
    Path(&'a str),
}

/// One request to authorize.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a User,
    pub verb: &'a str,
    pub target: Target<'a>,
}

/// One mode's answer, with its reason (empty when it has none to give).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny(String),
    NoOpinion(String),
}

impl Decision {
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}

/// An authorization mode (`--authorization-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Node,
    Rbac,
    AlwaysAllow,
}

/// A `--authorization-mode` entry this server does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    #[error("--authorization-mode: unknown mode {0:?} (supported: Node, RBAC, AlwaysAllow)")]
    Unknown(String),
    #[error("--authorization-mode: {0:?} is given twice")]
    Repeated(String),
    #[error("--authorization-mode: at least one mode is required")]
    Empty,
}

impl Mode {
    /// Parses upstream's comma list, in order.
    pub fn parse_list(modes: &[String]) -> Result<Vec<Mode>, ModeError> {
        let mut out = Vec::new();
        for m in modes.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
            let mode = match m {
                "Node" => Mode::Node,
                "RBAC" => Mode::Rbac,
                "AlwaysAllow" => Mode::AlwaysAllow,
                other => return Err(ModeError::Unknown(other.to_string())),
            };
            if out.contains(&mode) {
                return Err(ModeError::Repeated(m.to_string()));
            }
            out.push(mode);
        }
        if out.is_empty() {
            return Err(ModeError::Empty);
        }
        Ok(out)
    }
}

/// The chain every request and every access review asks.
#[derive(Debug, Clone)]
pub struct Authorizer {
    modes: Vec<Mode>,
    rbac: Arc<Rbac>,
    node: NodeAuthorizer,
}

impl Authorizer {
    /// The chain of `modes` over `rbac`, and an empty node graph (see [`Self::with_graph`]).
    pub fn new(modes: Vec<Mode>, rbac: Arc<Rbac>) -> Self {
        Self { modes, rbac, node: NodeAuthorizer::default() }
    }

    /// The Node mode reading `graph`.
    pub fn with_graph(self, graph: Arc<Graph>) -> Self {
        Self { node: NodeAuthorizer::new(graph), ..self }
    }

    /// Upstream's default, `Node,RBAC`, over `rbac`.
    pub fn node_rbac(rbac: Arc<Rbac>) -> Self {
        Self::new(vec![Mode::Node, Mode::Rbac], rbac)
    }

    /// Every request allowed: for servers that do not authorize (tests of other things).
    pub fn always_allow() -> Self {
        Self::new(vec![Mode::AlwaysAllow], Arc::new(Rbac::default()))
    }

    pub fn rbac(&self) -> &Rbac {
        &self.rbac
    }

    /// The graph the Node mode reads.
    pub fn graph(&self) -> &Arc<Graph> {
        self.node.graph()
    }

    /// The chain's decision: the privileged group, then each mode in order.
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        if a.user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Decision::Allow(String::new());
        }
        let mut reasons = Vec::new();
        for mode in &self.modes {
            let d = match mode {
                Mode::Node => self.node.decide(a),
                Mode::Rbac => self.rbac.decide(a),
                Mode::AlwaysAllow => Decision::Allow(String::new()),
            };
            match d {
                Decision::NoOpinion(r) => {
                    if !r.is_empty() {
                        reasons.push(r);
                    }
                }
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join(", "))
    }

    /// Whether `user` may `verb` the resource `r` (its `sub`resource, in `ns`, named `name`):
    /// `Ok`, or upstream's 403.
    pub fn authorize(
        &self,
        user: &User,
        verb: &str,
        r: &ResourceType,
        ns: Option<&str>,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Result<(), ApiError> {
        let attrs = ResourceAttributes {
            group: r.group,
            resource: r.name,
            subresource: sub.unwrap_or_default(),
            namespace: ns.filter(|_| r.namespaced).unwrap_or_default(),
            name: name.unwrap_or_default(),
            field_selector: "",
        };
        self.check(&Attributes { user, verb, target: Target::Resource(attrs) })
    }

    /// Whether `user` may `list` or `watch` `r` in `ns` with `field_selector`: the name is the
    /// one a `metadata.name=` term selects, as upstream's RequestInfo sets it.
    pub fn authorize_list(
        &self,
        user: &User,
        verb: &str,
        r: &ResourceType,
        ns: Option<&str>,
        field_selector: &str,
    ) -> Result<(), ApiError> {
        let attrs = ResourceAttributes {
            group: r.group,
            resource: r.name,
            subresource: "",
            namespace: ns.filter(|_| r.namespaced).unwrap_or_default(),
            name: selected_name(field_selector).unwrap_or_default(),
            field_selector,
        };
        self.check(&Attributes { user, verb, target: Target::Resource(attrs) })
    }

    /// Whether `user` may `verb` the non-resource `path`.
    pub fn authorize_path(&self, user: &User, verb: &str, path: &str) -> Result<(), ApiError> {
        self.check(&Attributes { user, verb, target: Target::Path(path) })
    }

    /// `Ok` when the chain allows `a`, else upstream's 403.
    pub fn check(&self, a: &Attributes<'_>) -> Result<(), ApiError> {
        match self.decide(a) {
            Decision::Allow(_) => Ok(()),
            Decision::Deny(reason) | Decision::NoOpinion(reason) => Err(forbidden(a, &reason)),
        }
    }

    /// Everything `user` may do in `namespace` (cluster-wide rules included), for
    /// `kubectl auth can-i --list`: each mode's rules, and `incomplete` with the modes'
    /// errors when one cannot list them all, as upstream's union of rule resolvers.
    pub fn rules_for(&self, user: &User, namespace: &str) -> SubjectRulesReviewStatus {
        let mut status = SubjectRulesReviewStatus::default();
        let mut errors = Vec::new();
        for mode in &self.modes {
            match mode {
                Mode::Node if user.node().is_some() => {
                    status.incomplete = true;
                    errors.push(super::node::NO_RULE_RESOLUTION.to_string());
                }
                Mode::Node => {}
                Mode::Rbac => {
                    let (rules, errs) = self.rbac.rules_for(user, namespace);
                    for r in rules {
                        if r.non_resource_urls.as_deref().is_some_and(|u| !u.is_empty()) {
                            status.non_resource_rules.push(NonResourceRule {
                                verbs: r.verbs,
                                non_resource_urls: r.non_resource_urls,
                            });
                        } else {
                            status.resource_rules.push(ResourceRule {
                                verbs: r.verbs,
                                api_groups: r.api_groups,
                                resources: r.resources,
                                resource_names: r.resource_names,
                            });
                        }
                    }
                    if !errs.is_empty() {
                        status.incomplete = true;
                    }
                    errors.extend(errs);
                }
                Mode::AlwaysAllow => {
                    let all = || Some(vec!["*".to_string()]);
                    status.resource_rules.push(ResourceRule {
                        verbs: vec!["*".into()],
                        api_groups: all(),
                        resources: all(),
                        resource_names: None,
                    });
                    status.non_resource_rules.push(NonResourceRule {
                        verbs: vec!["*".into()],
                        non_resource_urls: all(),
                    });
                }
            }
        }
        status.evaluation_error = match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(format!("[{}]", errors.join(", "))),
        };
        status
    }
}

/// Upstream's 403 for a request the chain did not allow, with the chain's reason.
pub fn forbidden(a: &Attributes<'_>, reason: &str) -> ApiError {
    let user = &a.user.name;
    let verb = a.verb;
    let (message, details) = match &a.target {
        Target::Path(path) => {
            (format!("forbidden: User {user:?} cannot {verb} path {path:?}"), None)
        }
        Target::Resource(r) => {
            let resource = if r.subresource.is_empty() {
                r.resource.to_string()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                " at the cluster scope".to_string()
            } else {
                format!(" in the namespace {:?}", r.namespace)
            };
            let qualified = if r.group.is_empty() {
                r.resource.to_string()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            let subject =
                if r.name.is_empty() { qualified } else { format!("{qualified} {:?}", r.name) };
            let mut details = json!({"name": r.name, "kind": r.resource});
            if !r.group.is_empty() {
                details["group"] = json!(r.group);
            }
            (
                format!(
                    "{subject} is forbidden: User {user:?} cannot {verb} resource {resource:?} in API group {:?}{scope}",
                    r.group
                ),
                Some(details),
            )
        }
    };
    let message = if reason.is_empty() { message } else { format!("{message}: {reason}") };
    ApiError { details, ..ApiError::forbidden(message) }
}

#[cfg(test)]
mod tests;
