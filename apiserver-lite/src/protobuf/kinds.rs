//! Every served kind's protobuf body, by its type (the `match` below is the one place a type
//! is named), and the batch, core config and Service converters.

use base64::Engine;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value, json};

use super::meta::{int_or_string, label_selector, object_meta};
use super::pod::{pod_spec, pod_template};
use super::reviews;
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
        ("coordination.k8s.io/v1", "Lease") => super::coordination::lease(message(raw)?),
        ("policy/v1", "Eviction") => super::policy::eviction(message(raw)?),
        ("policy/v1beta1", "Eviction") => super::policy::eviction_v1beta1(message(raw)?),
        // Registered in every group version, as client-go encodes a delete's body.
        (_, "DeleteOptions") => super::policy::delete_options(message(raw)?),
        ("events.k8s.io/v1", "Event") => super::events::event(message(raw)?),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            reviews::self_subject_access_review(message(raw)?)
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => {
            reviews::subject_access_review(message(raw)?)
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            reviews::self_subject_rules_review(message(raw)?)
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            reviews::self_subject_review(message(raw)?)
        }
        ("authentication.k8s.io/v1", "TokenReview") => reviews::token_review(message(raw)?),
        ("authentication.k8s.io/v1", "TokenRequest") => reviews::token_request(message(raw)?),
        (
            "rbac.authorization.k8s.io/v1",
            kind @ ("Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"),
        ) => super::rbac::decode(kind, raw),
        _ => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "protobuf bodies are decoded for the kinds this server serves, and {api_version} {kind} is not one of them"
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
