//! Roles, cluster roles and their bindings (`rbac.authorization.k8s.io/v1`), as upstream's
//! `pkg/apis/rbac/validation` and `v1` defaults: names are path segments (`system:node` is
//! valid), every rule has verbs and either resources with API groups or non-resource URLs (the
//! latter only in cluster roles), an aggregation rule has selectors, a binding's `roleRef` names
//! a Role or ClusterRole of the RBAC group and never changes, and its subjects are Users,
//! Groups or ServiceAccounts.

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef,
    Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The API group of roles and bindings.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// A value rendered as given (a JSON document).
struct Raw(String);

impl api::validation::Value for Raw {
    fn render(&self) -> String {
        self.0.clone()
    }
}

fn json<T: serde::Serialize>(v: &T) -> Raw {
    Raw(serde_json::to_string(v).unwrap_or_default())
}

/// Upstream's v1 defaults: a binding's `roleRef.apiGroup` and its User and Group subjects'
/// `apiGroup` are the RBAC group.
pub fn default_role_binding(b: &mut RoleBinding) {
    default_binding(&mut b.role_ref, b.subjects.as_mut());
}

pub fn default_cluster_role_binding(b: &mut ClusterRoleBinding) {
    default_binding(&mut b.role_ref, b.subjects.as_mut());
}

fn default_binding(role_ref: &mut RoleRef, subjects: Option<&mut Vec<Subject>>) {
    if role_ref.api_group.is_empty() {
        role_ref.api_group = GROUP.into();
    }
    for s in subjects.into_iter().flatten() {
        if s.api_group.as_deref().unwrap_or_default().is_empty() {
            match s.kind.as_str() {
                "User" | "Group" => s.api_group = Some(GROUP.into()),
                "ServiceAccount" => s.api_group = Some(String::new()),
                _ => {}
            }
        }
    }
}

/// Upstream's `IsValidPathSegmentName`.
pub fn path_segment_name(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// `ValidateObjectMeta` with RBAC's name rule.
fn validate_meta(meta: &ObjectMeta, namespaced: bool) -> ErrorList {
    let path = Path::root("metadata");
    let mut m = meta.clone();
    let name = m.name.clone().unwrap_or_default();
    if !name.is_empty() {
        m.name = Some("x".into());
    }
    if !namespaced {
        m.namespace = Some("cluster-scoped".into());
    }
    let mut errs = api::validation::pod::validate_object_meta(&m, &path);
    for msg in path_segment_name(&name) {
        errs.push(FieldError::invalid(&path.child("name"), name.as_str(), msg));
    }
    errs
}

fn validate_rule(rule: &PolicyRule, namespaced: bool, path: &Path, errs: &mut ErrorList) {
    if rule.verbs.is_empty() {
        errs.push(FieldError::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = rule.non_resource_urls.as_deref().unwrap_or_default();
    let len = |v: &Option<Vec<String>>| v.as_deref().map_or(0, <[String]>::len);
    if !urls.is_empty() {
        let at = path.child("nonResourceURLs");
        if namespaced {
            errs.push(FieldError::invalid(
                &at,
                json(&urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if len(&rule.api_groups) + len(&rule.resources) + len(&rule.resource_names) > 0 {
            errs.push(FieldError::invalid(
                &at,
                json(&urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return;
    }
    if len(&rule.api_groups) == 0 {
        errs.push(FieldError::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if len(&rule.resources) == 0 {
        errs.push(FieldError::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
}

fn validate_rules(rules: Option<&[PolicyRule]>, namespaced: bool) -> ErrorList {
    let mut errs = ErrorList::default();
    let path = Path::root("rules");
    for (i, r) in rules.unwrap_or_default().iter().enumerate() {
        validate_rule(r, namespaced, &path.index(i), &mut errs);
    }
    errs
}

pub fn validate_role(role: &Role) -> ErrorList {
    let mut errs = validate_meta(&role.metadata, true);
    errs.extend(validate_rules(role.rules.as_deref(), true));
    errs
}

pub fn validate_cluster_role(role: &ClusterRole) -> ErrorList {
    let mut errs = validate_meta(&role.metadata, false);
    errs.extend(validate_rules(role.rules.as_deref(), false));
    if let Some(AggregationRule { cluster_role_selectors }) = &role.aggregation_rule {
        let path = Path::root("aggregationRule").child("clusterRoleSelectors");
        let selectors = cluster_role_selectors.as_deref().unwrap_or_default();
        if selectors.is_empty() {
            errs.push(FieldError::required(
                &path,
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, s) in selectors.iter().enumerate() {
            errs.extend(api::validation::selector::validate_label_selector(
                Some(s),
                &path.index(i),
            ));
        }
    }
    errs
}

fn validate_role_ref(r: &RoleRef, errs: &mut ErrorList) {
    let path = Path::root("roleRef");
    if r.api_group != GROUP {
        errs.push(FieldError::not_supported(
            &path.child("apiGroup"),
            r.api_group.as_str(),
            &[GROUP],
        ));
    }
    if !matches!(r.kind.as_str(), "Role" | "ClusterRole") {
        errs.push(FieldError::not_supported(
            &path.child("kind"),
            r.kind.as_str(),
            &["Role", "ClusterRole"],
        ));
    }
    if r.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else {
        for msg in path_segment_name(&r.name) {
            errs.push(FieldError::invalid(&path.child("name"), r.name.as_str(), msg));
        }
    }
}

fn validate_subject(s: &Subject, namespaced: bool, path: &Path, errs: &mut ErrorList) {
    if s.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    let group = s.api_group.as_deref().unwrap_or_default();
    match s.kind.as_str() {
        "ServiceAccount" => {
            if !s.name.is_empty() {
                for msg in api::validation::names::dns1123_subdomain_all(&s.name) {
                    errs.push(FieldError::invalid(&path.child("name"), s.name.as_str(), msg));
                }
            }
            if !group.is_empty() {
                errs.push(FieldError::not_supported(&path.child("apiGroup"), group, &[""]));
            }
            if !namespaced && s.namespace.as_deref().unwrap_or_default().is_empty() {
                errs.push(FieldError::required(&path.child("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if group != GROUP {
                errs.push(FieldError::not_supported(&path.child("apiGroup"), group, &[GROUP]));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

fn validate_binding(
    meta: &ObjectMeta,
    role_ref: &RoleRef,
    subjects: Option<&[Subject]>,
    namespaced: bool,
) -> ErrorList {
    let mut errs = validate_meta(meta, namespaced);
    validate_role_ref(role_ref, &mut errs);
    let path = Path::root("subjects");
    for (i, s) in subjects.unwrap_or_default().iter().enumerate() {
        validate_subject(s, namespaced, &path.index(i), &mut errs);
    }
    errs
}

pub fn validate_role_binding(b: &RoleBinding) -> ErrorList {
    validate_binding(&b.metadata, &b.role_ref, b.subjects.as_deref(), true)
}

pub fn validate_cluster_role_binding(b: &ClusterRoleBinding) -> ErrorList {
    validate_binding(&b.metadata, &b.role_ref, b.subjects.as_deref(), false)
}

/// A binding's `roleRef` never changes (upstream: delete and create the binding instead).
pub fn validate_role_ref_update(new: &RoleRef, old: &RoleRef) -> ErrorList {
    let mut errs = ErrorList::default();
    if new != old {
        errs.push(FieldError::invalid(&Path::root("roleRef"), json(new), "cannot change roleRef"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.0.iter().map(|e| format!("{}: {}", e.field, e.message())).collect()
    }

    fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
        ObjectMeta { name: Some(name.into()), namespace: ns.map(Into::into), ..Default::default() }
    }

    #[test]
    fn rbac_names_are_path_segments() {
        let ok = ClusterRole { metadata: meta("system:node", None), ..Default::default() };
        assert!(
            validate_cluster_role(&ok).0.is_empty(),
            "{:?}",
            messages(&validate_cluster_role(&ok))
        );
        let bad = ClusterRole { metadata: meta("a/b%c", None), ..Default::default() };
        let got = messages(&validate_cluster_role(&bad));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("may not contain '/'"), "{got:?}");
    }

    #[test]
    fn rules_need_verbs_and_resources_or_cluster_urls() {
        let rules = vec![
            PolicyRule::default(),
            PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(vec!["/healthz".into()]),
                resources: Some(vec!["pods".into()]),
                ..Default::default()
            },
        ];
        let role = Role { metadata: meta("r", Some("a")), rules: Some(rules) };
        let got = messages(&validate_role(&role));
        assert_eq!(
            got,
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
                "rules[1].nonResourceURLs: Invalid value: [\"/healthz\"]: rules cannot apply to both regular resources and non-resource URLs",
            ]
        );
        let agg = ClusterRole {
            metadata: meta("c", None),
            aggregation_rule: Some(AggregationRule { cluster_role_selectors: Some(vec![]) }),
            ..Default::default()
        };
        assert_eq!(
            messages(&validate_cluster_role(&agg)),
            [
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
    }

    #[test]
    fn bindings_name_a_role_of_the_group_and_known_subject_kinds() {
        let mut b = ClusterRoleBinding {
            metadata: meta("b", None),
            role_ref: RoleRef {
                api_group: String::new(),
                kind: "Secret".into(),
                name: String::new(),
            },
            subjects: Some(vec![
                Subject { kind: "User".into(), name: "alice".into(), ..Default::default() },
                Subject { kind: "ServiceAccount".into(), name: "web".into(), ..Default::default() },
                Subject { kind: "Robot".into(), name: "r2".into(), ..Default::default() },
            ]),
        };
        default_cluster_role_binding(&mut b);
        assert_eq!(b.role_ref.api_group, GROUP);
        assert_eq!(b.subjects.as_ref().unwrap()[0].api_group.as_deref(), Some(GROUP));
        assert_eq!(
            messages(&validate_cluster_role_binding(&b)),
            [
                "roleRef.kind: Unsupported value: \"Secret\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
                "subjects[1].namespace: Required value",
                "subjects[2].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
            ]
        );
        let old =
            RoleRef { api_group: GROUP.into(), kind: "ClusterRole".into(), name: "view".into() };
        let new = RoleRef { name: "edit".into(), ..old.clone() };
        assert_eq!(
            messages(&validate_role_ref_update(&new, &old)),
            [
                "roleRef: Invalid value: {\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"edit\"}: cannot change roleRef"
            ]
        );
    }
}
