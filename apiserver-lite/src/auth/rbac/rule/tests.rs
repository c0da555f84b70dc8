use super::*;
use crate::auth::User;
use crate::auth::authorizer::ResourceAttributes;

fn user() -> User {
    User { name: "u".into(), ..User::default() }
}

fn res<'a>(
    u: &'a User,
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes {
        user: u,
        verb,
        target: Target::Resource(ResourceAttributes {
            group,
            resource,
            subresource: sub,
            namespace: "a",
            name,
            field_selector: "",
        }),
    }
}

fn path<'a>(u: &'a User, verb: &'a str, p: &'a str) -> Attributes<'a> {
    Attributes { user: u, verb, target: Target::Path(p) }
}

#[test]
fn every_rule_shape_matches_as_upstream() {
    let u = user();
    let pods_read = resource_rule(&["get", "list"], &[""], &["pods"]);
    assert!(allows(&pods_read, &res(&u, "get", "", "pods", "", "")));
    assert!(!allows(&pods_read, &res(&u, "delete", "", "pods", "", "")), "verb");
    assert!(!allows(&pods_read, &res(&u, "get", "apps", "pods", "", "")), "group");
    assert!(
        !allows(&pods_read, &res(&u, "get", "", "pods", "log", "")),
        "a subresource is not its resource"
    );
    let log = resource_rule(&["get"], &[""], &["pods/log"]);
    assert!(allows(&log, &res(&u, "get", "", "pods", "log", "")));
    assert!(!allows(&log, &res(&u, "get", "", "pods", "", "")));
    let any_status = resource_rule(&["update"], &["*"], &["*/status"]);
    assert!(allows(&any_status, &res(&u, "update", "apps", "deployments", "status", "")));
    assert!(!allows(&any_status, &res(&u, "update", "apps", "deployments", "scale", "")));
    assert!(!allows(&any_status, &res(&u, "update", "apps", "deployments", "", "")));
    let all = resource_rule(&["*"], &["*"], &["*"]);
    assert!(allows(&all, &res(&u, "escalate", "x.io", "widgets", "sub", "w")));
    assert!(!allows(&all, &path(&u, "get", "/version")), "resource rules do not grant paths");
    let named =
        named_rule(&["get", "update"], &["coordination.k8s.io"], &["leases"], &["kube-scheduler"]);
    assert!(allows(&named, &res(&u, "get", "coordination.k8s.io", "leases", "", "kube-scheduler")));
    assert!(!allows(&named, &res(&u, "get", "coordination.k8s.io", "leases", "", "other")));
    assert!(
        !allows(&named, &res(&u, "list", "coordination.k8s.io", "leases", "", "")),
        "a list has no name"
    );
    let urls = url_rule(&["get"], &["/healthz", "/apis/*"]);
    assert!(allows(&urls, &path(&u, "get", "/healthz")));
    assert!(allows(&urls, &path(&u, "get", "/apis/apps/v1")));
    assert!(!allows(&urls, &path(&u, "get", "/healthz/etcd")));
    assert!(!allows(&urls, &path(&u, "post", "/healthz")));
    assert!(
        !allows(&urls, &res(&u, "get", "", "pods", "", "")),
        "URL rules do not grant resources"
    );
    assert!(allows(&url_rule(&["*"], &["*"]), &path(&u, "delete", "/anything")));
}

#[test]
fn coverage_breaks_rules_down_and_honours_wildcards() {
    let owner = [
        resource_rule(&["get", "list"], &[""], &["pods", "*/log"]),
        named_rule(&["update"], &[""], &["configmaps"], &["a"]),
        url_rule(&["get"], &["/apis/*"]),
    ];
    let fine = [
        resource_rule(&["get"], &[""], &["pods", "pods/log"]),
        named_rule(&["update"], &[""], &["configmaps"], &["a"]),
        url_rule(&["get"], &["/apis/apps"]),
    ];
    assert!(covers(&owner, &fine).is_empty());
    let more = [
        resource_rule(&["get", "delete"], &[""], &["pods", "secrets"]),
        resource_rule(&["update"], &[""], &["configmaps"]),
    ];
    let missing: Vec<String> = compact(covers(&owner, &more)).iter().map(compact_string).collect();
    assert_eq!(
        missing,
        [
            "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}",
            "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}",
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"update\"]}",
        ]
    );
    let everything = [resource_rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])];
    assert!(covers(&everything, &more).is_empty());
    assert!(!covers(&more, &everything).is_empty());
}
