//! `explain` through kubectl-lite and the real kubectl v1.35 against apiserver-lite's OpenAPI
//! v3 documents: every served resource, by its plural, singular, short and `plural.group`
//! names, with and without `--recursive`; fields through references, lists, maps and `allOf`;
//! `--api-version`; and the refusals (an unknown type or field, a path that is no plain field
//! path, an unknown output format, OpenAPI v2, no argument, two). Outputs are compared byte
//! for byte, unmasked: explain's text has nothing server-specific.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

/// Every resource apiserver-lite serves, as `api-resources -o name` lists them.
const RESOURCES: &[&str] = &[
    "configmaps",
    "endpoints",
    "events",
    "namespaces",
    "nodes",
    "pods",
    "secrets",
    "serviceaccounts",
    "services",
    "controllerrevisions.apps",
    "daemonsets.apps",
    "deployments.apps",
    "replicasets.apps",
    "selfsubjectreviews.authentication.k8s.io",
    "tokenreviews.authentication.k8s.io",
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
    "subjectaccessreviews.authorization.k8s.io",
    "cronjobs.batch",
    "jobs.batch",
    "leases.coordination.k8s.io",
    "events.events.k8s.io",
    "nodes.metrics.k8s.io",
    "pods.metrics.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
    "clusterroles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "roles.rbac.authorization.k8s.io",
];

/// Fields and names beyond the resources themselves.
const FIELDS: &[&[&str]] = &[
    &["explain", "pod"],
    &["explain", "po.spec"],
    &["explain", "Pod.spec.containers"],
    &["explain", "pods.spec.containers.name"],
    &["explain", "pods.spec.containers.resources.limits"],
    &["explain", "pods.spec.containers.ports.protocol"],
    &["explain", "pods.spec.volumes.configMap.items"],
    &["explain", "pods.spec.affinity", "--recursive"],
    &["explain", "pods.status.conditions.type"],
    &["explain", "pods.metadata"],
    &["explain", "pods.metadata.labels"],
    &["explain", "pods.spec."],
    &["explain", "deploy.spec.strategy", "--recursive"],
    &["explain", "deployments.apps.spec.template.spec.containers.image"],
    &["explain", "svc.spec.ports"],
    &["explain", "nodes.status.capacity"],
    &["explain", "cronjobs.spec.jobTemplate.spec.podFailurePolicy", "--recursive"],
    &["explain", "events.events.k8s.io.regarding"],
    &["explain", "ev.involvedObject"],
    &["explain", "roles.rules"],
    &["explain", "leases.spec"],
    &["explain", "deployments", "--api-version=apps/v1"],
    &["explain", "deployments.spec", "--api-version=apps/v1"],
    &["explain", "deployments.apps", "--api-version=apps/v1"],
    &["explain", "pods", "--api-version=apps/v1"],
    &["explain", "pods", "-o", "plaintext"],
    // What is refused.
    &["explain", "pods.nope"],
    &["explain", "pods.spec.containers.nope.deeper"],
    &["explain", "nope"],
    &["explain", "nope.spec"],
    &["explain", "pods..spec"],
    &["explain", "pods.spec.containers[0]"],
    &["explain", "pods", "-o", "json"],
    &["explain", "pods", "-o", "plaintext-openapiv2"],
    &["explain"],
    &["explain", "pods", "nodes"],
];

#[test]
fn kubectl_lite_explains_every_served_resource_and_field_as_kubectl_does() {
    let mut script: Vec<Vec<&str>> = Vec::new();
    for r in RESOURCES {
        script.push(vec!["explain", r]);
        script.push(vec!["explain", r, "--recursive"]);
    }
    script.extend(FIELDS.iter().map(|s| s.to_vec()));
    let script: Vec<&[&str]> = script.iter().map(Vec::as_slice).collect();
    let raw = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let differences = e2e::apiserver::script_differences(&script, |_| {}, raw).unwrap();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
