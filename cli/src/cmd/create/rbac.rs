//! `create role|clusterrole` (one rule per API group of `--resource`, resources resolved through
//! discovery as kubectl's mapper does, plus `--non-resource-url` for cluster roles) and
//! `create rolebinding|clusterrolebinding` (users, groups, then service accounts as subjects).

use super::tree::{Node, Obj};
use super::{Common, Kind, emit, enforced_namespace, metadata, one_name};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

const RBAC: &str = "rbac.authorization.k8s.io";
pub const ROLE: Kind =
    Kind { group: RBAC, version: "v1", plural: "roles", kind: "Role", namespaced: true };
pub const CLUSTER_ROLE: Kind = Kind {
    group: RBAC,
    version: "v1",
    plural: "clusterroles",
    kind: "ClusterRole",
    namespaced: false,
};
pub const ROLE_BINDING: Kind = Kind {
    group: RBAC,
    version: "v1",
    plural: "rolebindings",
    kind: "RoleBinding",
    namespaced: true,
};
pub const CLUSTER_ROLE_BINDING: Kind = Kind {
    group: RBAC,
    version: "v1",
    plural: "clusterrolebindings",
    kind: "ClusterRoleBinding",
    namespaced: false,
};

/// The verbs kubectl knows for resources; others are warned about, not refused.
const RESOURCE_VERBS: &[&str] = &[
    "*",
    "get",
    "delete",
    "list",
    "create",
    "update",
    "patch",
    "watch",
    "proxy",
    "deletecollection",
    "use",
    "bind",
    "escalate",
    "impersonate",
];
const NON_RESOURCE_VERBS: &[&str] =
    &["*", "get", "post", "put", "delete", "patch", "head", "options"];

/// Verbs that only apply to some resources (group, resource).
const SPECIAL_VERBS: &[(&str, &[(&str, &str)])] = &[
    ("use", &[("policy", "podsecuritypolicies"), ("extensions", "podsecuritypolicies")]),
    ("bind", &[(RBAC, "roles"), (RBAC, "clusterroles")]),
    ("escalate", &[(RBAC, "roles"), (RBAC, "clusterroles")]),
    (
        "impersonate",
        &[
            ("", "users"),
            ("", "serviceaccounts"),
            ("", "groups"),
            ("authentication.k8s.io", "userextras"),
            ("authentication.k8s.io", "uids"),
        ],
    ),
];

#[derive(Debug, clap::Args)]
pub struct RoleArgs {
    /// NAME
    pub name: Vec<String>,
    /// Verb that applies to the resources contained in the rule
    #[arg(long, value_delimiter = ',')]
    pub verb: Vec<String>,
    /// Resource that the rule applies to
    #[arg(long, value_delimiter = ',')]
    pub resource: Vec<String>,
    /// Resource in the white list that the rule applies to, repeat this flag for multiple items
    #[arg(long)]
    pub resource_name: Vec<String>,
    /// A partial url that user should have access to (cluster roles only).
    #[arg(long, value_delimiter = ',')]
    pub non_resource_url: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct BindingArgs {
    /// NAME
    pub name: Vec<String>,
    /// Role this RoleBinding should reference
    #[arg(long)]
    pub role: Option<String>,
    /// ClusterRole this binding should reference
    #[arg(long)]
    pub clusterrole: Option<String>,
    /// Usernames to bind to the role. The flag can be repeated to add multiple users.
    #[arg(long)]
    pub user: Vec<String>,
    /// Groups to bind to the role. The flag can be repeated to add multiple groups.
    #[arg(long)]
    pub group: Vec<String>,
    /// Service accounts to bind to the role, in the format <namespace>:<name>.
    #[arg(long)]
    pub serviceaccount: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

/// A `--resource` value: `resource[.group][/subresource]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceArg {
    pub resource: String,
    pub group: String,
    pub subresource: String,
}

pub fn parse_resources(args: &[String]) -> Vec<ResourceArg> {
    let mut out = Vec::new();
    for r in args {
        let (head, sub) = r.split_once('/').unwrap_or((r.as_str(), ""));
        let (resource, group) = head.split_once('.').unwrap_or((head, ""));
        let one =
            ResourceArg { resource: resource.into(), group: group.into(), subresource: sub.into() };
        if resource == "*" && !head.contains('.') && !r.contains('/') {
            return vec![one];
        }
        out.push(one);
    }
    out
}

/// The rules of a role: one per API group (sorted), the resources resolved as `resolved` says,
/// then one for the non-resource URLs.
pub fn rules(
    verbs: &[String],
    resolved: &[(String, String)],
    resource_names: &[String],
    non_resource_urls: &[String],
) -> Vec<Node> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (group, resource) in resolved {
        match groups.iter_mut().find(|(g, _)| g == group) {
            Some((_, rs)) if rs.contains(resource) => {}
            Some((_, rs)) => rs.push(resource.clone()),
            None => groups.push((group.clone(), vec![resource.clone()])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Node> = groups
        .into_iter()
        .map(|(g, rs)| {
            let mut rule = Obj::new()
                .with("verbs", verbs.to_vec())
                .with("apiGroups", vec![g])
                .with("resources", rs);
            if !resource_names.is_empty() {
                rule.set("resourceNames", resource_names.to_vec());
            }
            rule.into()
        })
        .collect();
    if !non_resource_urls.is_empty() {
        out.push(
            Obj::new()
                .with("verbs", verbs.to_vec())
                .with("nonResourceURLs", non_resource_urls.to_vec())
                .into(),
        );
    }
    out
}

/// Checks the verbs a resource can take (`bind` only on roles…), as kubectl's
/// `validateResource`.
pub fn check_special_verbs(verbs: &[String], group: &str, resource: &str) -> Result<()> {
    for v in verbs {
        if let Some((_, allowed)) = SPECIAL_VERBS.iter().find(|(s, _)| s == v)
            && !allowed.iter().any(|(g, r)| *g == group && *r == resource)
        {
            return Err(CliError::Usage(format!(
                "can not perform '{v}' on '{resource}' in group '{group}'"
            )));
        }
    }
    Ok(())
}

/// The non-resource URL checks of `create clusterrole`.
pub fn check_non_resource(verbs: &[String], urls: &[String]) -> Result<()> {
    if urls.is_empty() {
        return Ok(());
    }
    if let Some(v) = verbs.iter().find(|v| !NON_RESOURCE_VERBS.contains(&v.as_str())) {
        return Err(CliError::Usage(format!("invalid verb: '{v}' for nonResourceURL")));
    }
    for u in urls {
        if u == "*" {
            continue;
        }
        if !u.starts_with('/') {
            return Err(CliError::Usage("nonResourceURL should start with /".into()));
        }
        if u[..u.len() - 1].contains('*') {
            return Err(CliError::Usage(
                "nonResourceURL only supports wildcard matches when '*' is at the end".into(),
            ));
        }
    }
    Ok(())
}

pub async fn role(f: &Factory, a: RoleArgs, cluster: bool) -> Result<()> {
    let command = if cluster { "clusterrole" } else { "role" };
    let name = one_name(&a.name, command)?;
    if !cluster && !a.non_resource_url.is_empty() {
        return Err(unknown_flag("non-resource-url", command));
    }
    if a.verb.is_empty() {
        return Err(CliError::Usage("at least one verb must be specified".into()));
    }
    let resources = parse_resources(&a.resource);
    if cluster && resources.is_empty() && a.non_resource_url.is_empty() {
        return Err(CliError::Usage("one of resource or nonResourceURL must be specified".into()));
    }
    if !cluster && resources.is_empty() {
        return Err(CliError::Usage("at least one resource must be specified".into()));
    }
    if !resources.is_empty() {
        for v in &a.verb {
            if !RESOURCE_VERBS.contains(&v.as_str()) {
                eprintln!("Warning: '{v}' is not a standard resource verb");
            }
        }
    }
    let mut resolved = Vec::new();
    for r in &resources {
        if r.resource.is_empty() {
            return Err(CliError::Usage(
                "resource must be specified if apiGroup/subresource specified".into(),
            ));
        }
        let (group, plural) = if r.resource == "*" {
            (r.group.clone(), r.resource.clone())
        } else {
            let arg = if r.group.is_empty() {
                r.resource.clone()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            let found = f.resource(&arg).await;
            let (group, plural) = match &found {
                Ok(res) => (res.group.clone(), res.plural.clone()),
                Err(_) => (r.group.clone(), r.resource.clone()),
            };
            check_special_verbs(&a.verb, &group, &plural)?;
            // kubectl prints a mapper's miss as it is, without `error: `.
            found.map_err(|e| match e {
                CliError::UnknownResource(r) => {
                    CliError::Plain(format!("the server doesn't have a resource type \"{r}\""))
                }
                e => e,
            })?;
            (group, plural)
        };
        let plural =
            if r.subresource.is_empty() { plural } else { format!("{plural}/{}", r.subresource) };
        resolved.push((group, plural));
    }
    check_non_resource(&a.verb, &a.non_resource_url)?;
    let rules = rules(&a.verb, &resolved, &a.resource_name, &a.non_resource_url);
    let (kind, ns) =
        if cluster { (CLUSTER_ROLE, None) } else { (ROLE, enforced_namespace(f).await?) };
    let object = kind.head(metadata(&name, ns.as_deref(), None)).with("rules", rules);
    emit(f, &a.common, kind, &name, object, None).await
}

/// cobra's refusal of a flag the command does not take.
fn unknown_flag(flag: &str, command: &str) -> CliError {
    CliError::Usage(format!(
        "unknown flag: --{flag}\nSee 'kubectl create {command} --help' for usage."
    ))
}

/// Subjects in kubectl's order: users, groups, then `namespace:name` service accounts.
pub fn subjects(users: &[String], groups: &[String], accounts: &[String]) -> Result<Vec<Node>> {
    let mut out: Vec<Node> = Vec::new();
    for (kind, names) in [("User", users), ("Group", groups)] {
        for n in names {
            out.push(Obj::new().with("kind", kind).with("apiGroup", RBAC).with("name", n).into());
        }
    }
    for sa in accounts {
        match sa.split(':').collect::<Vec<_>>().as_slice() {
            [ns, n] if !ns.is_empty() && !n.is_empty() => out.push(
                Obj::new()
                    .with("kind", "ServiceAccount")
                    .with("name", *n)
                    .with("namespace", *ns)
                    .into(),
            ),
            _ => {
                return Err(CliError::Usage(
                    "serviceaccount must be <namespace>:<name>".to_string(),
                ));
            }
        }
    }
    Ok(out)
}

pub fn binding_object(
    kind: Kind,
    name: &str,
    namespace: Option<&str>,
    subjects: Vec<Node>,
    role_kind: &str,
    role: &str,
) -> Obj {
    let mut o = kind.head(metadata(name, namespace, None));
    if !subjects.is_empty() {
        o.set("subjects", subjects);
    }
    o.with("roleRef", Obj::new().with("apiGroup", RBAC).with("kind", role_kind).with("name", role))
}

pub async fn binding(f: &Factory, a: BindingArgs, cluster: bool) -> Result<()> {
    let command = if cluster { "clusterrolebinding" } else { "rolebinding" };
    let name = one_name(&a.name, command)?;
    let (kind, role_kind, role) = if cluster {
        if a.role.is_some() {
            return Err(unknown_flag("role", command));
        }
        let Some(role) = a.clusterrole.as_deref() else {
            return Err(super::required_flags(&["clusterrole"]));
        };
        (CLUSTER_ROLE_BINDING, "ClusterRole", role)
    } else {
        match (a.role.as_deref(), a.clusterrole.as_deref()) {
            (Some(r), None) if !r.is_empty() => (ROLE_BINDING, "Role", r),
            (None, Some(r)) if !r.is_empty() => (ROLE_BINDING, "ClusterRole", r),
            _ => {
                return Err(CliError::Usage(
                    "exactly one of clusterrole or role must be specified".into(),
                ));
            }
        }
    };
    let subjects = subjects(&a.user, &a.group, &a.serviceaccount)?;
    let ns = if cluster { None } else { enforced_namespace(f).await? };
    let object = binding_object(kind, &name, ns.as_deref(), subjects, role_kind, role);
    emit(f, &a.common, kind, &name, object, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn resources_split_into_resource_group_and_subresource() {
        assert_eq!(
            parse_resources(&s(&["pods/log", "deployments.apps"])),
            vec![
                ResourceArg {
                    resource: "pods".into(),
                    group: "".into(),
                    subresource: "log".into()
                },
                ResourceArg {
                    resource: "deployments".into(),
                    group: "apps".into(),
                    subresource: "".into()
                },
            ]
        );
        assert_eq!(parse_resources(&s(&["pods", "*", "x"])).len(), 1);
    }

    #[test]
    fn a_rule_per_group_sorted_then_the_non_resource_urls() {
        let resolved = vec![
            ("apps".to_string(), "deployments".to_string()),
            ("".to_string(), "pods".to_string()),
            ("".to_string(), "pods".to_string()),
        ];
        let r = Node::List(rules(&s(&["get"]), &resolved, &s(&["a"]), &s(&["/x"])));
        assert_eq!(
            r.compact(),
            r#"[{"verbs":["get"],"apiGroups":[""],"resources":["pods"],"resourceNames":["a"]},{"verbs":["get"],"apiGroups":["apps"],"resources":["deployments"],"resourceNames":["a"]},{"verbs":["get"],"nonResourceURLs":["/x"]}]"#
        );
    }

    #[test]
    fn special_verbs_apply_only_to_their_resources() {
        assert!(check_special_verbs(&s(&["bind"]), RBAC, "roles").is_ok());
        assert_eq!(
            check_special_verbs(&s(&["get", "bind"]), "", "pods").unwrap_err().to_string(),
            "error: can not perform 'bind' on 'pods' in group ''"
        );
    }

    #[test]
    fn non_resource_urls_are_checked_as_kubectl_checks_them() {
        assert_eq!(
            check_non_resource(&s(&["list"]), &s(&["/x"])).unwrap_err().to_string(),
            "error: invalid verb: 'list' for nonResourceURL"
        );
        assert_eq!(
            check_non_resource(&s(&["get"]), &s(&["x"])).unwrap_err().to_string(),
            "error: nonResourceURL should start with /"
        );
        assert!(check_non_resource(&s(&["get"]), &s(&["/x/*", "*"])).is_ok());
        assert!(check_non_resource(&s(&["get"]), &s(&["/*/x"])).is_err());
    }

    #[test]
    fn a_binding_lists_users_groups_then_service_accounts() {
        let subs = subjects(&s(&["u"]), &s(&["g"]), &s(&["ns:sa"])).unwrap();
        let b = binding_object(ROLE_BINDING, "rb", None, subs, "Role", "r");
        assert_eq!(
            Node::Obj(b).compact(),
            r#"{"kind":"RoleBinding","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"rb"},"subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"u"},{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"g"},{"kind":"ServiceAccount","name":"sa","namespace":"ns"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}}"#
        );
        assert_eq!(
            subjects(&[], &[], &s(&["nons"])).unwrap_err().to_string(),
            "error: serviceaccount must be <namespace>:<name>"
        );
    }
}
