//! `ValidatePodCreate`: metadata and pod-level spec rules (policies, tolerations, names), calling
//! into `container` and `volume`. Field paths, error types and messages follow upstream (1.35).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::container::{validate_containers, validate_init_containers};
use super::names;
use super::volume::validate_volumes;
use super::{ErrorList, FieldError, Path};

/// Total size of all annotation keys and values.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
const MIRROR_ANNOTATION: &str = crate::keys::CONFIG_MIRROR;

pub(super) fn invalid_each(errs: &mut ErrorList, path: &Path, value: &str, messages: Vec<String>) {
    for m in messages {
        errs.push(FieldError::invalid(path, value, m));
    }
}

/// `ValidateObjectMeta` for a namespaced object whose name is a DNS subdomain.
pub fn validate_object_meta(meta: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errs = ErrorList::default();
    let name = meta.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        if meta.generate_name.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(
                &path.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        invalid_each(&mut errs, &path.child("name"), name, names::dns1123_subdomain_all(name));
    }
    let ns = meta.namespace.as_deref().unwrap_or_default();
    if ns.is_empty() {
        errs.push(FieldError::required(&path.child("namespace"), ""));
    } else {
        invalid_each(&mut errs, &path.child("namespace"), ns, names::dns1123_label(ns));
    }
    validate_labels(meta.labels.as_ref(), &path.child("labels"), &mut errs);
    validate_annotations(meta.annotations.as_ref(), &path.child("annotations"), &mut errs);
    let owners = meta.owner_references.as_deref().unwrap_or_default();
    super::meta::validate_owner_references(owners, &path.child("ownerReferences"), &mut errs);
    let finalizers = meta.finalizers.as_deref().unwrap_or_default();
    super::meta::validate_finalizers(finalizers, &path.child("finalizers"), &mut errs);
    errs
}

/// `ValidateAnnotations`: keys are qualified names, and all of them together at most 256 KiB.
pub fn validate_annotations(
    annotations: Option<&BTreeMap<String, String>>,
    path: &Path,
    errs: &mut ErrorList,
) {
    let mut total = 0usize;
    for (k, v) in annotations.into_iter().flatten() {
        invalid_each(errs, path, k, names::qualified_name(&k.to_lowercase()));
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

/// Upstream's `ValidatePodTemplateSpec`: the template's labels and annotations (reported at
/// `<path>.labels` and `<path>.annotations`, as upstream does), its pod spec, and no ephemeral
/// containers.
pub fn validate_pod_template_spec(template: &PodTemplateSpec, path: &Path) -> ErrorList {
    let mut errs = ErrorList::default();
    let meta = template.metadata.clone().unwrap_or_default();
    validate_labels(meta.labels.as_ref(), &path.child("labels"), &mut errs);
    validate_annotations(meta.annotations.as_ref(), &path.child("annotations"), &mut errs);
    let empty = PodSpec::default();
    let spec = template.spec.as_ref().unwrap_or(&empty);
    errs.extend(validate_pod_spec(spec, &path.child("spec")));
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(FieldError::forbidden(
            &path.child("spec").child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

/// Label keys and values, all reported at the map's own path.
pub fn validate_labels(
    labels: Option<&BTreeMap<String, String>>,
    path: &Path,
    errs: &mut ErrorList,
) {
    for (k, v) in labels.into_iter().flatten() {
        invalid_each(errs, path, k, names::qualified_name(k));
        invalid_each(errs, path, v, names::label_value(v));
    }
}

/// Upstream's `ValidatePodCreate`: the errors the API server answers 422 with.
pub fn validate_pod(pod: &Pod) -> Result<(), ErrorList> {
    let mut errs = validate_object_meta(&pod.metadata, &Path::root("metadata"));
    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    if let Some(v) = pod.metadata.annotations.as_ref().and_then(|a| a.get(MIRROR_ANNOTATION))
        && spec.node_name.as_deref().unwrap_or_default().is_empty()
    {
        let p = Path::root("metadata").child("annotations").key(MIRROR_ANNOTATION);
        errs.push(FieldError::invalid(
            &p,
            v,
            "must set spec.nodeName if mirror pod annotation is set",
        ));
    }
    if let Err(e) = crate::restart_backoff::of(pod.metadata.annotations.as_ref()) {
        e.into_iter().for_each(|e| errs.push(e));
    }
    errs.extend(validate_pod_spec(spec, &Path::root("spec")));
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (Path::root("spec").child("containers").index(i), c));
    let init = spec.init_containers.iter().flatten().enumerate();
    let init = init.map(|(i, c)| (Path::root("spec").child("initContainers").index(i), c));
    for (path, c) in containers.chain(init) {
        let image = c.image.as_deref().unwrap_or_default();
        if image != image.trim() {
            errs.push(FieldError::invalid(
                &path.child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(FieldError::forbidden(
            &Path::root("spec").child("ephemeralContainers"),
            "cannot be set on create",
        ));
    }
    errs.into_result()
}

fn validate_pod_spec(spec: &PodSpec, path: &Path) -> ErrorList {
    let mut errs = ErrorList::default();
    if spec.termination_grace_period_seconds.is_none() {
        errs.push(FieldError::required(&path.child("terminationGracePeriodSeconds"), ""));
    }
    let volumes = validate_volumes(
        spec.volumes.as_deref().unwrap_or_default(),
        &path.child("volumes"),
        &mut errs,
    );
    super::security_context::validate_pod(spec, path, &mut errs);
    let grace = spec.termination_grace_period_seconds;
    validate_containers(&spec.containers, &volumes, grace, &path.child("containers"), &mut errs);
    let init = spec.init_containers.as_deref().unwrap_or_default();
    validate_init_containers(
        init,
        &spec.containers,
        &volumes,
        grace,
        &path.child("initContainers"),
        &mut errs,
    );
    if spec.host_network.unwrap_or(false) {
        for (i, c) in spec.containers.iter().enumerate() {
            for (j, p) in c.ports.iter().flatten().enumerate() {
                let host = p.host_port.unwrap_or(0);
                if host != 0 && host != p.container_port {
                    let fp =
                        path.child("containers").index(i).child("ports").index(j).child("hostPort");
                    errs.push(FieldError::invalid(
                        &fp,
                        host,
                        "must match `containerPort` when `hostNetwork` is true",
                    ));
                }
            }
        }
    }
    match spec.restart_policy.as_deref() {
        None | Some("") => errs.push(FieldError::required(&path.child("restartPolicy"), "")),
        Some("Always" | "OnFailure" | "Never") => {}
        Some(other) => errs.push(FieldError::not_supported(
            &path.child("restartPolicy"),
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    match spec.dns_policy.as_deref() {
        None | Some("") => errs.push(FieldError::required(&path.child("dnsPolicy"), "")),
        Some("ClusterFirstWithHostNet" | "ClusterFirst" | "Default") => {}
        Some("None") => {
            if spec.dns_config.is_none() {
                errs.push(FieldError::required(
                    &path.child("dnsConfig"),
                    "must provide `dnsConfig` when `dnsPolicy` is None",
                ));
            }
        }
        Some(other) => errs.push(FieldError::not_supported(
            &path.child("dnsPolicy"),
            other,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        )),
    }
    validate_labels(spec.node_selector.as_ref(), &path.child("nodeSelector"), &mut errs);
    for (field, value) in [
        ("serviceAccountName", &spec.service_account_name),
        ("nodeName", &spec.node_name),
        ("priorityClassName", &spec.priority_class_name),
        ("runtimeClassName", &spec.runtime_class_name),
    ] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            invalid_each(&mut errs, &path.child(field), v, names::dns1123_subdomain_all(v));
        }
    }
    if let Some(d) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&d)
    {
        errs.push(FieldError::invalid(
            &path.child("activeDeadlineSeconds"),
            d,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
            invalid_each(&mut errs, &path.child(field), v, names::dns1123_label(v));
        }
    }
    validate_tolerations(spec, &path.child("tolerations"), &mut errs);
    errs
}

fn validate_tolerations(spec: &PodSpec, path: &Path, errs: &mut ErrorList) {
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let p = path.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref().unwrap_or_default();
        if !key.is_empty() {
            invalid_each(errs, &p.child("key"), key, names::qualified_name(key));
        } else if op != "Exists" {
            let msg = "operator must be Exists when `key` is empty, which means \"match all values and all keys\"";
            errs.push(FieldError::invalid(&p.child("operator"), op, msg));
        }
        if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            let effect = t.effect.as_deref().unwrap_or_default();
            errs.push(FieldError::invalid(
                &p.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "" | "Equal" => {
                let v = t.value.as_deref().unwrap_or_default();
                let msgs = names::label_value(v);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(&p.child("operator"), v, msgs.join(";")));
                }
            }
            "Exists" => {
                if t.value.as_deref().is_some_and(|v| !v.is_empty()) {
                    let v = t.value.as_deref().unwrap_or_default();
                    errs.push(FieldError::invalid(
                        &p.child("operator"),
                        v,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                &p.child("operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty())
            && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e)
        {
            errs.push(FieldError::not_supported(
                &p.child("effect"),
                e,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}
