//! Object lifecycle rules, as upstream's REST strategies apply them: decoding into the typed
//! object (unknown fields dropped, or refused with `fieldValidation=Strict`), defaulting, the
//! metadata a create sets, what an update may change, and validation.

use api::validation::{ErrorList, FieldError, Path};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Event, Namespace, Node, Pod, PodSpec, Secret, Service, ServiceAccount,
};
use rand::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::resources::ResourceType;

/// `fieldValidation`: what to do with fields the type does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

impl FieldValidation {
    pub fn parse(v: Option<&str>) -> Result<Self, ApiError> {
        match v {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Strict, Warn or Ignore, not {other:?}"
            ))),
        }
    }
}

/// RFC 3339 with seconds, as metadata timestamps are written.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A random version 4 UUID.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        ["8", "9", "a", "b"][usize::from(b[8] & 3)],
        &h[17..20],
        &h[20..32]
    )
}

/// upstream's generated-name suffix alphabet (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub fn generate_name(prefix: &str) -> String {
    let mut rng = rand::rng();
    let base: String = prefix.chars().take(58).collect();
    let suffix: String =
        (0..5).map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char).collect();
    format!("{base}{suffix}")
}

fn decode_typed<T: DeserializeOwned + Serialize>(
    r: &ResourceType,
    obj: Value,
) -> Result<(Value, Vec<String>), ApiError> {
    let decoded = api::decode::decode::<T>(obj).map_err(|e| {
        ApiError::bad_request(format!(
            "{} in version {:?} cannot be handled as a {}: {e}",
            r.kind, r.version, r.kind
        ))
    })?;
    let value =
        serde_json::to_value(decoded.value).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((value, decoded.unknown_fields))
}

/// Decodes `obj` as the resource's type: wrong types fail with the field path, unknown fields are
/// reported (and dropped, as upstream stores only what the type holds).
pub fn decode(r: &ResourceType, obj: Value) -> Result<(Value, Vec<String>), ApiError> {
    match (r.group, r.kind) {
        ("", "Pod") => decode_typed::<Pod>(r, obj),
        ("", "Namespace") => decode_typed::<Namespace>(r, obj),
        ("", "Node") => decode_typed::<Node>(r, obj),
        ("", "Event") => decode_typed::<Event>(r, obj),
        ("", "Service") => decode_typed::<Service>(r, obj),
        ("", "Endpoints") => decode_typed::<Endpoints>(r, obj),
        ("", "ConfigMap") => decode_typed::<ConfigMap>(r, obj),
        ("", "Secret") => decode_typed::<Secret>(r, obj),
        ("", "ServiceAccount") => decode_typed::<ServiceAccount>(r, obj),
        ("apps", "Deployment") => decode_typed::<Deployment>(r, obj),
        ("apps", "ReplicaSet") => decode_typed::<ReplicaSet>(r, obj),
        ("apps", "DaemonSet") => decode_typed::<DaemonSet>(r, obj),
        ("coordination.k8s.io", "Lease") => decode_typed::<Lease>(r, obj),
        ("events.k8s.io", "Event") => decode_typed::<k8s_openapi::api::events::v1::Event>(r, obj),
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            decode_typed::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview>(r, obj)
        }
        ("authorization.k8s.io", "SubjectAccessReview") => {
            decode_typed::<k8s_openapi::api::authorization::v1::SubjectAccessReview>(r, obj)
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            decode_typed::<k8s_openapi::api::authorization::v1::SelfSubjectRulesReview>(r, obj)
        }
        ("authentication.k8s.io", "TokenReview") => {
            decode_typed::<k8s_openapi::api::authentication::v1::TokenReview>(r, obj)
        }
        ("authentication.k8s.io", "SelfSubjectReview") => {
            decode_typed::<k8s_openapi::api::authentication::v1::SelfSubjectReview>(r, obj)
        }
        _ => Ok((obj, Vec::new())),
    }
}

fn default_pod_spec(spec: &mut Value) {
    let mut pod = Pod { spec: serde_json::from_value(spec.clone()).ok(), ..Default::default() };
    api::defaults::default_pod(&mut pod);
    if let Some(s) = pod.spec {
        *spec = serde_json::to_value(s).unwrap_or_default();
    }
}

fn set_default(obj: &mut Value, path: &[&str], value: Value) {
    let mut v = obj;
    for p in &path[..path.len() - 1] {
        if !v[*p].is_object() {
            v[*p] = json!({});
        }
        v = &mut v[*p];
    }
    let last = path[path.len() - 1];
    if v[last].is_null() {
        v[last] = value;
    }
}

/// Upstream's defaults for the kinds that have them.
pub fn apply_defaults(r: &ResourceType, obj: &mut Value) {
    match (r.group, r.kind) {
        ("", "Pod") => {
            if let Ok(mut pod) = serde_json::from_value::<Pod>(obj.clone()) {
                api::defaults::default_pod(&mut pod);
                if let Some(spec) = pod.spec.as_mut() {
                    spec.service_account_name.get_or_insert_with(|| "default".into());
                    spec.priority.get_or_insert(0);
                }
                *obj = serde_json::to_value(pod).unwrap_or_default();
            }
        }
        ("", "Namespace") => {
            set_default(obj, &["spec", "finalizers"], json!(["kubernetes"]));
            set_default(obj, &["status", "phase"], json!("Active"));
        }
        ("", "Secret") => set_default(obj, &["type"], json!("Opaque")),
        ("", "Service") => {
            set_default(obj, &["spec", "type"], json!("ClusterIP"));
            set_default(obj, &["spec", "sessionAffinity"], json!("None"));
            if let Some(ports) = obj["spec"]["ports"].as_array_mut() {
                for p in ports {
                    if p["protocol"].is_null() {
                        p["protocol"] = json!("TCP");
                    }
                    if p["targetPort"].is_null() {
                        p["targetPort"] = p["port"].clone();
                    }
                }
            }
        }
        ("apps", "Deployment" | "ReplicaSet" | "DaemonSet") => {
            if r.kind != "DaemonSet" {
                set_default(obj, &["spec", "replicas"], json!(1));
            }
            set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
            match r.kind {
                "Deployment" => {
                    set_default(obj, &["spec", "strategy", "type"], json!("RollingUpdate"));
                    if obj["spec"]["strategy"]["type"] == "RollingUpdate" {
                        set_default(
                            obj,
                            &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
                            json!("25%"),
                        );
                        set_default(
                            obj,
                            &["spec", "strategy", "rollingUpdate", "maxSurge"],
                            json!("25%"),
                        );
                    }
                    set_default(obj, &["spec", "progressDeadlineSeconds"], json!(600));
                }
                "DaemonSet" => {
                    set_default(obj, &["spec", "updateStrategy", "type"], json!("RollingUpdate"));
                    set_default(
                        obj,
                        &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"],
                        json!(1),
                    );
                    set_default(
                        obj,
                        &["spec", "updateStrategy", "rollingUpdate", "maxSurge"],
                        json!(0),
                    );
                }
                _ => {}
            }
            if obj["spec"]["template"]["spec"].is_object() {
                default_pod_spec(&mut obj["spec"]["template"]["spec"]);
            }
        }
        _ => {}
    }
}

/// Validation: pods with the API server's full rules (shared with the kubelet), everything else
/// by its metadata.
pub fn validate(r: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    if r.kind == "Pod" && r.group.is_empty() {
        let pod: Pod = serde_json::from_value(obj.clone())
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        return api::validation::validate_pod(&pod)
            .map_err(|errs| ApiError::invalid(r, &name, &errs));
    }
    let meta = serde_json::from_value(obj["metadata"].clone()).unwrap_or_default();
    let mut errs = if r.namespaced {
        api::validation::pod::validate_object_meta(&meta, &Path::root("metadata"))
    } else {
        let mut m = meta;
        m.namespace = Some("cluster-scoped".into()); // the rule for namespaced objects, minus the namespace
        api::validation::pod::validate_object_meta(&m, &Path::root("metadata"))
    };
    let label_name = matches!(r.kind, "Namespace" | "Service");
    if label_name && !name.is_empty() {
        for m in api::validation::names::dns1123_label(&name) {
            if !errs.0.iter().any(|e| e.field == "metadata.name") {
                errs.push(FieldError::invalid(
                    &Path::root("metadata").child("name"),
                    name.as_str(),
                    m,
                ));
            }
        }
    }
    errs.into_result().map_err(|e| ApiError::invalid(r, &name, &e))
}

/// Checks `apiVersion`/`kind` against the URL (filling them when absent, as the real server does
/// for clients that omit them).
pub fn check_type(r: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body of the request must be a JSON object"));
    }
    let gv = r.group_version();
    match obj["apiVersion"].as_str() {
        None | Some("") => obj["apiVersion"] = json!(gv),
        Some(v) if v == gv => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({gv})"
            )));
        }
    }
    match obj["kind"].as_str() {
        None | Some("") => obj["kind"] = json!(r.kind),
        Some(k) if k == r.kind => {}
        Some(k) => {
            // Upstream's prefix (its decoder fails converting one kind into the other), with
            // the reason in plain words.
            return Err(ApiError::bad_request(format!(
                "{k} in version {:?} cannot be handled as a {}: the kind in the data ({k}) does not match the expected kind of {} ({})",
                obj["apiVersion"].as_str().unwrap_or_default(),
                r.kind,
                r.name,
                r.kind
            )));
        }
    }
    Ok(())
}

/// What a create sets: namespace (from the URL), name (generated if asked), uid, timestamps,
/// generation, and for pods the initial status.
pub fn prepare_create(
    r: &ResourceType,
    namespace: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let meta = &mut obj["metadata"];
    if !meta.is_object() {
        *meta = json!({});
    }
    if meta["resourceVersion"].as_str().is_some_and(|v| !v.is_empty()) {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if r.namespaced {
        let ns = namespace.unwrap_or_default();
        match meta["namespace"].as_str() {
            None | Some("") => meta["namespace"] = json!(ns),
            Some(given) if given == ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    } else if let Some(m) = meta.as_object_mut() {
        m.remove("namespace");
    }
    if meta["name"].as_str().unwrap_or_default().is_empty()
        && let Some(prefix) = meta["generateName"].as_str().filter(|p| !p.is_empty())
    {
        meta["name"] = json!(generate_name(prefix));
    }
    meta["uid"] = json!(new_uid());
    meta["creationTimestamp"] = json!(now_rfc3339());
    meta["generation"] = json!(1);
    if let Some(m) = meta.as_object_mut() {
        for gone in ["deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"]
        {
            m.remove(gone);
        }
    }
    if r.kind == "Pod" && r.group.is_empty() {
        let spec: PodSpec = serde_json::from_value(obj["spec"].clone()).unwrap_or_default();
        obj["status"] =
            json!({ "phase": "Pending", "qosClass": api::qos::pod_qos(&spec).as_str() });
    }
    Ok(())
}

/// Upstream's `ValidatePodUpdate`: a pod's spec may change only in container images,
/// `activeDeadlineSeconds`, added tolerations and `terminationGracePeriodSeconds`.
fn check_pod_update(r: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let strip = |spec: &Value| {
        let mut s = spec.clone();
        for list in ["containers", "initContainers"] {
            for c in s[list].as_array_mut().into_iter().flatten() {
                c["image"] = Value::Null;
            }
        }
        for f in ["activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"] {
            s[f] = Value::Null;
        }
        // The scheduler's binding sets nodeName once.
        if old["spec"]["nodeName"].is_null() {
            s["nodeName"] = Value::Null;
        }
        s
    };
    if strip(&old["spec"]) != strip(&new["spec"]) {
        let name = new["metadata"]["name"].as_str().unwrap_or_default();
        let mut errs = ErrorList::default();
        errs.push(FieldError::forbidden(
            &Path::root("spec"),
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
        return Err(ApiError::invalid(r, name, &errs));
    }
    Ok(())
}

/// What an update keeps from the stored object, and whether it bumps the generation.
pub fn prepare_update(
    r: &ResourceType,
    subresource: Option<&str>,
    old: &Value,
    new: &mut Value,
) -> Result<(), ApiError> {
    for immutable in [
        "uid",
        "creationTimestamp",
        "name",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        if old["metadata"][immutable].is_null() {
            if let Some(m) = new["metadata"].as_object_mut() {
                m.remove(immutable);
            }
        } else {
            new["metadata"][immutable] = old["metadata"][immutable].clone();
        }
    }
    let has_status = r.has_subresource("status");
    match subresource {
        Some("status") => {
            // A status update changes only the status.
            let status = new["status"].take();
            *new = old.clone();
            new["status"] = status;
        }
        // A binding sets spec.nodeName and the PodScheduled condition together; its own rule
        // (`binding::Binding::assign`) decides both.
        Some("binding") => {}
        _ if has_status => new["status"] = old["status"].clone(),
        _ => {}
    }
    if r.kind == "Pod" && r.group.is_empty() && subresource.is_none() {
        check_pod_update(r, old, new)?;
    }
    if old.get("spec") != new.get("spec") && new.get("spec").is_some() {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
        new["metadata"]["generation"] = json!(generation + 1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::find;

    #[test]
    fn uids_and_generated_names_look_like_upstreams() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        let n = generate_name("web-");
        assert!(
            n.starts_with("web-")
                && n.len() == 9
                && n[4..].bytes().all(|b| NAME_ALPHABET.contains(&b))
        );
    }

    #[test]
    fn decoding_reports_type_errors_with_paths_and_unknown_fields() {
        let pods = find("", "v1", "pods").unwrap();
        let bad = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "eighty"}]}]}});
        let err = decode(pods, bad).unwrap_err();
        assert!(err.message.starts_with("Pod in version \"v1\" cannot be handled as a Pod: spec.containers[0].ports[0].containerPort"), "{}", err.message);
        let (_, unknown) =
            decode(pods, json!({"spec": {"containers": [{"name": "c", "comand": ["x"]}]}}))
                .unwrap();
        assert_eq!(unknown, ["spec.containers[0].comand"]);
    }

    #[test]
    fn create_sets_metadata_and_pod_status() {
        let pods = find("", "v1", "pods").unwrap();
        let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}});
        prepare_create(pods, Some("default"), &mut obj).unwrap();
        apply_defaults(pods, &mut obj);
        assert_eq!(obj["metadata"]["namespace"], "default");
        assert!(obj["metadata"]["name"].as_str().unwrap().starts_with("web-"));
        assert_eq!(obj["metadata"]["generation"], 1);
        assert_eq!(obj["status"]["phase"], "Pending");
        assert_eq!(obj["status"]["qosClass"], "BestEffort");
        assert_eq!(obj["spec"]["restartPolicy"], "Always");
        assert_eq!(obj["spec"]["serviceAccountName"], "default");
        let mut wrong = json!({"metadata": {"namespace": "other"}});
        assert_eq!(prepare_create(pods, Some("default"), &mut wrong).unwrap_err().code, 400);
    }

    #[test]
    fn updates_keep_identity_separate_status_and_bump_generation_on_spec_changes() {
        let deploy = find("apps", "v1", "deployments").unwrap();
        let old = json!({"metadata": {"name": "web", "uid": "u1", "generation": 3}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let mut new = json!({"metadata": {"name": "web", "uid": "forged"}, "spec": {"replicas": 2}, "status": {"replicas": 9}});
        prepare_update(deploy, None, &old, &mut new).unwrap();
        assert_eq!(
            (new["metadata"]["uid"].as_str(), new["metadata"]["generation"].as_i64()),
            (Some("u1"), Some(4))
        );
        assert_eq!(new["status"]["replicas"], 1, "the main resource cannot write status");
        let mut status_only = json!({"spec": {"replicas": 5}, "status": {"replicas": 2}});
        prepare_update(deploy, Some("status"), &old, &mut status_only).unwrap();
        assert_eq!(
            (status_only["spec"]["replicas"].as_i64(), status_only["status"]["replicas"].as_i64()),
            (Some(1), Some(2))
        );
        assert_eq!(status_only["metadata"]["generation"], 3, "a status write is no spec change");
    }

    #[test]
    fn a_pod_spec_is_immutable_except_images() {
        let pods = find("", "v1", "pods").unwrap();
        let old = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}], "restartPolicy": "Always"}});
        let mut image = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:2"}], "restartPolicy": "Always"}});
        prepare_update(pods, None, &old, &mut image).unwrap();
        let mut policy = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x:1"}], "restartPolicy": "Never"}});
        let err = prepare_update(pods, None, &old, &mut policy).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message.starts_with(
                "Pod \"p\" is invalid: spec: Forbidden: pod updates may not change fields"
            ),
            "{}",
            err.message
        );
    }

    #[test]
    fn type_checks_fill_or_refuse_apiversion_and_kind() {
        let pods = find("", "v1", "pods").unwrap();
        let mut bare = json!({"metadata": {"name": "p"}});
        check_type(pods, &mut bare).unwrap();
        assert_eq!((bare["apiVersion"].as_str(), bare["kind"].as_str()), (Some("v1"), Some("Pod")));
        let err =
            check_type(pods, &mut json!({"apiVersion": "apps/v1", "kind": "Pod"})).unwrap_err();
        assert_eq!(
            err.message,
            "the API version in the data (apps/v1) does not match the expected API version (v1)"
        );
    }
}
