//! The bootstrap policy, as upstream's `bootstrappolicy` (`policy.go`, `controller_policy.go`):
//! the cluster roles and cluster role bindings every cluster starts with, each labelled
//! `kubernetes.io/bootstrapping: rbac-defaults` and annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`. Controller roles are those of the
//! controllers this repository's controller-manager runs, bound to their service accounts in
//! `kube-system`. [`super::reconcile`] keeps them in the store.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::rule::{named_rule, resource_rule, url_rule};
use crate::objects::rbac::GROUP;

/// The label every bootstrap object carries.
pub const BOOTSTRAP_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// The annotation that lets reconciliation change an object (`"false"` leaves it alone).
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The prefix of controller roles; the rest names the controller and its service account.
pub const CONTROLLER_PREFIX: &str = "system:controller:";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] =
    &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

const CORE: &str = "";
const APPS: &str = "apps";
const AUTHN: &str = "authentication.k8s.io";
const AUTHZ: &str = "authorization.k8s.io";
const AUTOSCALING: &str = "autoscaling";
const BATCH: &str = "batch";
const CERTIFICATES: &str = "certificates.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const EVENTS: &str = "events.k8s.io";
const EXTENSIONS: &str = "extensions";
const METRICS: &str = "metrics.k8s.io";
const NETWORKING: &str = "networking.k8s.io";
const NODE: &str = "node.k8s.io";
const POLICY: &str = "policy";
const RESOURCE: &str = "resource.k8s.io";
const STORAGE: &str = "storage.k8s.io";

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    let mut l: BTreeMap<String, String> =
        labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    l.insert(BOOTSTRAP_LABEL.0.into(), BOOTSTRAP_LABEL.1.into());
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(l),
        annotations: Some([(AUTOUPDATE.to_string(), "true".to_string())].into()),
        ..Default::default()
    }
}

fn role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole { metadata: meta(name, &[]), rules: Some(rules), aggregation_rule: None }
}

fn labelled(name: &str, label: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, &[(label, "true")]),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// A role whose rules are those of the roles labelled `<label>: "true"`.
fn aggregate(name: &str, label: &str, own: Option<&str>) -> ClusterRole {
    let labels: Vec<(&str, &str)> = own.iter().map(|l| (*l, "true")).collect();
    let selector = LabelSelector {
        match_labels: Some([(label.to_string(), "true".to_string())].into()),
        ..Default::default()
    };
    ClusterRole {
        metadata: meta(name, &labels),
        rules: None,
        aggregation_rule: Some(AggregationRule { cluster_role_selectors: Some(vec![selector]) }),
    }
}

fn events_rule() -> PolicyRule {
    resource_rule(&["create", "update", "patch"], &[CORE, EVENTS], &["events"])
}

const TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// Upstream's `clusterRoles()` (the ones this cluster has a use for).
fn cluster_roles_base() -> Vec<ClusterRole> {
    vec![
        role(
            "cluster-admin",
            vec![resource_rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        role(
            "system:discovery",
            vec![url_rule(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        role(
            "system:monitoring",
            vec![url_rule(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        role(
            "system:basic-user",
            vec![
                resource_rule(
                    &["create"],
                    &[AUTHZ],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                resource_rule(&["create"], &[AUTHN], &["selfsubjectreviews"]),
            ],
        ),
        role(
            "system:public-info-viewer",
            vec![url_rule(&["get"], &["/livez", "/readyz", "/healthz", "/version", "/version/"])],
        ),
        aggregate("admin", TO_ADMIN, None),
        aggregate("edit", TO_EDIT, Some(TO_ADMIN)),
        aggregate("view", TO_VIEW, Some(TO_EDIT)),
        labelled(
            "system:aggregate-to-admin",
            TO_ADMIN,
            vec![
                resource_rule(&["create"], &[AUTHZ], &["localsubjectaccessreviews"]),
                resource_rule(READ_WRITE, &[GROUP], &["roles", "rolebindings"]),
            ],
        ),
        labelled(
            "system:aggregate-to-edit",
            TO_EDIT,
            vec![
                resource_rule(
                    READ,
                    &[CORE],
                    &[
                        "pods/attach",
                        "pods/proxy",
                        "pods/exec",
                        "pods/portforward",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                resource_rule(&["impersonate"], &[CORE], &["serviceaccounts"]),
                resource_rule(
                    WRITE,
                    &[CORE],
                    &["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"],
                ),
                resource_rule(&["create"], &[CORE], &["pods/eviction"]),
                resource_rule(
                    WRITE,
                    &[CORE],
                    &[
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                        "persistentvolumeclaims",
                        "configmaps",
                        "secrets",
                    ],
                ),
                resource_rule(&["create"], &[CORE], &["serviceaccounts/token"]),
                resource_rule(
                    WRITE,
                    &[APPS],
                    &[
                        "statefulsets",
                        "statefulsets/scale",
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "replicasets",
                        "replicasets/scale",
                    ],
                ),
                resource_rule(WRITE, &[AUTOSCALING], &["horizontalpodautoscalers"]),
                resource_rule(WRITE, &[BATCH], &["jobs", "cronjobs"]),
                resource_rule(
                    WRITE,
                    &[EXTENSIONS],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "ingresses",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                resource_rule(WRITE, &[POLICY], &["poddisruptionbudgets"]),
                resource_rule(WRITE, &[NETWORKING], &["networkpolicies", "ingresses"]),
            ],
        ),
        // What metrics-server's manifest adds; this server serves metrics.k8s.io itself.
        ClusterRole {
            metadata: meta(
                "system:aggregated-metrics-reader",
                &[(TO_ADMIN, "true"), (TO_EDIT, "true"), (TO_VIEW, "true")],
            ),
            rules: Some(vec![resource_rule(READ, &[METRICS], &["pods", "nodes"])]),
            aggregation_rule: None,
        },
        labelled(
            "system:aggregate-to-view",
            TO_VIEW,
            vec![
                resource_rule(
                    READ,
                    &[CORE],
                    &[
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "configmaps",
                    ],
                ),
                resource_rule(
                    READ,
                    &[CORE],
                    &[
                        "limitranges",
                        "resourcequotas",
                        "bindings",
                        "events",
                        "pods/status",
                        "resourcequotas/status",
                        "namespaces/status",
                        "replicationcontrollers/status",
                        "pods/log",
                    ],
                ),
                resource_rule(READ, &[CORE], &["namespaces"]),
                resource_rule(READ, &[DISCOVERY], &["endpointslices"]),
                resource_rule(
                    READ,
                    &[APPS],
                    &[
                        "controllerrevisions",
                        "statefulsets",
                        "statefulsets/status",
                        "statefulsets/scale",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/status",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/status",
                        "replicasets/scale",
                    ],
                ),
                resource_rule(
                    READ,
                    &[AUTOSCALING],
                    &["horizontalpodautoscalers", "horizontalpodautoscalers/status"],
                ),
                resource_rule(
                    READ,
                    &[BATCH],
                    &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
                ),
                resource_rule(
                    READ,
                    &[EXTENSIONS],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                resource_rule(
                    READ,
                    &[POLICY],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                resource_rule(
                    READ,
                    &[NETWORKING],
                    &["networkpolicies", "ingresses", "ingresses/status"],
                ),
            ],
        ),
        // Unbound, as upstream: the Node authorizer evaluates these rules for nodes itself.
        role("system:node", node_rules()),
        role(
            "system:node-proxier",
            vec![
                resource_rule(&["list", "watch"], &[CORE], &["services", "endpoints"]),
                resource_rule(READ, &[CORE], &["nodes"]),
                events_rule(),
                resource_rule(&["list", "watch"], &[DISCOVERY], &["endpointslices"]),
            ],
        ),
        role(
            "system:auth-delegator",
            vec![
                resource_rule(&["create"], &[AUTHN], &["tokenreviews"]),
                resource_rule(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
            ],
        ),
        role(
            "system:kube-controller-manager",
            vec![
                events_rule(),
                resource_rule(&["create"], &[COORDINATION], &["leases"]),
                named_rule(
                    &["get", "update"],
                    &[COORDINATION],
                    &["leases"],
                    &["kube-controller-manager"],
                ),
                resource_rule(&["create"], &[CORE], &["secrets", "serviceaccounts"]),
                resource_rule(&["delete"], &[CORE], &["secrets"]),
                resource_rule(
                    &["get"],
                    &[CORE],
                    &["namespaces", "secrets", "serviceaccounts", "configmaps"],
                ),
                resource_rule(&["update"], &[CORE], &["secrets", "serviceaccounts"]),
                resource_rule(&["create"], &[AUTHN], &["tokenreviews"]),
                resource_rule(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
                resource_rule(&["list", "watch"], &["*"], &["*"]),
                resource_rule(&["create"], &[CORE], &["serviceaccounts/token"]),
            ],
        ),
        role(
            "system:kube-scheduler",
            vec![
                events_rule(),
                resource_rule(&["create"], &[COORDINATION], &["leases"]),
                named_rule(&["get", "update"], &[COORDINATION], &["leases"], &["kube-scheduler"]),
                resource_rule(READ, &[CORE], &["nodes"]),
                resource_rule(&["get", "list", "watch", "delete"], &[CORE], &["pods"]),
                resource_rule(&["create"], &[CORE], &["pods/binding", "bindings"]),
                resource_rule(&["patch", "update"], &[CORE], &["pods/status"]),
                resource_rule(READ, &[CORE], &["services", "replicationcontrollers"]),
                resource_rule(READ, &[APPS, EXTENSIONS], &["replicasets"]),
                resource_rule(READ, &[APPS], &["statefulsets"]),
                resource_rule(READ, &[POLICY], &["poddisruptionbudgets"]),
                resource_rule(READ, &[CORE], &["persistentvolumeclaims", "persistentvolumes"]),
                resource_rule(&["create"], &[AUTHN], &["tokenreviews"]),
                resource_rule(&["create"], &[AUTHZ], &["subjectaccessreviews"]),
                resource_rule(READ, &[STORAGE], &["csinodes"]),
                resource_rule(READ, &[CORE], &["namespaces"]),
                resource_rule(READ, &[STORAGE], &["csidrivers", "csistoragecapacities"]),
            ],
        ),
        role(
            "system:volume-scheduler",
            vec![
                resource_rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                resource_rule(READ, &[STORAGE], &["storageclasses"]),
                resource_rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
            ],
        ),
        role(
            "system:service-account-issuer-discovery",
            vec![url_rule(&["get"], &["/.well-known/openid-configuration", "/openid/v1/jwks"])],
        ),
    ]
}

/// Upstream's `NodeRules()` with v1.35's default feature gates: what every node may do
/// beyond what the Node authorizer decides from its graph (`system:node`, unbound; the
/// authorizer evaluates these rules itself).
pub fn node_rules() -> Vec<PolicyRule> {
    vec![
        resource_rule(&["create"], &[AUTHN], &["tokenreviews"]),
        resource_rule(
            &["create"],
            &[AUTHZ],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        resource_rule(READ, &[CORE], &["services"]),
        resource_rule(&["create", "get", "list", "watch"], &[CORE], &["nodes"]),
        resource_rule(&["update", "patch"], &[CORE], &["nodes/status"]),
        resource_rule(&["update", "patch"], &[CORE], &["nodes"]),
        resource_rule(&["create", "update", "patch"], &[CORE], &["events"]),
        resource_rule(READ, &[CORE], &["pods"]),
        resource_rule(&["create", "delete"], &[CORE], &["pods"]),
        resource_rule(&["update", "patch"], &[CORE], &["pods/status"]),
        resource_rule(&["create"], &[CORE], &["pods/eviction"]),
        resource_rule(READ, &[CORE], &["secrets", "configmaps"]),
        resource_rule(&["get"], &[CORE], &["persistentvolumeclaims", "persistentvolumes"]),
        resource_rule(&["get"], &[CORE], &["endpoints"]),
        resource_rule(
            &["create", "get", "list", "watch"],
            &[CERTIFICATES],
            &["certificatesigningrequests"],
        ),
        resource_rule(
            &["get", "create", "update", "patch", "delete"],
            &[COORDINATION],
            &["leases"],
        ),
        resource_rule(&["get"], &[STORAGE], &["volumeattachments"]),
        resource_rule(&["create"], &[CORE], &["serviceaccounts/token"]),
        resource_rule(&["get", "update", "patch"], &[CORE], &["persistentvolumeclaims/status"]),
        resource_rule(READ, &[STORAGE], &["csidrivers"]),
        resource_rule(&["get", "create", "update", "patch", "delete"], &[STORAGE], &["csinodes"]),
        resource_rule(READ, &[NODE], &["runtimeclasses"]),
        resource_rule(&["get"], &[RESOURCE], &["resourceclaims"]),
        resource_rule(&["deletecollection"], &[RESOURCE], &["resourceslices"]),
        // KubeletServiceAccountTokenForCredentialProviders, on by default since v1.34.
        resource_rule(&["get"], &[CORE], &["serviceaccounts"]),
    ]
}

/// Upstream's controller roles, for the controllers `controllers/src` runs.
fn controller_roles() -> Vec<ClusterRole> {
    let c = |name: &str, rules: Vec<PolicyRule>| role(&format!("{CONTROLLER_PREFIX}{name}"), rules);
    vec![
        c(
            "cronjob-controller",
            vec![
                resource_rule(&["get", "list", "watch", "update"], &[BATCH], &["cronjobs"]),
                resource_rule(
                    &["get", "list", "watch", "create", "update", "delete", "patch"],
                    &[BATCH],
                    &["jobs"],
                ),
                resource_rule(&["update"], &[BATCH], &["cronjobs/status"]),
                resource_rule(&["update"], &[BATCH], &["cronjobs/finalizers"]),
                resource_rule(&["list", "watch", "delete"], &[CORE], &["pods"]),
                events_rule(),
            ],
        ),
        c(
            "daemon-set-controller",
            vec![
                resource_rule(READ, &[EXTENSIONS, APPS], &["daemonsets"]),
                resource_rule(&["update"], &[EXTENSIONS, APPS], &["daemonsets/status"]),
                resource_rule(&["update"], &[EXTENSIONS, APPS], &["daemonsets/finalizers"]),
                resource_rule(&["list", "watch"], &[CORE], &["nodes"]),
                resource_rule(&["list", "watch", "create", "delete", "patch"], &[CORE], &["pods"]),
                resource_rule(&["create"], &[CORE], &["pods/binding"]),
                resource_rule(
                    &["get", "list", "watch", "create", "delete", "update", "patch"],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                events_rule(),
            ],
        ),
        c(
            "deployment-controller",
            vec![
                resource_rule(
                    &["get", "list", "watch", "update"],
                    &[EXTENSIONS, APPS],
                    &["deployments"],
                ),
                resource_rule(&["update"], &[EXTENSIONS, APPS], &["deployments/status"]),
                resource_rule(&["update"], &[EXTENSIONS, APPS], &["deployments/finalizers"]),
                resource_rule(
                    &["get", "list", "watch", "create", "update", "patch", "delete"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                resource_rule(&["get", "list", "watch", "update"], &[CORE], &["pods"]),
                events_rule(),
            ],
        ),
        c(
            "generic-garbage-collector",
            vec![
                resource_rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events_rule(),
            ],
        ),
        c(
            "job-controller",
            vec![
                resource_rule(&["get", "list", "watch", "update", "patch"], &[BATCH], &["jobs"]),
                resource_rule(&["update"], &[BATCH], &["jobs/status"]),
                resource_rule(&["update"], &[BATCH], &["jobs/finalizers"]),
                resource_rule(&["list", "watch", "create", "delete", "patch"], &[CORE], &["pods"]),
                events_rule(),
            ],
        ),
        c(
            "node-controller",
            vec![
                resource_rule(
                    &["get", "list", "watch", "update", "delete", "patch"],
                    &[CORE],
                    &["nodes"],
                ),
                resource_rule(&["patch", "update"], &[CORE], &["nodes/status"]),
                resource_rule(&["patch", "update"], &[CORE], &["pods/status"]),
                resource_rule(&["list", "watch", "get", "delete"], &[CORE], &["pods"]),
                events_rule(),
            ],
        ),
        c(
            "pod-garbage-collector",
            vec![
                resource_rule(&["list", "watch", "delete"], &[CORE], &["pods"]),
                resource_rule(READ, &[CORE], &["nodes"]),
                resource_rule(&["patch"], &[CORE], &["pods/status"]),
            ],
        ),
        c(
            "replicaset-controller",
            vec![
                resource_rule(
                    &["get", "list", "watch", "update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                resource_rule(&["update"], &[APPS, EXTENSIONS], &["replicasets/status"]),
                resource_rule(&["update"], &[APPS, EXTENSIONS], &["replicasets/finalizers"]),
                resource_rule(&["list", "watch", "patch", "create", "delete"], &[CORE], &["pods"]),
                events_rule(),
            ],
        ),
        c(
            "root-ca-cert-publisher",
            vec![resource_rule(&["create", "update"], &[CORE], &["configmaps"]), events_rule()],
        ),
        c(
            "service-account-controller",
            vec![resource_rule(&["create"], &[CORE], &["serviceaccounts"]), events_rule()],
        ),
        c(
            "ttl-after-finished-controller",
            vec![
                resource_rule(&["get", "list", "watch", "delete"], &[BATCH], &["jobs"]),
                events_rule(),
            ],
        ),
    ]
}

/// Every bootstrap cluster role.
pub fn cluster_roles() -> Vec<ClusterRole> {
    let mut roles = cluster_roles_base();
    roles.extend(controller_roles());
    roles
}

fn subject(kind: &str, name: &str, namespace: Option<&str>) -> Subject {
    Subject {
        kind: kind.into(),
        name: name.into(),
        api_group: Some(if kind == "ServiceAccount" { String::new() } else { GROUP.into() }),
        namespace: namespace.map(Into::into),
    }
}

fn group(name: &str) -> Subject {
    subject("Group", name, None)
}

fn user(name: &str) -> Subject {
    subject("User", name, None)
}

fn binding(role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(role, &[]),
        role_ref: RoleRef {
            api_group: GROUP.into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(subjects),
    }
}

/// Every bootstrap cluster role binding: upstream's, and each controller role bound to its
/// service account in `kube-system`.
pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    let mut out = vec![
        binding("cluster-admin", vec![group("system:masters")]),
        binding("system:monitoring", vec![group("system:monitoring")]),
        binding("system:discovery", vec![group("system:authenticated")]),
        binding("system:basic-user", vec![group("system:authenticated")]),
        binding(
            "system:public-info-viewer",
            vec![group("system:authenticated"), group("system:unauthenticated")],
        ),
        binding("system:node-proxier", vec![user("system:kube-proxy")]),
        binding("system:kube-controller-manager", vec![user("system:kube-controller-manager")]),
        binding("system:kube-scheduler", vec![user("system:kube-scheduler")]),
        binding("system:volume-scheduler", vec![user("system:kube-scheduler")]),
        binding("system:service-account-issuer-discovery", vec![group("system:serviceaccounts")]),
    ];
    for role in controller_roles() {
        let name = role.metadata.name.unwrap_or_default();
        let account = name.trim_start_matches(CONTROLLER_PREFIX).to_string();
        out.push(binding(&name, vec![subject("ServiceAccount", &account, Some("kube-system"))]));
    }
    out
}
