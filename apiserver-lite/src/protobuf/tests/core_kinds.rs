//! ServiceAccount, Node, Event and Endpoints from protobuf.

use std::collections::BTreeMap;

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::json;

use super::{envelope, reads_back_as};
use crate::protobuf::decode;

fn named(name: &str, namespace: Option<&str>) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        // Go writes the zero time; it is absent in JSON.
        creation_timestamp: Some(Default::default()),
        ..Default::default()
    })
}

fn reference(kind: &str, name: &str) -> core::ObjectReference {
    core::ObjectReference {
        kind: Some(kind.into()),
        namespace: Some("default".into()),
        name: Some(name.into()),
        uid: Some("u-1".into()),
        api_version: Some("v1".into()),
        resource_version: Some(String::new()),
        field_path: Some(String::new()),
    }
}

#[test]
fn a_service_account_as_kubectl_create_serviceaccount_sends_it() {
    let sa = core::ServiceAccount { metadata: named("build-bot", None), ..Default::default() };
    let v = decode(&envelope("v1", "ServiceAccount", sa.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "build-bot"}})
    );

    let sa = core::ServiceAccount {
        metadata: named("ci", Some("default")),
        secrets: vec![reference("Secret", "ci-token")],
        image_pull_secrets: vec![core::LocalObjectReference { name: Some("registry".into()) }],
        automount_service_account_token: Some(false),
    };
    let v = decode(&envelope("v1", "ServiceAccount", sa.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "ci", "namespace": "default"},
               "secrets": [{"kind": "Secret", "namespace": "default", "name": "ci-token",
                            "uid": "u-1", "apiVersion": "v1"}],
               "imagePullSecrets": [{"name": "registry"}],
               "automountServiceAccountToken": false})
    );
    reads_back_as::<k8s_openapi::api::core::v1::ServiceAccount>(&v);
}

fn time(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time { seconds: Some(seconds), nanos: Some(0) })
}

fn quantity(s: &str) -> Quantity {
    Quantity { string: Some(s.into()) }
}

fn config_source(name: &str) -> core::NodeConfigSource {
    core::NodeConfigSource {
        config_map: Some(core::ConfigMapNodeConfigSource {
            namespace: Some("kube-system".into()),
            name: Some(name.into()),
            uid: Some(String::new()),
            resource_version: Some(String::new()),
            kubelet_config_key: Some("kubelet".into()),
        }),
    }
}

#[test]
fn a_node_with_its_spec_and_every_status_field() {
    let resources: BTreeMap<String, Quantity> =
        [("cpu".to_string(), quantity("2")), ("memory".to_string(), quantity("4Gi"))].into();
    let node = core::Node {
        metadata: Some(meta::ObjectMeta {
            labels: [("kubernetes.io/hostname".to_string(), "a".to_string())].into(),
            ..named("a", None).unwrap()
        }),
        spec: Some(core::NodeSpec {
            pod_cidr: Some("10.244.1.0/24".into()),
            pod_cid_rs: vec!["10.244.1.0/24".into()],
            provider_id: Some(String::new()),
            unschedulable: Some(true),
            taints: vec![core::Taint {
                key: Some("node.kubernetes.io/unschedulable".into()),
                value: Some(String::new()),
                effect: Some("NoSchedule".into()),
                time_added: time(1_700_000_000),
            }],
            config_source: Some(config_source("kubelet-a")),
            external_id: Some(String::new()),
        }),
        status: Some(core::NodeStatus {
            capacity: resources.clone(),
            allocatable: resources,
            phase: Some(String::new()),
            conditions: vec![core::NodeCondition {
                r#type: Some("Ready".into()),
                status: Some("True".into()),
                last_heartbeat_time: time(1_700_000_060),
                last_transition_time: time(1_700_000_000),
                reason: Some("KubeletReady".into()),
                message: Some("kubelet is posting ready status".into()),
            }],
            addresses: vec![core::NodeAddress {
                r#type: Some("InternalIP".into()),
                address: Some("192.0.2.10".into()),
            }],
            daemon_endpoints: Some(core::NodeDaemonEndpoints {
                kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
            }),
            node_info: Some(core::NodeSystemInfo {
                machine_id: Some("m".into()),
                system_uuid: Some("s".into()),
                boot_id: Some("b".into()),
                kernel_version: Some("6.1.0".into()),
                os_image: Some("Debian GNU/Linux 12".into()),
                container_runtime_version: Some("containerd://2.0.0".into()),
                kubelet_version: Some("v1.35.0".into()),
                kube_proxy_version: Some(String::new()),
                operating_system: Some("linux".into()),
                architecture: Some("amd64".into()),
                swap: Some(core::NodeSwapStatus { capacity: Some(0) }),
            }),
            images: vec![core::ContainerImage {
                names: vec!["docker.io/library/busybox:1.36".into()],
                size_bytes: Some(2_000_000),
            }],
            volumes_in_use: vec!["kubernetes.io/csi/x".into()],
            volumes_attached: vec![core::AttachedVolume {
                name: Some("kubernetes.io/csi/x".into()),
                device_path: Some("/dev/vdb".into()),
            }],
            config: Some(core::NodeConfigStatus {
                assigned: Some(config_source("kubelet-a")),
                active: Some(config_source("kubelet-a")),
                last_known_good: None,
                error: Some(String::new()),
            }),
            runtime_handlers: vec![core::NodeRuntimeHandler {
                name: Some("runc".into()),
                features: Some(core::NodeRuntimeHandlerFeatures {
                    recursive_read_only_mounts: Some(true),
                    user_namespaces: Some(false),
                }),
            }],
            features: Some(core::NodeFeatures { supplemental_groups_policy: Some(true) }),
            declared_features: vec!["InPlacePodVerticalScaling".into()],
        }),
    };
    let v = decode(&envelope("v1", "Node", node.encode_to_vec())).unwrap();
    let source = json!({"configMap": {"namespace": "kube-system", "name": "kubelet-a",
                                      "kubeletConfigKey": "kubelet"}});
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": "a", "labels": {"kubernetes.io/hostname": "a"}},
               "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"],
                        "unschedulable": true,
                        "taints": [{"key": "node.kubernetes.io/unschedulable",
                                    "effect": "NoSchedule", "timeAdded": "2023-11-14T22:13:20Z"}],
                        "configSource": source},
               "status": {
                   "capacity": {"cpu": "2", "memory": "4Gi"},
                   "allocatable": {"cpu": "2", "memory": "4Gi"},
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastHeartbeatTime": "2023-11-14T22:14:20Z",
                                   "lastTransitionTime": "2023-11-14T22:13:20Z",
                                   "reason": "KubeletReady",
                                   "message": "kubelet is posting ready status"}],
                   "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                   "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b",
                                "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12",
                                "containerRuntimeVersion": "containerd://2.0.0",
                                "kubeletVersion": "v1.35.0", "operatingSystem": "linux",
                                "architecture": "amd64", "swap": {"capacity": 0}},
                   "images": [{"names": ["docker.io/library/busybox:1.36"], "sizeBytes": 2_000_000}],
                   "volumesInUse": ["kubernetes.io/csi/x"],
                   "volumesAttached": [{"name": "kubernetes.io/csi/x", "devicePath": "/dev/vdb"}],
                   "config": {"assigned": source, "active": source},
                   "runtimeHandlers": [{"name": "runc", "features": {"recursiveReadOnlyMounts": true,
                                                                     "userNamespaces": false}}],
                   "features": {"supplementalGroupsPolicy": true},
                   "declaredFeatures": ["InPlacePodVerticalScaling"]}})
    );
    // k8s-openapi writes the required strings of NodeSystemInfo even when empty.
    let mut expected = v.clone();
    expected["status"]["nodeInfo"]["kubeProxyVersion"] = json!("");
    let typed: k8s_openapi::api::core::v1::Node = serde_json::from_value(v).unwrap();
    assert_eq!(serde_json::to_value(typed).unwrap(), expected);
}

#[test]
fn a_core_event_as_client_go_records_it() {
    let event = core::Event {
        metadata: named("web.17a", Some("default")),
        involved_object: Some(reference("Pod", "web")),
        reason: Some("Pulled".into()),
        message: Some("Successfully pulled image".into()),
        source: Some(core::EventSource {
            component: Some("kubelet".into()),
            host: Some("a".into()),
        }),
        first_timestamp: time(1_700_000_000),
        last_timestamp: time(1_700_000_030),
        count: Some(2),
        r#type: Some("Normal".into()),
        event_time: Some(meta::MicroTime {
            seconds: Some(1_700_000_000),
            nanos: Some(123_456_789),
        }),
        series: Some(core::EventSeries {
            count: Some(2),
            last_observed_time: Some(meta::MicroTime {
                seconds: Some(1_700_000_030),
                nanos: Some(0),
            }),
        }),
        action: Some("Pull".into()),
        related: Some(reference("Node", "a")),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some("a".into()),
    };
    let v = decode(&envelope("v1", "Event", event.encode_to_vec())).unwrap();
    let pod = json!({"kind": "Pod", "namespace": "default", "name": "web", "uid": "u-1",
                     "apiVersion": "v1"});
    let node = json!({"kind": "Node", "namespace": "default", "name": "a", "uid": "u-1",
                      "apiVersion": "v1"});
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Event",
               "metadata": {"name": "web.17a", "namespace": "default"},
               "involvedObject": pod, "reason": "Pulled",
               "message": "Successfully pulled image",
               "source": {"component": "kubelet", "host": "a"},
               "firstTimestamp": "2023-11-14T22:13:20Z", "lastTimestamp": "2023-11-14T22:13:50Z",
               "count": 2, "type": "Normal",
               "eventTime": "2023-11-14T22:13:20.123456Z",
               "series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:50.000000Z"},
               "action": "Pull", "related": node,
               "reportingComponent": "kubelet", "reportingInstance": "a"})
    );
    reads_back_as::<k8s_openapi::api::core::v1::Event>(&v);
}

#[test]
fn endpoints_keep_a_zero_port_for_validation_to_name() {
    let ep = core::Endpoints {
        metadata: named("web", Some("default")),
        subsets: vec![core::EndpointSubset {
            addresses: vec![core::EndpointAddress {
                ip: Some("10.244.1.5".into()),
                hostname: Some(String::new()),
                node_name: Some("a".into()),
                target_ref: Some(reference("Pod", "web-1")),
            }],
            not_ready_addresses: vec![core::EndpointAddress {
                ip: Some("10.244.1.6".into()),
                ..Default::default()
            }],
            ports: vec![
                core::EndpointPort {
                    name: Some("http".into()),
                    port: Some(8080),
                    protocol: Some("TCP".into()),
                    app_protocol: Some("http".into()),
                },
                core::EndpointPort { port: Some(0), ..Default::default() },
            ],
        }],
    };
    let v = decode(&envelope("v1", "Endpoints", ep.encode_to_vec())).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Endpoints",
               "metadata": {"name": "web", "namespace": "default"},
               "subsets": [{
                   "addresses": [{"ip": "10.244.1.5", "nodeName": "a",
                                  "targetRef": {"kind": "Pod", "namespace": "default",
                                                "name": "web-1", "uid": "u-1", "apiVersion": "v1"}}],
                   "notReadyAddresses": [{"ip": "10.244.1.6"}],
                   "ports": [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"},
                             {"port": 0}]}]})
    );
    reads_back_as::<k8s_openapi::api::core::v1::Endpoints>(&v);
}

#[test]
fn managed_fields_sent_back_as_read_convert_and_bad_fields_v1_is_refused() {
    let entry = |raw: &[u8]| meta::ManagedFieldsEntry {
        manager: Some("kubectl-create".into()),
        operation: Some("Update".into()),
        api_version: Some("v1".into()),
        time: time(1_700_000_000),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(meta::FieldsV1 { raw: Some(raw.to_vec()) }),
        subresource: None,
    };
    let mut metadata = named("build-bot", None).unwrap();
    metadata.managed_fields = vec![entry(br#"{"f:secrets":{}}"#)];
    let sa = core::ServiceAccount { metadata: Some(metadata.clone()), ..Default::default() };
    let v = decode(&envelope("v1", "ServiceAccount", sa.encode_to_vec())).unwrap();
    assert_eq!(
        v["metadata"]["managedFields"],
        json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": "2023-11-14T22:13:20Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:secrets": {}}}])
    );
    reads_back_as::<k8s_openapi::api::core::v1::ServiceAccount>(&v);

    metadata.managed_fields = vec![entry(b"{not json")];
    let sa = core::ServiceAccount { metadata: Some(metadata), ..Default::default() };
    let err = decode(&envelope("v1", "ServiceAccount", sa.encode_to_vec())).unwrap_err();
    assert_eq!(err.code, 400);
    assert!(
        err.message.starts_with(
            "metadata.managedFields: fieldsV1 of manager \"kubectl-create\" is not JSON"
        ),
        "{}",
        err.message
    );
}
