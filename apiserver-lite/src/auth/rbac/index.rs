//! The roles and bindings in memory, by namespace and name, as the store holds them: what the
//! RBAC decision and the rule listing read, so that no request scans storage. Kept current by
//! [`super::Rbac::run`] from a watch; pure otherwise.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde::de::DeserializeOwned;

use crate::auth::User;

/// The storage prefix of every RBAC object.
pub const PREFIX: &str = "/registry/rbac.authorization.k8s.io/";

/// A binding as the decision reads it: where it is, what it grants, to whom.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub name: String,
    /// `None` for a ClusterRoleBinding.
    pub namespace: Option<String>,
    pub role_ref: RoleRef,
    pub subjects: Vec<Subject>,
}

impl Binding {
    fn from_role_binding(b: RoleBinding) -> Self {
        Self {
            name: b.metadata.name.unwrap_or_default(),
            namespace: b.metadata.namespace,
            role_ref: b.role_ref,
            subjects: b.subjects.unwrap_or_default(),
        }
    }

    fn from_cluster_role_binding(b: ClusterRoleBinding) -> Self {
        Self {
            name: b.metadata.name.unwrap_or_default(),
            namespace: None,
            role_ref: b.role_ref,
            subjects: b.subjects.unwrap_or_default(),
        }
    }

    /// Upstream's source description: `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`.
    pub fn describe(&self, subject: &Subject) -> String {
        let who = match (subject.kind.as_str(), &subject.namespace) {
            ("ServiceAccount", Some(ns)) if !ns.is_empty() => {
                format!("{} {:?}", subject.kind, format!("{}/{ns}", subject.name))
            }
            ("ServiceAccount", _) => format!(
                "{} {:?}",
                subject.kind,
                format!("{}/{}", subject.name, self.namespace.as_deref().unwrap_or_default())
            ),
            _ => format!("{} {:?}", subject.kind, subject.name),
        };
        match &self.namespace {
            Some(ns) => format!(
                "RoleBinding {:?} of {} {:?} to {who}",
                format!("{}/{ns}", self.name),
                self.role_ref.kind,
                self.role_ref.name
            ),
            None => format!(
                "ClusterRoleBinding {:?} of {} {:?} to {who}",
                self.name, self.role_ref.kind, self.role_ref.name
            ),
        }
    }

    /// The first subject that names `user` (ServiceAccounts without a namespace are the
    /// binding's), as upstream's `appliesTo`.
    pub fn subject_for(&self, user: &User) -> Option<&Subject> {
        self.subjects.iter().find(|s| applies_to(user, s, self.namespace.as_deref()))
    }
}

fn applies_to(user: &User, s: &Subject, binding_ns: Option<&str>) -> bool {
    match s.kind.as_str() {
        "User" => user.name == s.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().filter(|n| !n.is_empty()).or(binding_ns);
            let Some(ns) = ns.filter(|n| !n.is_empty()) else { return false };
            user.name
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.split_once(':'))
                .is_some_and(|(n, name)| n == ns && name == s.name)
        }
        _ => false,
    }
}

/// Why a binding's role could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleRefError {
    /// The role does not exist (upstream's lister wording: the singular resource).
    #[error("{kind}.rbac.authorization.k8s.io {name:?} not found")]
    NotFound { kind: &'static str, name: String },
    #[error("unsupported role reference kind: {0:?}")]
    Kind(String),
}

/// Every role and binding.
#[derive(Debug, Clone, Default)]
pub struct Index {
    roles: HashMap<String, HashMap<String, Vec<PolicyRule>>>,
    cluster_roles: BTreeMap<String, ClusterRole>,
    role_bindings: HashMap<String, BTreeMap<String, Binding>>,
    cluster_role_bindings: BTreeMap<String, Binding>,
}

/// Which kind a storage key holds, and its namespace and name.
fn parse_key(key: &str) -> Option<(&str, Option<&str>, &str)> {
    let rest = key.strip_prefix(PREFIX)?;
    let (resource, rest) = rest.split_once('/')?;
    match resource {
        "roles" | "rolebindings" => {
            let (ns, name) = rest.split_once('/')?;
            Some((resource, Some(ns), name))
        }
        _ => Some((resource, None, rest)),
    }
}

fn decode<T: DeserializeOwned>(key: &str, value: &[u8]) -> Option<T> {
    match serde_json::from_slice(value) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(key, error = %e, "RBAC index: a stored object does not decode");
            None
        }
    }
}

impl Index {
    /// Applies one stored object (`Some`) or its deletion (`None`).
    pub fn apply(&mut self, key: &str, value: Option<&[u8]>) {
        let Some((resource, ns, name)) = parse_key(key) else { return };
        let (ns, name) = (ns.unwrap_or_default().to_string(), name.to_string());
        match (resource, value) {
            ("roles", Some(v)) => {
                if let Some(r) = decode::<Role>(key, v) {
                    self.roles.entry(ns).or_default().insert(name, r.rules.unwrap_or_default());
                }
            }
            ("roles", None) => {
                if let Some(m) = self.roles.get_mut(&ns) {
                    m.remove(&name);
                }
            }
            ("clusterroles", Some(v)) => {
                if let Some(r) = decode::<ClusterRole>(key, v) {
                    self.cluster_roles.insert(name, r);
                }
            }
            ("clusterroles", None) => {
                self.cluster_roles.remove(&name);
            }
            ("rolebindings", Some(v)) => {
                if let Some(b) = decode::<RoleBinding>(key, v) {
                    let b = Binding::from_role_binding(b);
                    self.role_bindings.entry(ns).or_default().insert(name, b);
                }
            }
            ("rolebindings", None) => {
                if let Some(m) = self.role_bindings.get_mut(&ns) {
                    m.remove(&name);
                }
            }
            ("clusterrolebindings", Some(v)) => {
                if let Some(b) = decode::<ClusterRoleBinding>(key, v) {
                    self.cluster_role_bindings.insert(name, Binding::from_cluster_role_binding(b));
                }
            }
            ("clusterrolebindings", None) => {
                self.cluster_role_bindings.remove(&name);
            }
            _ => {}
        }
    }

    /// Adds a role (for tests and benchmarks).
    pub fn add_role(&mut self, ns: &str, name: &str, rules: Vec<PolicyRule>) {
        self.roles.entry(ns.into()).or_default().insert(name.into(), rules);
    }

    pub fn add_cluster_role(&mut self, role: ClusterRole) {
        let name = role.metadata.name.clone().unwrap_or_default();
        self.cluster_roles.insert(name, role);
    }

    pub fn add_role_binding(&mut self, b: RoleBinding) {
        let b = Binding::from_role_binding(b);
        let ns = b.namespace.clone().unwrap_or_default();
        self.role_bindings.entry(ns).or_default().insert(b.name.clone(), b);
    }

    pub fn add_cluster_role_binding(&mut self, b: ClusterRoleBinding) {
        let b = Binding::from_cluster_role_binding(b);
        self.cluster_role_bindings.insert(b.name.clone(), b);
    }

    pub fn cluster_roles(&self) -> impl Iterator<Item = &ClusterRole> {
        self.cluster_roles.values()
    }

    pub fn cluster_role(&self, name: &str) -> Option<&ClusterRole> {
        self.cluster_roles.get(name)
    }

    /// The rules a binding's `roleRef` grants (`ns` is the binding's; none for a
    /// ClusterRoleBinding, which may only name ClusterRoles).
    pub fn role_ref_rules(
        &self,
        r: &RoleRef,
        ns: Option<&str>,
    ) -> Result<&[PolicyRule], RoleRefError> {
        let missing = |kind| RoleRefError::NotFound { kind, name: r.name.clone() };
        match r.kind.as_str() {
            "Role" => ns
                .and_then(|ns| self.roles.get(ns))
                .and_then(|m| m.get(&r.name))
                .map(Vec::as_slice)
                .ok_or_else(|| missing("role")),
            "ClusterRole" => self
                .cluster_roles
                .get(&r.name)
                .map(|c| c.rules.as_deref().unwrap_or_default())
                .ok_or_else(|| missing("clusterrole")),
            other => Err(RoleRefError::Kind(other.to_string())),
        }
    }

    /// Upstream's `VisitRulesFor`: every rule `user` holds in `namespace` (cluster-wide first;
    /// `""` for cluster-wide only), with the binding that grants it, and each binding whose
    /// role is missing. `visit` returns `false` to stop.
    pub fn visit_rules_for(
        &self,
        user: &User,
        namespace: &str,
        mut visit: impl FnMut(Result<(&Binding, &Subject, &PolicyRule), RoleRefError>) -> bool,
    ) {
        let namespaced = (!namespace.is_empty())
            .then(|| self.role_bindings.get(namespace))
            .flatten()
            .into_iter()
            .flat_map(|m| m.values());
        for b in self.cluster_role_bindings.values().chain(namespaced) {
            let Some(subject) = b.subject_for(user) else { continue };
            match self.role_ref_rules(&b.role_ref, b.namespace.as_deref()) {
                Ok(rules) => {
                    for rule in rules {
                        if !visit(Ok((b, subject, rule))) {
                            return;
                        }
                    }
                }
                Err(e) => {
                    if !visit(Err(e)) {
                        return;
                    }
                }
            }
        }
    }
}

impl Index {
    /// The bootstrap policy alone, aggregated (what a new cluster's index holds once
    /// reconciliation and aggregation have run): for tests and benchmarks.
    pub fn bootstrap() -> Self {
        let mut index = Index::default();
        for r in super::policy::cluster_roles() {
            index.add_cluster_role(r);
        }
        for b in super::policy::cluster_role_bindings() {
            index.add_cluster_role_binding(b);
        }
        for _ in 0..8 {
            let pending = super::aggregation::pending(&index);
            if pending.is_empty() {
                break;
            }
            for (name, rules) in pending {
                if let Some(r) = index.cluster_roles.get_mut(&name) {
                    r.rules = Some(rules);
                }
            }
        }
        index
    }
}
