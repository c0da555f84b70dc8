//! ReplicaSet, DaemonSet and ControllerRevision from protobuf.

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::{envelope, reads_back_as, template};
use crate::protobuf::decode;

fn labels() -> BTreeMap<String, String> {
    [("app".to_string(), "web".to_string())].into()
}

fn named(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        ..Default::default()
    })
}

fn selector() -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector { match_labels: labels(), ..Default::default() })
}

fn pod_template() -> Option<core::PodTemplateSpec> {
    let mut t = template("Always");
    t.metadata = Some(meta::ObjectMeta { labels: labels(), ..Default::default() });
    Some(t)
}

fn at(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time { seconds: Some(seconds), nanos: Some(0) })
}

const TEMPLATE_JSON: &str = r#"{"metadata": {"labels": {"app": "web"}},
    "spec": {"restartPolicy": "Always",
             "containers": [{"name": "x", "image": "busybox:1.35", "resources": {}}]}}"#;

#[test]
fn a_replica_set_with_its_template_and_status() {
    let rs = apps::ReplicaSet {
        metadata: named("web-5d4"),
        spec: Some(apps::ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: Some(5),
            selector: selector(),
            template: pod_template(),
        }),
        status: Some(apps::ReplicaSetStatus {
            replicas: Some(0),
            fully_labeled_replicas: Some(0),
            ready_replicas: Some(1),
            available_replicas: Some(1),
            terminating_replicas: Some(0),
            observed_generation: Some(2),
            conditions: vec![apps::ReplicaSetCondition {
                r#type: Some("ReplicaFailure".into()),
                status: Some("True".into()),
                last_transition_time: at(1_700_000_000),
                reason: Some("FailedCreate".into()),
                message: Some("quota".into()),
            }],
        }),
    };
    let v = decode(&envelope("apps/v1", "ReplicaSet", rs.encode_to_vec())).unwrap();
    let template: serde_json::Value = serde_json::from_str(TEMPLATE_JSON).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "web-5d4", "namespace": "default"},
               "spec": {"replicas": 0, "minReadySeconds": 5,
                        "selector": {"matchLabels": {"app": "web"}}, "template": template},
               "status": {"replicas": 0, "readyReplicas": 1, "availableReplicas": 1,
                          "terminatingReplicas": 0, "observedGeneration": 2,
                          "conditions": [{"type": "ReplicaFailure", "status": "True",
                                          "lastTransitionTime": "2023-11-14T22:13:20Z",
                                          "reason": "FailedCreate", "message": "quota"}]}})
    );
    reads_back_as::<k8s_openapi::api::apps::v1::ReplicaSet>(&v);
}

#[test]
fn a_daemon_set_with_its_update_strategy_and_status() {
    let ds = apps::DaemonSet {
        metadata: named("agent"),
        spec: Some(apps::DaemonSetSpec {
            selector: selector(),
            template: pod_template(),
            update_strategy: Some(apps::DaemonSetUpdateStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(apps::RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(1),
                        int_val: None,
                        str_val: Some("10%".into()),
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(0),
                        str_val: None,
                    }),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(10),
        }),
        status: Some(apps::DaemonSetStatus {
            current_number_scheduled: Some(1),
            number_misscheduled: Some(0),
            desired_number_scheduled: Some(1),
            number_ready: Some(0),
            observed_generation: Some(1),
            updated_number_scheduled: Some(1),
            number_available: Some(0),
            number_unavailable: Some(1),
            collision_count: Some(0),
            conditions: vec![apps::DaemonSetCondition {
                r#type: Some("Progressing".into()),
                status: Some("True".into()),
                last_transition_time: None,
                reason: Some(String::new()),
                message: Some(String::new()),
            }],
        }),
    };
    let v = decode(&envelope("apps/v1", "DaemonSet", ds.encode_to_vec())).unwrap();
    let template: serde_json::Value = serde_json::from_str(TEMPLATE_JSON).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
               "metadata": {"name": "agent", "namespace": "default"},
               "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template,
                        "updateStrategy": {"type": "RollingUpdate",
                                           "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}},
                        "revisionHistoryLimit": 10},
               "status": {"currentNumberScheduled": 1, "numberMisscheduled": 0,
                          "desiredNumberScheduled": 1, "numberReady": 0, "observedGeneration": 1,
                          "updatedNumberScheduled": 1, "numberUnavailable": 1, "collisionCount": 0,
                          "conditions": [{"type": "Progressing", "status": "True"}]}})
    );
    reads_back_as::<k8s_openapi::api::apps::v1::DaemonSet>(&v);
}

#[test]
fn a_daemon_set_template_with_a_field_this_server_does_not_convert_is_refused() {
    let mut template = pod_template().unwrap();
    if let Some(spec) = template.spec.as_mut() {
        spec.affinity = Some(core::Affinity {
            pod_anti_affinity: Some(core::PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: vec![
                    core::WeightedPodAffinityTerm {
                        weight: Some(1),
                        pod_affinity_term: Some(core::PodAffinityTerm {
                            topology_key: Some("kubernetes.io/hostname".into()),
                            ..Default::default()
                        }),
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let ds = apps::DaemonSet {
        metadata: named("agent"),
        spec: Some(apps::DaemonSetSpec {
            selector: selector(),
            template: Some(template),
            ..Default::default()
        }),
        status: None,
    };
    let err = decode(&envelope("apps/v1", "DaemonSet", ds.encode_to_vec())).unwrap_err();
    assert_eq!((err.code, err.reason), (415, "UnsupportedMediaType"));
    assert_eq!(
        err.message,
        "the protobuf body sets fields of PodSpec this server does not read from protobuf; send the object as JSON or YAML"
    );
}

#[test]
fn a_controller_revision_carries_its_json_data_verbatim() {
    let data =
        br#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null}}}}"#;
    let cr = apps::ControllerRevision {
        metadata: named("agent-7f9"),
        data: Some(RawExtension { raw: Some(data.to_vec()) }),
        revision: Some(1),
    };
    let v = decode(&envelope("apps/v1", "ControllerRevision", cr.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
               "metadata": {"name": "agent-7f9", "namespace": "default"},
               "data": {"spec": {"template": {"$patch": "replace",
                                              "metadata": {"creationTimestamp": null}}}},
               "revision": 1})
    );
    let cr = apps::ControllerRevision {
        metadata: named("agent-7f9"),
        data: Some(RawExtension { raw: Some(b"\x0a\x03k8s".to_vec()) }),
        revision: Some(1),
    };
    let err = decode(&envelope("apps/v1", "ControllerRevision", cr.encode_to_vec())).unwrap_err();
    assert_eq!(err.code, 400);
    assert!(err.message.contains("ControllerRevision's data is not JSON"), "{}", err.message);
}
