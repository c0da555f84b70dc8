use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde_json::json;

use super::*;
use crate::auth::rbac::rule::resource_rule;
use crate::objects::rbac::GROUP;

fn expected_view_reader() -> ClusterRole {
    serde_json::from_value(json!({
        "metadata": {"name": "r", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                     "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}],
    }))
    .unwrap()
}

#[test]
fn an_absent_role_is_created_and_a_present_one_gets_what_it_lacks_and_keeps_the_rest() {
    let expected = expected_view_reader();
    assert_eq!(role(None, &expected), Action::Create(expected.clone()));
    let mut existing = expected.clone();
    existing.rules = Some(vec![
        resource_rule(&["get"], &[""], &["pods"]),
        resource_rule(&["delete"], &[""], &["secrets"]),
    ]);
    existing.metadata.labels = Some([("mine".to_string(), "yes".to_string())].into());
    let Action::Update(got) = role(Some(&existing), &expected) else { panic!("an update") };
    let rules = got.rules.unwrap();
    assert_eq!(rules[1], resource_rule(&["delete"], &[""], &["secrets"]), "extra rules stay");
    assert_eq!(
        rules[2],
        resource_rule(&["list"], &[""], &["pods"]),
        "the missing permission is added"
    );
    let labels = got.metadata.labels.unwrap();
    assert_eq!(
        (labels["mine"].as_str(), labels["kubernetes.io/bootstrapping"].as_str()),
        ("yes", "rbac-defaults")
    );
    assert_eq!(role(Some(&expected), &expected), Action::Keep, "nothing to do");
}

#[test]
fn autoupdate_false_is_left_alone() {
    let expected = expected_view_reader();
    let mut existing = expected.clone();
    existing.rules = Some(vec![]);
    existing.metadata.annotations = Some([(AUTOUPDATE.to_string(), "false".to_string())].into());
    assert_eq!(role(Some(&existing), &expected), Action::Keep);
    let b = policy::cluster_role_bindings().into_iter().next().unwrap();
    let mut stripped = b.clone();
    stripped.subjects = Some(vec![]);
    stripped.metadata.annotations = Some([(AUTOUPDATE.to_string(), "false".to_string())].into());
    assert_eq!(binding(Some(&stripped), &b), Action::Keep);
}

#[test]
fn bindings_get_missing_subjects_and_are_made_again_for_another_role() {
    let expected: ClusterRoleBinding = policy::cluster_role_bindings()
        .into_iter()
        .find(|b| b.metadata.name.as_deref() == Some("system:basic-user"))
        .unwrap();
    let mut existing = expected.clone();
    existing.subjects = Some(vec![k8s_openapi::api::rbac::v1::Subject {
        kind: "User".into(),
        name: "extra".into(),
        api_group: Some(GROUP.into()),
        namespace: None,
    }]);
    let Action::Update(got) = binding(Some(&existing), &expected) else { panic!("an update") };
    let names: Vec<&str> = got.subjects.iter().flatten().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["extra", "system:authenticated"]);
    existing.role_ref.name = "other".into();
    assert!(
        matches!(binding(Some(&existing), &expected), Action::Recreate(b) if b.role_ref.name == "system:basic-user")
    );
}

#[test]
fn the_policy_has_upstreams_roles_labelled_and_annotated() {
    let roles = policy::cluster_roles();
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:aggregate-to-view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
        "system:kube-scheduler",
        "system:kube-controller-manager",
        "system:node-proxier",
        "system:auth-delegator",
        "system:monitoring",
        "system:controller:replicaset-controller",
        "system:controller:generic-garbage-collector",
    ] {
        let r = roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(
            r.metadata.labels.as_ref().unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert_eq!(r.metadata.annotations.as_ref().unwrap()[AUTOUPDATE], "true");
    }
    let view = roles.iter().find(|r| r.metadata.name.as_deref() == Some("view")).unwrap();
    assert_eq!(
        view.metadata.labels.as_ref().unwrap()["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    let bindings = policy::cluster_role_bindings();
    let rs = bindings
        .iter()
        .find(|b| b.metadata.name.as_deref() == Some("system:controller:replicaset-controller"))
        .unwrap();
    let s = &rs.subjects.as_ref().unwrap()[0];
    assert_eq!(
        (s.kind.as_str(), s.name.as_str(), s.namespace.as_deref()),
        ("ServiceAccount", "replicaset-controller", Some("kube-system"))
    );
}
