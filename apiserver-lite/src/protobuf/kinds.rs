//! The kinds kubectl's typed clients create with protobuf bodies, each from its `k8s-pb`
//! message.

use base64::Engine;
use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value, json};

use super::meta::{int_or_string, label_selector, object_meta};
use super::pod::{pod_spec, pod_template};
use super::{R, done, list, message, nested, number, obj, plain, ptr, string_map, strings};
use crate::errors::ApiError;

use std::mem::take;

/// The object's JSON, by its type.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> R {
    match (api_version, kind) {
        ("apps/v1", "Deployment") => super::apps::deployment(message(raw)?),
        ("apps/v1", "ReplicaSet") => super::apps::replica_set(message(raw)?),
        ("apps/v1", "DaemonSet") => super::apps::daemon_set(message(raw)?),
        ("apps/v1", "ControllerRevision") => super::apps::controller_revision(message(raw)?),
        ("batch/v1", "Job") => job(message(raw)?),
        ("batch/v1", "CronJob") => cron_job(message(raw)?),
        ("v1", "Pod") => {
            let mut p: core::Pod = message(raw)?;
            let v = obj([
                ("metadata", object_meta(p.metadata.take())?),
                ("spec", nested(p.spec.take(), pod_spec)?),
            ]);
            p.status = None;
            done(&p, "Pod")?;
            Ok(v)
        }
        ("v1", "Namespace") => {
            let mut n: core::Namespace = message(raw)?;
            let spec = nested(n.spec.take(), |mut s| {
                let v = obj([("finalizers", strings(take(&mut s.finalizers)))]);
                done(&s, "NamespaceSpec")?;
                Ok(v)
            })?;
            let v = obj([("metadata", object_meta(n.metadata.take())?), ("spec", spec)]);
            n.status = None;
            done(&n, "Namespace")?;
            Ok(v)
        }
        ("v1", "ConfigMap") => {
            let mut c: core::ConfigMap = message(raw)?;
            let v = obj([
                ("metadata", object_meta(c.metadata.take())?),
                ("data", string_map(take(&mut c.data))),
                ("binaryData", b64_map(take(&mut c.binary_data))),
                ("immutable", ptr(c.immutable.take())),
            ]);
            done(&c, "ConfigMap")?;
            Ok(v)
        }
        ("v1", "Secret") => {
            let mut s: core::Secret = message(raw)?;
            let v = obj([
                ("metadata", object_meta(s.metadata.take())?),
                ("data", b64_map(take(&mut s.data))),
                ("stringData", string_map(take(&mut s.string_data))),
                ("type", plain(s.r#type.take())),
                ("immutable", ptr(s.immutable.take())),
            ]);
            done(&s, "Secret")?;
            Ok(v)
        }
        ("v1", "Service") => service(message(raw)?),
        ("v1", "ServiceAccount") => super::core::service_account(message(raw)?),
        ("v1", "Node") => super::core::node(message(raw)?),
        ("v1", "Event") => super::core::event(message(raw)?),
        ("v1", "Endpoints") => super::core::endpoints(message(raw)?),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => access_review(message(raw)?),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            let mut r: authz::SelfSubjectRulesReview = message(raw)?;
            let spec =
                nested(r.spec.take(), |mut s| Ok(obj([("namespace", plain(s.namespace.take()))])))?;
            let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
            r.status = None;
            done(&r, "SelfSubjectRulesReview")?;
            Ok(v)
        }
        ("authentication.k8s.io/v1", "TokenRequest") => token_request(message(raw)?),
        (
            "rbac.authorization.k8s.io/v1",
            kind @ ("Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"),
        ) => super::rbac::decode(kind, raw),
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            let mut r: authn::SelfSubjectReview = message(raw)?;
            let v = obj([("metadata", object_meta(r.metadata.take())?)]);
            r.status = None;
            done(&r, "SelfSubjectReview")?;
            Ok(v)
        }
        _ => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "protobuf bodies are decoded for Deployment, ReplicaSet, DaemonSet, ControllerRevision, Job, CronJob, Namespace, ConfigMap, Secret, Service, ServiceAccount, Node, Event, Endpoints, Pod, Role, ClusterRole, RoleBinding, ClusterRoleBinding, SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview and TokenRequest; send {api_version} {kind} as JSON"
            ),
        )),
    }
}

fn b64_map(m: std::collections::BTreeMap<String, Vec<u8>>) -> Value {
    if m.is_empty() {
        return Value::Null;
    }
    Value::Object(
        m.into_iter()
            .map(|(k, v)| (k, json!(base64::engine::general_purpose::STANDARD.encode(v))))
            .collect::<Map<_, _>>(),
    )
}

fn access_review(mut r: authz::SelfSubjectAccessReview) -> R {
    let spec = nested(r.spec.take(), |mut spec| {
        let resource = nested(spec.resource_attributes.take(), |mut a| {
            let v = obj([
                ("namespace", plain(a.namespace.take())),
                ("verb", plain(a.verb.take())),
                ("group", plain(a.group.take())),
                ("version", plain(a.version.take())),
                ("resource", plain(a.resource.take())),
                ("subresource", plain(a.subresource.take())),
                ("name", plain(a.name.take())),
            ]);
            done(&a, "ResourceAttributes")?;
            Ok(v)
        })?;
        let non_resource = nested(spec.non_resource_attributes.take(), |mut n| {
            Ok(obj([("path", plain(n.path.take())), ("verb", plain(n.verb.take()))]))
        })?;
        let v = obj([("resourceAttributes", resource), ("nonResourceAttributes", non_resource)]);
        done(&spec, "SelfSubjectAccessReviewSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "SelfSubjectAccessReview")?;
    Ok(v)
}

/// `kubectl create token`'s request.
fn token_request(mut r: authn::TokenRequest) -> R {
    let spec = nested(r.spec.take(), |mut s| {
        let bound = nested(s.bound_object_ref.take(), |mut b| {
            let v = obj([
                ("kind", plain(b.kind.take())),
                ("apiVersion", plain(b.api_version.take())),
                ("name", plain(b.name.take())),
                ("uid", plain(b.u_id.take())),
            ]);
            done(&b, "BoundObjectReference")?;
            Ok(v)
        })?;
        let v = obj([
            ("audiences", strings(take(&mut s.audiences))),
            ("expirationSeconds", ptr(s.expiration_seconds.take())),
            ("boundObjectRef", bound),
        ]);
        done(&s, "TokenRequestSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(r.metadata.take())?), ("spec", spec)]);
    r.status = None;
    done(&r, "TokenRequest")?;
    Ok(v)
}

/// `batch/v1` `JobSpec`; the failure and success policies are refused (send JSON for those).
fn job_spec(mut s: batch::JobSpec) -> R {
    let v = obj([
        ("parallelism", ptr(s.parallelism.take())),
        ("completions", ptr(s.completions.take())),
        ("activeDeadlineSeconds", ptr(s.active_deadline_seconds.take())),
        ("backoffLimit", ptr(s.backoff_limit.take())),
        ("backoffLimitPerIndex", ptr(s.backoff_limit_per_index.take())),
        ("maxFailedIndexes", ptr(s.max_failed_indexes.take())),
        ("selector", label_selector(s.selector.take())?),
        ("manualSelector", ptr(s.manual_selector.take())),
        ("template", pod_template(s.template.take())?),
        ("ttlSecondsAfterFinished", ptr(s.ttl_seconds_after_finished.take())),
        ("completionMode", ptr(s.completion_mode.take())),
        ("suspend", ptr(s.suspend.take())),
        ("podReplacementPolicy", ptr(s.pod_replacement_policy.take())),
        ("managedBy", ptr(s.managed_by.take())),
    ]);
    done(&s, "JobSpec")?;
    Ok(v)
}

fn job(mut j: batch::Job) -> R {
    let v = obj([
        ("metadata", object_meta(j.metadata.take())?),
        ("spec", nested(j.spec.take(), job_spec)?),
    ]);
    j.status = None;
    done(&j, "Job")?;
    Ok(v)
}

fn cron_job(mut c: batch::CronJob) -> R {
    let spec = nested(c.spec.take(), |mut s| {
        let template = nested(s.job_template.take(), |mut t| {
            let v = obj([
                ("metadata", object_meta(t.metadata.take())?),
                ("spec", nested(t.spec.take(), job_spec)?),
            ]);
            done(&t, "JobTemplateSpec")?;
            Ok(v)
        })?;
        let v = obj([
            ("schedule", plain(s.schedule.take())),
            ("timeZone", ptr(s.time_zone.take())),
            ("startingDeadlineSeconds", ptr(s.starting_deadline_seconds.take())),
            ("concurrencyPolicy", plain(s.concurrency_policy.take())),
            ("suspend", ptr(s.suspend.take())),
            ("jobTemplate", template),
            ("successfulJobsHistoryLimit", ptr(s.successful_jobs_history_limit.take())),
            ("failedJobsHistoryLimit", ptr(s.failed_jobs_history_limit.take())),
        ]);
        done(&s, "CronJobSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(c.metadata.take())?), ("spec", spec)]);
    c.status = None;
    done(&c, "CronJob")?;
    Ok(v)
}

fn service(mut s: core::Service) -> R {
    let spec = nested(s.spec.take(), |mut spec| {
        let ports = list(take(&mut spec.ports), |mut p| {
            let v = obj([
                ("name", plain(p.name.take())),
                ("protocol", plain(p.protocol.take())),
                ("appProtocol", ptr(p.app_protocol.take())),
                ("port", ptr(p.port.take())),
                ("targetPort", int_or_string(p.target_port.take())),
                ("nodePort", number(p.node_port.take())),
            ]);
            done(&p, "ServicePort")?;
            Ok(v)
        })?;
        let v = obj([
            ("ports", ports),
            ("selector", string_map(take(&mut spec.selector))),
            ("clusterIP", plain(spec.cluster_ip.take())),
            ("clusterIPs", strings(take(&mut spec.cluster_ips))),
            ("type", plain(spec.r#type.take())),
            ("externalIPs", strings(take(&mut spec.external_ips))),
            ("sessionAffinity", plain(spec.session_affinity.take())),
            ("externalName", plain(spec.external_name.take())),
        ]);
        done(&spec, "ServiceSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(s.metadata.take())?), ("spec", spec)]);
    s.status = None;
    done(&s, "Service")?;
    Ok(v)
}
