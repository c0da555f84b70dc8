#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::json;

use super::*;

mod apps_kinds;
mod core_kinds;
mod other_kinds;

/// `raw` in the `k8s\0` envelope, as client-go sends it.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC.to_vec(), unknown.encode_to_vec()].concat()
}

/// The converted JSON reads as the k8s-openapi type and writes back unchanged: every key is a
/// field of the type, spelled and shaped as the JSON path expects.
fn reads_back_as<T: serde::de::DeserializeOwned + serde::Serialize>(v: &serde_json::Value) {
    let typed: T = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(&serde_json::to_value(typed).unwrap(), v);
}

#[test]
fn a_deployment_as_kubectl_create_sends_it() {
    let labels: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
    let d = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            labels: labels.clone(),
            namespace: Some(String::new()),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta { labels, ..Default::default() }),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: Some("nginx".into()),
                        image: Some("nginx:1.8".into()),
                        resources: Some(Default::default()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            strategy: Some(Default::default()),
            ..Default::default()
        }),
        status: Some(Default::default()),
    };
    let v = decode(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap();
    assert_eq!(
        (v["apiVersion"].as_str(), v["kind"].as_str()),
        (Some("apps/v1"), Some("Deployment"))
    );
    assert_eq!(v["metadata"], json!({"name": "web", "labels": {"app": "web"}}));
    assert_eq!(v["spec"]["replicas"], 0, "a pointer field keeps its zero");
    assert_eq!(v["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0],
        json!({"name": "nginx", "image": "nginx:1.8", "resources": {}})
    );
}

#[test]
fn secrets_carry_base64_and_other_kinds_are_refused() {
    let s = core::Secret {
        metadata: Some(meta::ObjectMeta { name: Some("s".into()), ..Default::default() }),
        data: [("p".to_string(), b"x".to_vec())].into(),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "Secret", s.encode_to_vec())).unwrap();
    assert_eq!(v["data"]["p"], "eA==");
    let err = decode(&envelope("networking.k8s.io/v1", "Ingress", vec![])).unwrap_err();
    assert_eq!(err.code, 415);
    assert_eq!(decode(b"not protobuf").unwrap_err().code, 400);
}

#[test]
fn an_access_review_as_kubectl_auth_can_i_sends_it() {
    let review = authz::SelfSubjectAccessReview {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: Some("default".into()),
                verb: Some("get".into()),
                group: Some(String::new()),
                resource: Some("pods".into()),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }),
        status: None,
    };
    let v = decode(&envelope(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        review.encode_to_vec(),
    ))
    .unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
               "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}})
    );
}

#[test]
fn a_rules_review_as_kubectl_auth_can_i_list_sends_it() {
    let review = authz::SelfSubjectRulesReview {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authz::SelfSubjectRulesReviewSpec { namespace: Some("team".into()) }),
        status: None,
    };
    let raw = envelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", review.encode_to_vec());
    assert_eq!(
        decode(&raw).unwrap(),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
               "metadata": {}, "spec": {"namespace": "team"}})
    );
}

fn container(name: &str, image: &str) -> core::Container {
    core::Container {
        name: Some(name.into()),
        image: Some(image.into()),
        // Go writes the plain fields it has, zero or not.
        working_dir: Some(String::new()),
        tty: Some(false),
        resources: Some(Default::default()),
        ..Default::default()
    }
}

fn template(restart: &str) -> core::PodTemplateSpec {
    core::PodTemplateSpec {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(Default::default()),
            ..Default::default()
        }),
        spec: Some(core::PodSpec {
            containers: vec![container("x", "busybox:1.35")],
            restart_policy: Some(restart.into()),
            dns_policy: Some(String::new()),
            host_network: Some(false),
            ..Default::default()
        }),
    }
}

#[test]
fn a_job_and_a_cronjob_as_kubectl_create_sends_them() {
    let job = batch::Job {
        metadata: Some(meta::ObjectMeta { name: Some("x".into()), ..Default::default() }),
        spec: Some(batch::JobSpec { template: Some(template("Never")), ..Default::default() }),
        status: Some(Default::default()),
    };
    let v = decode(&envelope("batch/v1", "Job", job.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
               "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "x", "image": "busybox:1.35", "resources": {}}]}}}})
    );
    let cj = batch::CronJob {
        metadata: Some(meta::ObjectMeta { name: Some("tick".into()), ..Default::default() }),
        spec: Some(batch::CronJobSpec {
            schedule: Some("*/1 * * * *".into()),
            concurrency_policy: Some(String::new()),
            job_template: Some(batch::JobTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    name: Some("tick".into()),
                    ..Default::default()
                }),
                spec: Some(batch::JobSpec {
                    template: Some(template("OnFailure")),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let v = decode(&envelope("batch/v1", "CronJob", cj.encode_to_vec())).unwrap();
    assert_eq!(v["spec"]["schedule"], "*/1 * * * *");
    assert!(v["spec"].get("concurrencyPolicy").is_none(), "an empty plain string is absent");
    assert_eq!(v["spec"]["jobTemplate"]["metadata"]["name"], "tick");
    assert_eq!(v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"], "OnFailure");
}

#[test]
fn pointer_fields_keep_their_zero_and_plain_ones_drop_it() {
    let mut spec = template("Never").spec.unwrap();
    spec.automount_service_account_token = Some(false);
    spec.termination_grace_period_seconds = Some(0);
    let job = batch::Job {
        metadata: Some(meta::ObjectMeta {
            name: Some("from-cron".into()),
            annotations: [("cronjob.kubernetes.io/instantiate".to_string(), "manual".to_string())]
                .into(),
            owner_references: vec![meta::OwnerReference {
                api_version: Some("batch/v1".into()),
                kind: Some("CronJob".into()),
                name: Some("tick".into()),
                uid: Some("u1".into()),
                controller: Some(true),
                block_owner_deletion: None,
            }],
            ..Default::default()
        }),
        spec: Some(batch::JobSpec {
            backoff_limit: Some(0),
            suspend: Some(false),
            template: Some(core::PodTemplateSpec { metadata: None, spec: Some(spec) }),
            ..Default::default()
        }),
        status: None,
    };
    let v = decode(&envelope("batch/v1", "Job", job.encode_to_vec())).unwrap();
    assert_eq!(
        (v["spec"]["backoffLimit"].as_i64(), v["spec"]["suspend"].as_bool()),
        (Some(0), Some(false))
    );
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["terminationGracePeriodSeconds"], 0);
    assert!(pod.get("hostNetwork").is_none() && pod.get("dnsPolicy").is_none());
    assert_eq!(
        v["metadata"]["ownerReferences"],
        json!([{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "u1", "controller": true}])
    );
}

#[test]
fn a_field_this_server_does_not_convert_is_refused_not_dropped() {
    let mut spec = template("Never").spec.unwrap();
    spec.affinity = Some(core::Affinity {
        node_affinity: Some(core::NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                node_selector_terms: vec![core::NodeSelectorTerm {
                    match_expressions: vec![core::NodeSelectorRequirement {
                        key: Some("disk".into()),
                        operator: Some("Exists".into()),
                        values: vec![],
                    }],
                    match_fields: vec![],
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let job = batch::Job {
        metadata: Some(meta::ObjectMeta { name: Some("x".into()), ..Default::default() }),
        spec: Some(batch::JobSpec {
            template: Some(core::PodTemplateSpec { metadata: None, spec: Some(spec) }),
            ..Default::default()
        }),
        status: None,
    };
    let err = decode(&envelope("batch/v1", "Job", job.encode_to_vec())).unwrap_err();
    assert_eq!(err.code, 415);
    assert!(err.message.contains("fields of PodSpec"), "{}", err.message);
    // An empty message present (Go's zero struct) is no data, so it passes.
    assert!(all_zero(&core::Affinity::default().encode_to_vec(), 0));
    let mut labels = BTreeMap::new();
    labels.insert("a".to_string(), "b".to_string());
    assert!(!all_zero(
        &meta::LabelSelector { match_labels: labels, ..Default::default() }.encode_to_vec(),
        0
    ));
}

#[test]
fn a_token_request_as_kubectl_create_token_sends_it() {
    use k8s_pb::api::authentication::v1 as authn;
    let request = authn::TokenRequest {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authn::TokenRequestSpec {
            audiences: vec!["x".into()],
            expiration_seconds: Some(600),
            bound_object_ref: Some(authn::BoundObjectReference {
                kind: Some("Pod".into()),
                api_version: Some("v1".into()),
                name: Some("web".into()),
                u_id: Some(String::new()),
            }),
        }),
        status: Some(Default::default()),
    };
    let raw = envelope("authentication.k8s.io/v1", "TokenRequest", request.encode_to_vec());
    assert_eq!(
        decode(&raw).unwrap(),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {},
               "spec": {"audiences": ["x"], "expirationSeconds": 600,
                        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web"}}})
    );
}
