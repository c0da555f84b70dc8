//! Protobuf request bodies, as kubectl's typed clients send them (`kubectl create deployment`,
//! `namespace`, `configmap`, `secret`, `service`): the `k8s\0` envelope holding a
//! `runtime.Unknown`, decoded with the `k8s-pb` message types and turned into the JSON the rest
//! of the server works with. Go writes zero values for plain fields; those are dropped, as its
//! JSON encoding would (`omitempty`), except pointer fields such as `replicas`.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::errors::ApiError;

/// The envelope's magic prefix.
pub const MAGIC: &[u8] = b"k8s\0";
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Fields that keep a zero value (Go pointers).
const KEEP_ZERO: [&str; 4] =
    ["replicas", "terminationGracePeriodSeconds", "minReadySeconds", "containerPort"];

fn decode_err(e: prost::DecodeError) -> ApiError {
    ApiError::bad_request(format!("the protobuf body could not be decoded: {e}"))
}

/// Decodes a protobuf body into the object's JSON.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("the protobuf body lacks the k8s envelope"))?;
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest).map_err(decode_err)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (tm.api_version.unwrap_or_default(), tm.kind.unwrap_or_default());
    let raw = unknown.raw.unwrap_or_default();
    let raw = raw.as_slice();
    let mut v = match (api_version.as_str(), kind.as_str()) {
        ("apps/v1", "Deployment") => deployment(apps::Deployment::decode(raw).map_err(decode_err)?),
        ("v1", "Namespace") => {
            let n = core::Namespace::decode(raw).map_err(decode_err)?;
            json!({"metadata": object_meta(n.metadata), "spec": {"finalizers": n.spec.map(|s| s.finalizers).unwrap_or_default()}})
        }
        ("v1", "ConfigMap") => {
            let c = core::ConfigMap::decode(raw).map_err(decode_err)?;
            json!({"metadata": object_meta(c.metadata), "data": c.data, "binaryData": b64_map(c.binary_data), "immutable": c.immutable})
        }
        ("v1", "Secret") => {
            let s = core::Secret::decode(raw).map_err(decode_err)?;
            json!({"metadata": object_meta(s.metadata), "data": b64_map(s.data), "stringData": s.string_data, "type": s.r#type, "immutable": s.immutable})
        }
        ("v1", "Service") => service(core::Service::decode(raw).map_err(decode_err)?),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            access_review(authz::SelfSubjectAccessReview::decode(raw).map_err(decode_err)?)
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            let r = authz::SelfSubjectRulesReview::decode(raw).map_err(decode_err)?;
            let namespace = r.spec.and_then(|s| s.namespace);
            json!({"metadata": object_meta(r.metadata), "spec": {"namespace": namespace}})
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            let r = authn::SelfSubjectReview::decode(raw).map_err(decode_err)?;
            json!({"metadata": object_meta(r.metadata)})
        }
        ("v1", "Pod") => {
            let p = core::Pod::decode(raw).map_err(decode_err)?;
            json!({"metadata": object_meta(p.metadata), "spec": p.spec.map(pod_spec)})
        }
        _ => {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "protobuf bodies are decoded for Deployment, Namespace, ConfigMap, Secret, Service, Pod, SelfSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview; send {api_version} {kind} as JSON"
                ),
            ));
        }
    };
    prune(&mut v, "");
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    Ok(v)
}

fn access_review(r: authz::SelfSubjectAccessReview) -> Value {
    let spec = r.spec.unwrap_or_default();
    let resource = spec.resource_attributes.map(|a| {
        json!({"namespace": a.namespace, "verb": a.verb, "group": a.group, "version": a.version,
               "resource": a.resource, "subresource": a.subresource, "name": a.name})
    });
    let non_resource =
        spec.non_resource_attributes.map(|n| json!({"path": n.path, "verb": n.verb}));
    json!({"metadata": object_meta(r.metadata),
           "spec": {"resourceAttributes": resource, "nonResourceAttributes": non_resource}})
}

/// Drops what Go's JSON encoding would omit: nulls, empty strings, lists and maps, false, zero.
fn prune(v: &mut Value, key: &str) -> bool {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let drop = m.get_mut(&k).is_some_and(|child| prune(child, &k));
                if drop {
                    m.remove(&k);
                }
            }
            m.is_empty()
                && !matches!(key, "" | "spec" | "status" | "resources" | "strategy" | "metadata")
        }
        Value::Array(a) => {
            for item in a.iter_mut() {
                prune(item, "");
            }
            a.is_empty()
        }
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !*b,
        Value::Number(n) => n.as_f64() == Some(0.0) && !KEEP_ZERO.contains(&key),
    }
}

fn b64_map(m: BTreeMap<String, Vec<u8>>) -> Map<String, Value> {
    m.into_iter()
        .map(|(k, v)| (k, json!(base64::engine::general_purpose::STANDARD.encode(v))))
        .collect()
}

fn object_meta(m: Option<meta::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    json!({
        "name": m.name, "generateName": m.generate_name, "namespace": m.namespace,
        "labels": m.labels, "annotations": m.annotations, "finalizers": m.finalizers,
    })
}

fn label_selector(s: Option<meta::LabelSelector>) -> Value {
    let s = s.unwrap_or_default();
    let exprs: Vec<Value> = s
        .match_expressions
        .into_iter()
        .map(|e| json!({"key": e.key, "operator": e.operator, "values": e.values}))
        .collect();
    json!({"matchLabels": s.match_labels, "matchExpressions": exprs})
}

fn quantities(
    m: BTreeMap<String, k8s_pb::apimachinery::pkg::api::resource::Quantity>,
) -> Map<String, Value> {
    m.into_iter().map(|(k, q)| (k, json!(q.string.unwrap_or_default()))).collect()
}

fn container(c: core::Container) -> Value {
    let ports: Vec<Value> = c.ports.into_iter().map(|p| json!({"name": p.name, "containerPort": p.container_port, "hostPort": p.host_port, "protocol": p.protocol, "hostIP": p.host_ip})).collect();
    let env: Vec<Value> =
        c.env.into_iter().map(|e| json!({"name": e.name, "value": e.value})).collect();
    let resources = c
        .resources
        .map(|r| json!({"limits": quantities(r.limits), "requests": quantities(r.requests)}));
    json!({
        "name": c.name, "image": c.image, "command": c.command, "args": c.args, "workingDir": c.working_dir,
        "ports": ports, "env": env, "resources": resources, "imagePullPolicy": c.image_pull_policy,
        "terminationMessagePath": c.termination_message_path, "terminationMessagePolicy": c.termination_message_policy,
        "stdin": c.stdin, "tty": c.tty,
    })
}

fn pod_spec(s: core::PodSpec) -> Value {
    json!({
        "containers": s.containers.into_iter().map(container).collect::<Vec<_>>(),
        "initContainers": s.init_containers.into_iter().map(container).collect::<Vec<_>>(),
        "restartPolicy": s.restart_policy, "terminationGracePeriodSeconds": s.termination_grace_period_seconds,
        "activeDeadlineSeconds": s.active_deadline_seconds, "dnsPolicy": s.dns_policy, "nodeSelector": s.node_selector,
        "serviceAccountName": s.service_account_name, "nodeName": s.node_name, "hostNetwork": s.host_network,
        "hostname": s.hostname, "schedulerName": s.scheduler_name, "priorityClassName": s.priority_class_name,
    })
}

fn deployment(d: apps::Deployment) -> Value {
    let spec = d.spec.unwrap_or_default();
    let strategy = spec.strategy.map(|s| {
        let ru = s.rolling_update.map(|r| {
            let ios = |v: Option<k8s_pb::apimachinery::pkg::util::intstr::IntOrString>| {
                v.map(int_or_string)
            };
            json!({"maxUnavailable": ios(r.max_unavailable), "maxSurge": ios(r.max_surge)})
        });
        json!({"type": s.r#type, "rollingUpdate": ru})
    });
    let template = spec
        .template
        .map(|t| json!({"metadata": object_meta(t.metadata), "spec": t.spec.map(pod_spec)}));
    json!({
        "metadata": object_meta(d.metadata),
        "spec": {
            "replicas": spec.replicas, "selector": label_selector(spec.selector), "template": template, "strategy": strategy,
            "minReadySeconds": spec.min_ready_seconds, "revisionHistoryLimit": spec.revision_history_limit,
            "progressDeadlineSeconds": spec.progress_deadline_seconds, "paused": spec.paused,
        },
    })
}

fn int_or_string(v: k8s_pb::apimachinery::pkg::util::intstr::IntOrString) -> Value {
    match v.r#type {
        Some(1) => json!(v.str_val.unwrap_or_default()),
        _ => json!(v.int_val.unwrap_or(0)),
    }
}

fn service(s: core::Service) -> Value {
    let spec = s.spec.unwrap_or_default();
    let ports: Vec<Value> = spec
        .ports
        .into_iter()
        .map(|p| json!({"name": p.name, "protocol": p.protocol, "port": p.port, "targetPort": p.target_port.map(int_or_string), "nodePort": p.node_port}))
        .collect();
    json!({
        "metadata": object_meta(s.metadata),
        "spec": {"ports": ports, "selector": spec.selector, "clusterIP": spec.cluster_ip, "type": spec.r#type, "externalName": spec.external_name, "sessionAffinity": spec.session_affinity},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = decode(&envelope("batch/v1", "Job", vec![])).unwrap_err();
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
        let raw =
            envelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", review.encode_to_vec());
        assert_eq!(
            decode(&raw).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                   "metadata": {}, "spec": {"namespace": "team"}})
        );
    }
}
