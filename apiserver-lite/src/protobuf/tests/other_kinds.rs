//! Lease, `events.k8s.io` Event, SubjectAccessReview and TokenReview from protobuf, and every
//! served kind reaching a converter.

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::json;

use super::{envelope, reads_back_as};
use crate::protobuf::decode;
use crate::resources::RESOURCES;

fn micro(seconds: i64, nanos: i32) -> Option<meta::MicroTime> {
    Some(meta::MicroTime { seconds: Some(seconds), nanos: Some(nanos) })
}

#[test]
fn every_served_kind_decodes_from_protobuf() {
    for r in RESOURCES.iter().filter(|r| r.backing != crate::resources::Backing::Metrics) {
        let v = decode(&envelope(&r.group_version(), r.kind, Vec::new()))
            .unwrap_or_else(|e| panic!("{} {}: {}", r.group_version(), r.kind, e.message));
        assert_eq!(v["kind"], r.kind);
    }
    let err = decode(&envelope("policy/v1", "PodDisruptionBudget", Vec::new())).unwrap_err();
    assert_eq!((err.code, err.reason), (415, "UnsupportedMediaType"));
    assert_eq!(
        err.message,
        "protobuf bodies are decoded for the kinds this server serves, and policy/v1 PodDisruptionBudget is not one of them"
    );
}

#[test]
fn a_lease_as_a_kubelet_renews_it() {
    let lease = coordination::Lease {
        metadata: Some(meta::ObjectMeta {
            name: Some("a".into()),
            namespace: Some("kube-node-lease".into()),
            ..Default::default()
        }),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(40),
            acquire_time: None,
            renew_time: micro(1_700_000_000, 987_654_321),
            lease_transitions: Some(0),
            strategy: None,
            preferred_holder: None,
        }),
    };
    let v = decode(&envelope("coordination.k8s.io/v1", "Lease", lease.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "a", "namespace": "kube-node-lease"},
               "spec": {"holderIdentity": "a", "leaseDurationSeconds": 40,
                        "renewTime": "2023-11-14T22:13:20.987654Z", "leaseTransitions": 0}})
    );
    reads_back_as::<k8s_openapi::api::coordination::v1::Lease>(&v);
}

#[test]
fn an_events_k8s_io_event_as_the_new_recorder_writes_it() {
    let event = events::Event {
        metadata: Some(meta::ObjectMeta {
            name: Some("web.17b".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        event_time: micro(1_700_000_000, 5_000),
        series: Some(events::EventSeries {
            count: Some(3),
            last_observed_time: micro(1_700_000_060, 0),
        }),
        reporting_controller: Some("default-scheduler".into()),
        reporting_instance: Some("default-scheduler-x".into()),
        action: Some("Binding".into()),
        reason: Some("Scheduled".into()),
        regarding: Some(core::ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some("web".into()),
            ..Default::default()
        }),
        related: None,
        note: Some("Successfully assigned default/web to a".into()),
        r#type: Some("Normal".into()),
        deprecated_source: Some(core::EventSource {
            component: Some(String::new()),
            host: Some(String::new()),
        }),
        deprecated_first_timestamp: Some(meta::Time::default()),
        deprecated_last_timestamp: Some(meta::Time::default()),
        deprecated_count: Some(0),
    };
    let v = decode(&envelope("events.k8s.io/v1", "Event", event.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "web.17b", "namespace": "default"},
               "eventTime": "2023-11-14T22:13:20.000005Z",
               "series": {"count": 3, "lastObservedTime": "2023-11-14T22:14:20.000000Z"},
               "reportingController": "default-scheduler",
               "reportingInstance": "default-scheduler-x",
               "action": "Binding", "reason": "Scheduled",
               "regarding": {"kind": "Pod", "namespace": "default", "name": "web"},
               "note": "Successfully assigned default/web to a", "type": "Normal",
               "deprecatedSource": {}})
    );
    reads_back_as::<k8s_openapi::api::events::v1::Event>(&v);
}

#[test]
fn a_subject_access_review_with_selectors_and_extra() {
    let review = authz::SubjectAccessReview {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authz::SubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: Some("default".into()),
                verb: Some("list".into()),
                group: Some(String::new()),
                version: Some("v1".into()),
                resource: Some("pods".into()),
                subresource: Some(String::new()),
                name: Some(String::new()),
                field_selector: Some(authz::FieldSelectorAttributes {
                    raw_selector: Some("spec.nodeName=a".into()),
                    requirements: vec![meta::FieldSelectorRequirement {
                        key: Some("spec.nodeName".into()),
                        operator: Some("In".into()),
                        values: vec!["a".into()],
                    }],
                }),
                label_selector: Some(authz::LabelSelectorAttributes {
                    raw_selector: Some("app=web".into()),
                    requirements: vec![],
                }),
            }),
            non_resource_attributes: None,
            user: Some("jane".into()),
            groups: vec!["dev".into()],
            extra: [("scopes".to_string(), authz::ExtraValue { items: vec!["a".into()] })].into(),
            uid: Some("u-9".into()),
        }),
        status: Some(authz::SubjectAccessReviewStatus {
            allowed: Some(true),
            ..Default::default()
        }),
    };
    let raw = envelope("authorization.k8s.io/v1", "SubjectAccessReview", review.encode_to_vec());
    let v = decode(&raw).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "metadata": {},
               "spec": {"resourceAttributes": {
                            "namespace": "default", "verb": "list", "version": "v1",
                            "resource": "pods",
                            "fieldSelector": {"rawSelector": "spec.nodeName=a",
                                              "requirements": [{"key": "spec.nodeName",
                                                                "operator": "In",
                                                                "values": ["a"]}]},
                            "labelSelector": {"rawSelector": "app=web"}},
                        "user": "jane", "groups": ["dev"], "extra": {"scopes": ["a"]},
                        "uid": "u-9"}}),
        "the status a client sends is the server's to answer, not read"
    );
    reads_back_as::<k8s_openapi::api::authorization::v1::SubjectAccessReview>(&v);
}

#[test]
fn a_token_review_converts_and_managed_fields_that_are_no_json_are_refused() {
    let review = authn::TokenReview {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(authn::TokenReviewSpec {
            token: Some("abc.def.ghi".into()),
            audiences: vec!["https://kubernetes.default.svc".into()],
        }),
        status: None,
    };
    let raw = envelope("authentication.k8s.io/v1", "TokenReview", review.encode_to_vec());
    let v = decode(&raw).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
               "spec": {"token": "abc.def.ghi", "audiences": ["https://kubernetes.default.svc"]}})
    );
    reads_back_as::<k8s_openapi::api::authentication::v1::TokenReview>(&v);

    let mut review = review;
    review.metadata = Some(meta::ObjectMeta {
        managed_fields: vec![meta::ManagedFieldsEntry {
            manager: Some("x".into()),
            fields_v1: Some(meta::FieldsV1 { raw: Some(b"f:spec".to_vec()) }),
            ..Default::default()
        }],
        ..Default::default()
    });
    let raw = envelope("authentication.k8s.io/v1", "TokenReview", review.encode_to_vec());
    let err = decode(&raw).unwrap_err();
    assert_eq!(err.code, 400);
    assert!(err.message.contains("fieldsV1 of manager \"x\" is not JSON"), "{}", err.message);
}

#[test]
fn an_eviction_as_kubectl_drain_sends_it_in_either_version() {
    use k8s_pb::api::policy::{v1 as policy, v1beta1 as policy_beta};
    let metadata = Some(meta::ObjectMeta {
        name: Some("web-1".into()),
        namespace: Some("default".into()),
        ..Default::default()
    });
    let delete_options = Some(meta::DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(meta::Preconditions {
            uid: Some("u-1".into()),
            resource_version: None,
        }),
        dry_run: vec!["All".into()],
        ..Default::default()
    });
    let want = json!({"metadata": {"name": "web-1", "namespace": "default"},
                      "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "u-1"},
                                        "dryRun": ["All"]}});
    let e = policy::Eviction { metadata: metadata.clone(), delete_options: delete_options.clone() };
    let v = decode(&envelope("policy/v1", "Eviction", e.encode_to_vec())).unwrap();
    reads_back_as::<k8s_openapi::api::policy::v1::Eviction>(&v);
    let mut fields = v.as_object().unwrap().clone();
    assert_eq!(
        (fields.remove("apiVersion"), fields.remove("kind")),
        (Some(json!("policy/v1")), Some(json!("Eviction")))
    );
    assert_eq!(serde_json::Value::Object(fields), want, "a pointer field keeps its zero");

    let e = policy_beta::Eviction { metadata, delete_options };
    let v = decode(&envelope("policy/v1beta1", "Eviction", e.encode_to_vec())).unwrap();
    assert_eq!((&v["metadata"], &v["deleteOptions"]), (&want["metadata"], &want["deleteOptions"]));
    assert_eq!(v["apiVersion"], "policy/v1beta1");
}

#[test]
fn delete_options_convert_and_an_eviction_of_another_version_is_refused() {
    let d = meta::DeleteOptions {
        propagation_policy: Some("Background".into()),
        orphan_dependents: Some(false),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "DeleteOptions", d.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
               "orphanDependents": false})
    );
    reads_back_as::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>(&v);
    let err = decode(&envelope("policy/v2", "Eviction", Vec::new())).unwrap_err();
    assert_eq!(err.code, 415, "{}", err.message);
}
