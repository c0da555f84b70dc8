//! The resource types this server serves: group, version, names, kind, scope, verbs and
//! subresources, as discovery reports them and as requests are routed to them; each a constant
//! ([`PODS`], [`DEPLOYMENTS`], …), [`RESOURCES`] the table of them.

use crate::kinds::{self, Strategy};
use crate::request::Verb;

/// One resource type (a group, version and plural name).
#[derive(Debug, Clone, Copy)]
pub struct ResourceType {
    pub group: &'static str,
    pub version: &'static str,
    /// Plural, lowercase: `pods`.
    pub name: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Subresources this server implements, e.g. `status`, `scale`, `binding`, `eviction`.
    pub subresources: &'static [Subresource],
    /// What may be done to it: every verb for stored types, `create` alone for the reviews
    /// (answered, never stored; see [`crate::reviews`]).
    pub verbs: &'static [Verb],
    /// How objects of this type behave: its kind's strategy.
    pub strategy: &'static Strategy,
    /// Where its objects come from.
    pub backing: Backing,
}

/// Where a resource type's objects come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// The store: every verb.
    Store,
    /// Computed per request from the body, never stored (the reviews): `create` alone.
    Review,
    /// Computed from the scraped usage ([`crate::metrics`]): `get` and `list` alone.
    Metrics,
}

/// Resource types are the same when they are served at the same group, version and name.
impl PartialEq for ResourceType {
    fn eq(&self, other: &Self) -> bool {
        (self.group, self.version, self.name) == (other.group, other.version, other.name)
    }
}

impl Eq for ResourceType {}

/// A subresource this server serves for some resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Status,
    Scale,
    Binding,
    Eviction,
    Log,
    Exec,
    Attach,
    PortForward,
    Finalize,
    Token,
    /// `nodes/proxy`: requests passed to the node's kubelet.
    Proxy,
}

impl Subresource {
    const ALL: [Subresource; 11] = [
        Subresource::Status,
        Subresource::Scale,
        Subresource::Binding,
        Subresource::Eviction,
        Subresource::Log,
        Subresource::Exec,
        Subresource::Attach,
        Subresource::PortForward,
        Subresource::Finalize,
        Subresource::Token,
        Subresource::Proxy,
    ];

    /// Its path segment: `status`, `portforward`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Log => "log",
            Subresource::Exec => "exec",
            Subresource::Attach => "attach",
            Subresource::PortForward => "portforward",
            Subresource::Finalize => "finalize",
            Subresource::Token => "token",
            Subresource::Proxy => "proxy",
        }
    }

    /// The subresource a path segment names, if this server has it.
    pub fn parse(s: &str) -> Option<Subresource> {
        Self::ALL.into_iter().find(|sub| sub.as_str() == s)
    }
}

const VERBS: [Verb; 8] = [
    Verb::Create,
    Verb::Delete,
    Verb::DeleteCollection,
    Verb::Get,
    Verb::List,
    Verb::Patch,
    Verb::Update,
    Verb::Watch,
];

macro_rules! rt {
    ($g:literal, $v:literal, $name:literal, $singular:literal, $kind:literal, $ns:literal, [$($short:literal),*], [$($cat:literal),*], [$($sub:ident),*], $strategy:expr) => {
        ResourceType { group: $g, version: $v, name: $name, singular: $singular, kind: $kind, namespaced: $ns,
            short_names: &[$($short),*], categories: &[$($cat),*], subresources: &[$(Subresource::$sub),*], verbs: &VERBS, strategy: $strategy, backing: Backing::Store }
    };
}

/// A review type: created to get an answer, never stored.
macro_rules! review {
    ($g:literal, $name:literal, $singular:literal, $kind:literal, $strategy:expr) => {
        ResourceType {
            group: $g,
            version: "v1",
            name: $name,
            singular: $singular,
            kind: $kind,
            namespaced: false,
            short_names: &[],
            categories: &[],
            subresources: &[],
            verbs: &[Verb::Create],
            strategy: $strategy,
            backing: Backing::Review,
        }
    };
}

/// A `metrics.k8s.io/v1beta1` type: read from the scraped usage, never stored.
macro_rules! metrics {
    ($name:literal, $kind:literal, $ns:literal) => {
        ResourceType {
            group: "metrics.k8s.io",
            version: "v1beta1",
            name: $name,
            // metrics-server names no singular.
            singular: "",
            kind: $kind,
            namespaced: $ns,
            short_names: &[],
            categories: &[],
            subresources: &[],
            verbs: &[Verb::Get, Verb::List],
            strategy: &kinds::metrics::STRATEGY,
            backing: Backing::Metrics,
        }
    };
}

pub const NAMESPACES: ResourceType = rt!(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    false,
    ["ns"],
    [],
    [Status, Finalize],
    &kinds::namespace::STRATEGY
);
pub const PODS: ResourceType = rt!(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    true,
    ["po"],
    ["all"],
    [Status, Binding, Eviction, Log, Exec, Attach, PortForward],
    &kinds::pod::STRATEGY
);
pub const NODES: ResourceType = rt!(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    false,
    ["no"],
    [],
    [Status, Proxy],
    &kinds::node::STRATEGY
);
pub const EVENTS: ResourceType =
    rt!("", "v1", "events", "event", "Event", true, ["ev"], [], [], &kinds::event::STRATEGY);
pub const SERVICES: ResourceType = rt!(
    "",
    "v1",
    "services",
    "service",
    "Service",
    true,
    ["svc"],
    ["all"],
    [Status],
    &kinds::service::STRATEGY
);
pub const ENDPOINTS: ResourceType = rt!(
    "",
    "v1",
    "endpoints",
    "endpoints",
    "Endpoints",
    true,
    ["ep"],
    [],
    [],
    &kinds::endpoints::STRATEGY
);
pub const CONFIG_MAPS: ResourceType = rt!(
    "",
    "v1",
    "configmaps",
    "configmap",
    "ConfigMap",
    true,
    ["cm"],
    [],
    [],
    &kinds::config_map::STRATEGY
);
pub const SECRETS: ResourceType =
    rt!("", "v1", "secrets", "secret", "Secret", true, [], [], [], &kinds::secret::STRATEGY);
pub const SERVICE_ACCOUNTS: ResourceType = rt!(
    "",
    "v1",
    "serviceaccounts",
    "serviceaccount",
    "ServiceAccount",
    true,
    ["sa"],
    [],
    [Token],
    &kinds::service_account::STRATEGY
);
pub const DEPLOYMENTS: ResourceType = rt!(
    "apps",
    "v1",
    "deployments",
    "deployment",
    "Deployment",
    true,
    ["deploy"],
    ["all"],
    [Status, Scale],
    &kinds::deployment::STRATEGY
);
pub const REPLICA_SETS: ResourceType = rt!(
    "apps",
    "v1",
    "replicasets",
    "replicaset",
    "ReplicaSet",
    true,
    ["rs"],
    ["all"],
    [Status, Scale],
    &kinds::replica_set::STRATEGY
);
pub const DAEMON_SETS: ResourceType = rt!(
    "apps",
    "v1",
    "daemonsets",
    "daemonset",
    "DaemonSet",
    true,
    ["ds"],
    ["all"],
    [Status],
    &kinds::daemon_set::STRATEGY
);
pub const CONTROLLER_REVISIONS: ResourceType = rt!(
    "apps",
    "v1",
    "controllerrevisions",
    "controllerrevision",
    "ControllerRevision",
    true,
    [],
    [],
    [],
    &kinds::controller_revision::STRATEGY
);
pub const JOBS: ResourceType =
    rt!("batch", "v1", "jobs", "job", "Job", true, [], ["all"], [Status], &kinds::job::STRATEGY);
pub const CRON_JOBS: ResourceType = rt!(
    "batch",
    "v1",
    "cronjobs",
    "cronjob",
    "CronJob",
    true,
    ["cj"],
    ["all"],
    [Status],
    &kinds::cron_job::STRATEGY
);
pub const LEASES: ResourceType = rt!(
    "coordination.k8s.io",
    "v1",
    "leases",
    "lease",
    "Lease",
    true,
    [],
    [],
    [],
    &kinds::lease::STRATEGY
);
pub const EVENTS_V1: ResourceType = rt!(
    "events.k8s.io",
    "v1",
    "events",
    "event",
    "Event",
    true,
    ["ev"],
    [],
    [],
    &kinds::event::STRATEGY_V1
);
pub const ROLES: ResourceType = rt!(
    "rbac.authorization.k8s.io",
    "v1",
    "roles",
    "role",
    "Role",
    true,
    [],
    [],
    [],
    &kinds::role::STRATEGY
);
pub const ROLE_BINDINGS: ResourceType = rt!(
    "rbac.authorization.k8s.io",
    "v1",
    "rolebindings",
    "rolebinding",
    "RoleBinding",
    true,
    [],
    [],
    [],
    &kinds::role_binding::STRATEGY
);
pub const CLUSTER_ROLES: ResourceType = rt!(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterroles",
    "clusterrole",
    "ClusterRole",
    false,
    [],
    [],
    [],
    &kinds::cluster_role::STRATEGY
);
pub const CLUSTER_ROLE_BINDINGS: ResourceType = rt!(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterrolebindings",
    "clusterrolebinding",
    "ClusterRoleBinding",
    false,
    [],
    [],
    [],
    &kinds::cluster_role_binding::STRATEGY
);
pub const SELF_SUBJECT_ACCESS_REVIEWS: ResourceType = review!(
    "authorization.k8s.io",
    "selfsubjectaccessreviews",
    "selfsubjectaccessreview",
    "SelfSubjectAccessReview",
    &kinds::review::SELF_SUBJECT_ACCESS_REVIEW
);
pub const SUBJECT_ACCESS_REVIEWS: ResourceType = review!(
    "authorization.k8s.io",
    "subjectaccessreviews",
    "subjectaccessreview",
    "SubjectAccessReview",
    &kinds::review::SUBJECT_ACCESS_REVIEW
);
pub const SELF_SUBJECT_RULES_REVIEWS: ResourceType = review!(
    "authorization.k8s.io",
    "selfsubjectrulesreviews",
    "selfsubjectrulesreview",
    "SelfSubjectRulesReview",
    &kinds::review::SELF_SUBJECT_RULES_REVIEW
);
pub const TOKEN_REVIEWS: ResourceType = review!(
    "authentication.k8s.io",
    "tokenreviews",
    "tokenreview",
    "TokenReview",
    &kinds::review::TOKEN_REVIEW
);
pub const SELF_SUBJECT_REVIEWS: ResourceType = review!(
    "authentication.k8s.io",
    "selfsubjectreviews",
    "selfsubjectreview",
    "SelfSubjectReview",
    &kinds::review::SELF_SUBJECT_REVIEW
);
pub const NODE_METRICS: ResourceType = metrics!("nodes", "NodeMetrics", false);
pub const POD_METRICS: ResourceType = metrics!("pods", "PodMetrics", true);

/// Every served resource type, in discovery order.
pub const RESOURCES: &[ResourceType] = &[
    NAMESPACES,
    PODS,
    NODES,
    EVENTS,
    SERVICES,
    ENDPOINTS,
    CONFIG_MAPS,
    SECRETS,
    SERVICE_ACCOUNTS,
    DEPLOYMENTS,
    REPLICA_SETS,
    DAEMON_SETS,
    CONTROLLER_REVISIONS,
    JOBS,
    CRON_JOBS,
    LEASES,
    EVENTS_V1,
    ROLES,
    ROLE_BINDINGS,
    CLUSTER_ROLES,
    CLUSTER_ROLE_BINDINGS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_RULES_REVIEWS,
    TOKEN_REVIEWS,
    SELF_SUBJECT_REVIEWS,
    NODE_METRICS,
    POD_METRICS,
];

impl ResourceType {
    /// Its verbs as discovery lists them.
    pub fn verb_names(&self) -> Vec<&'static str> {
        self.verbs.iter().map(|v| v.as_str()).collect()
    }

    /// Whether objects of this type are kept in the store (the reviews and metrics are not).
    pub fn is_stored(&self) -> bool {
        self.backing == Backing::Store
    }

    /// `v1` or `apps/v1`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// How messages name it: `pods`, `deployments.apps`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.name.to_string()
        } else {
            format!("{}.{}", self.name, self.group)
        }
    }

    pub fn has_subresource(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }

    /// The storage key prefix of the resource, or of one namespace of it.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        let group = if self.group.is_empty() { "core" } else { self.group };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("/registry/{group}/{}/{ns}/", self.name),
            None => format!("/registry/{group}/{}/", self.name),
        }
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}{name}", self.prefix(namespace))
    }
}

/// Where each stored resource type lives in etcd, as upstream lays it out: (the store's
/// prefix, the path under `--etcd-prefix`): `pods`, nodes under `minions`, services under
/// `services/specs`, endpoints under `services/endpoints`; and the Services' address records
/// (`ipaddresses`).
pub fn etcd_routes() -> Vec<(String, String)> {
    RESOURCES
        .iter()
        .filter(|r| r.is_stored())
        .map(|r| {
            let path = if *r == NODES {
                "minions"
            } else if *r == SERVICES {
                "services/specs"
            } else if *r == ENDPOINTS {
                "services/endpoints"
            } else if r.group == "events.k8s.io" {
                // Upstream serves core and events.k8s.io Events from one storage; this server
                // keeps them apart (in SQLite too), so the second has a path of its own.
                "events.k8s.io/events"
            } else {
                r.name
            };
            (r.prefix(None), path.to_string())
        })
        .chain([(
            crate::registry::ipalloc::PREFIX.to_string(),
            crate::registry::ipalloc::ETCD_PATH.to_string(),
        )])
        .collect()
}

/// The resource type `name` in `group`/`version`.
pub fn find(group: &str, version: &str, name: &str) -> Option<&'static ResourceType> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.name == name)
}

/// The groups and versions served, in discovery order (`""` is the core group).
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_names() {
        let pods = find("", "v1", "pods").unwrap();
        assert_eq!(pods.key(Some("default"), "web"), "/registry/core/pods/default/web");
        let routes = etcd_routes();
        let mut paths: Vec<&str> = routes.iter().map(|(_, p)| p.as_str()).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), routes.len(), "one etcd path per stored type: {routes:?}");
        assert_eq!(pods.prefix(None), "/registry/core/pods/");
        let nodes = find("", "v1", "nodes").unwrap();
        assert_eq!(nodes.key(Some("ignored"), "n1"), "/registry/core/nodes/n1");
        let deploy = find("apps", "v1", "deployments").unwrap();
        assert_eq!(
            (deploy.group_version(), deploy.qualified(), deploy.list_kind()),
            ("apps/v1".into(), "deployments.apps".into(), "DeploymentList".into())
        );
        assert_eq!(group_versions()[0], ("", "v1"));
        assert!(find("apps", "v1", "pods").is_none());
    }
}
