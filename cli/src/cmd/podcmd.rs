//! What `exec`, `attach`, `port-forward` and `cp` share about the pod they act on (kubectl's
//! `podcmd` and `AttachablePodForObject`): the pod a `POD` or `TYPE/NAME` argument names, and
//! the container to use when none is named, said on stderr as kubectl says it.

use std::io::Write;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::builder::encode;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// The annotation naming a pod's default container.
pub const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
/// How often a selector's pods are listed while none is there yet.
const POLL: Duration = Duration::from_millis(500);

/// `--pod-running-timeout` as kubectl reads it (a Go duration higher than zero).
pub fn running_timeout(s: &str) -> Result<Duration> {
    parse_running_timeout(s).map_err(CliError::Usage)
}

/// [`running_timeout`], refused with kubectl's message alone (`run` adds its usage hint).
pub fn parse_running_timeout(s: &str) -> std::result::Result<Duration, String> {
    match crate::duration::parse(s) {
        Some(d) if !d.is_zero() => Ok(d),
        Some(_) => Err("--pod-running-timeout must be higher than zero".into()),
        None => Err(format!(
            "invalid argument \"{s}\" for \"--pod-running-timeout\" flag: time: invalid duration \"{s}\""
        )),
    }
}

/// The pod `name` in `namespace`, or the server's error.
pub async fn get(f: &Factory, namespace: &str, name: &str) -> Result<Pod> {
    let v = f.get_json(&format!("/api/v1/namespaces/{namespace}/pods/{}", encode(name))).await?;
    serde_json::from_value(v).map_err(|e| CliError::Unreachable { reason: e.to_string() })
}

/// The pod a `POD`, `pod/NAME` or `TYPE/NAME` argument names: a pod itself, or for a workload
/// or service the most active of the pods its selector picks (waiting up to `timeout` for one).
pub async fn attachable(f: &Factory, arg: &str, timeout: Duration) -> Result<Pod> {
    let namespace = f.namespace().await?;
    let Some((t, name)) = arg.split_once('/') else {
        return get(f, &namespace, arg).await;
    };
    let resource = f.resource(t).await?;
    if resource.group.is_empty() && resource.kind == "Pod" {
        return get(f, &namespace, name).await;
    }
    let ns = resource.namespaced.then_some(namespace.as_str());
    let obj = f.get_json(&resource.url(ns, Some(name))).await?;
    let selector = selector_of(&resource.kind, &obj).ok_or_else(|| {
        CliError::Usage(format!(
            "cannot attach to {}: selector for {} not implemented",
            resource.kind, resource.kind
        ))
    })?;
    let url = format!("/api/v1/namespaces/{namespace}/pods?labelSelector={}", encode(&selector));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = f.get_json(&url).await?;
        let pods: Vec<Pod> = list["items"]
            .as_array()
            .map(|items| {
                items.iter().filter_map(|p| serde_json::from_value(p.clone()).ok()).collect()
            })
            .unwrap_or_default();
        if let Some(p) = most_active(pods) {
            return Ok(p);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::Usage("timed out waiting for the condition".into()));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The label selector of a workload (`spec.selector` as a `LabelSelector`) or a service
/// (`spec.selector` as a map), as a query string.
fn selector_of(kind: &str, obj: &Value) -> Option<String> {
    let sel = &obj["spec"]["selector"];
    let pairs = |m: &Value| -> Vec<String> {
        m.as_object()
            .map(|m| {
                m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect()
            })
            .unwrap_or_default()
    };
    if kind == "Service" || kind == "ReplicationController" {
        let p = pairs(sel);
        return (!p.is_empty()).then(|| p.join(","));
    }
    let mut parts = pairs(&sel["matchLabels"]);
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str()?;
        let values: Vec<&str> =
            e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        parts.push(match e["operator"].as_str()? {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The pod kubectl picks among a selector's (the reverse of its `ActivePods` order): assigned
/// before unassigned, running before unknown before pending, ready before not, fewer restarts,
/// then the older.
fn most_active(pods: Vec<Pod>) -> Option<Pod> {
    let key = |p: &Pod| {
        let spec_node =
            p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| !n.is_empty());
        let status = p.status.as_ref();
        let phase = match status.and_then(|s| s.phase.as_deref()) {
            Some("Running") => 2,
            Some("Unknown") => 1,
            _ => 0,
        };
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let restarts: i32 = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.restart_count)
            .sum();
        let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (spec_node, phase, ready, std::cmp::Reverse(restarts), created.map(std::cmp::Reverse))
    };
    pods.into_iter().fold(None, |best: Option<Pod>, p| match best {
        Some(b) if key(&b) >= key(&p) => Some(b),
        _ => Some(p),
    })
}

/// The container `name`, or without one the pod's default (its annotation's, else the first),
/// said on `warn` when the pod has others (unless `quiet`), as kubectl's
/// `FindOrDefaultContainerByName`. The error is kubectl's text.
pub fn container_or_default(
    pod: &Pod,
    name: Option<&str>,
    quiet: bool,
    warn: &mut dyn Write,
) -> std::result::Result<k8s_openapi::api::core::v1::Container, String> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        return find(pod, name)
            .ok_or_else(|| format!("container {name} not found in pod {pod_name}"));
    }
    let Some(first) = spec.containers.first() else {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        return Err(format!("pod {ns}/{pod_name} does not have any containers"));
    };
    let annotated = pod.metadata.annotations.as_ref().and_then(|a| a.get(DEFAULT_CONTAINER));
    if let Some(c) = annotated.filter(|n| !n.is_empty()).and_then(|n| find(pod, n)) {
        return Ok(c);
    }
    let inits = spec.init_containers.as_ref().map_or(0, Vec::len);
    let ephemerals = spec.ephemeral_containers.as_ref().map_or(0, Vec::len);
    if !quiet && (spec.containers.len() > 1 || inits > 0 || ephemerals > 0) {
        let _ = writeln!(warn, "Defaulted container \"{}\" out of: {}", first.name, all_names(pod));
    }
    Ok(first.clone())
}

/// A container, init container or ephemeral container of the pod, by name.
fn find(pod: &Pod, name: &str) -> Option<k8s_openapi::api::core::v1::Container> {
    let spec = pod.spec.as_ref()?;
    let plain = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    if let Some(c) = plain.into_iter().find(|c| c.name == name) {
        return Some(c.clone());
    }
    let e = spec.ephemeral_containers.iter().flatten().find(|c| c.name == name)?;
    Some(k8s_openapi::api::core::v1::Container {
        name: e.name.clone(),
        image: e.image.clone(),
        tty: e.tty,
        stdin: e.stdin,
        ..Default::default()
    })
}

/// `a, b, dbg (ephem), setup (init)`, as kubectl lists a pod's containers.
fn all_names(pod: &Pod) -> String {
    let Some(spec) = &pod.spec else { return String::new() };
    let mut names: Vec<String> = spec.containers.iter().map(|c| c.name.clone()).collect();
    names.extend(spec.ephemeral_containers.iter().flatten().map(|c| format!("{} (ephem)", c.name)));
    names.extend(spec.init_containers.iter().flatten().map(|c| format!("{} (init)", c.name)));
    names.join(", ")
}

/// The phase of a pod that has finished (`Succeeded`/`Failed`), if it has.
pub fn completed_phase(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .filter(|p| matches!(*p, "Succeeded" | "Failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn the_first_container_is_the_default_and_the_others_are_named() {
        let p = pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a"}, {"name": "b"}],
            "initContainers": [{"name": "setup"}]}}));
        let mut warn = Vec::new();
        let c = container_or_default(&p, None, false, &mut warn).map(|c| c.name);
        assert_eq!(c.as_deref(), Ok("a"));
        assert_eq!(
            String::from_utf8_lossy(&warn),
            "Defaulted container \"a\" out of: a, b, setup (init)\n"
        );
        let mut quiet = Vec::new();
        let _ = container_or_default(&p, None, true, &mut quiet);
        assert!(quiet.is_empty());
    }

    #[test]
    fn the_annotation_names_the_default_silently_and_a_missing_name_is_an_error() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "p", "annotations": {DEFAULT_CONTAINER: "b"}},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
        );
        let mut warn = Vec::new();
        assert_eq!(
            container_or_default(&p, None, false, &mut warn).map(|c| c.name).as_deref(),
            Ok("b")
        );
        assert!(warn.is_empty());
        assert_eq!(
            container_or_default(&p, Some("nope"), false, &mut warn).map(|c| c.name),
            Err("container nope not found in pod p".to_string())
        );
    }

    #[test]
    fn a_single_container_is_chosen_without_a_word() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}),
        );
        let mut warn = Vec::new();
        assert_eq!(
            container_or_default(&p, None, false, &mut warn).map(|c| c.name).as_deref(),
            Ok("a")
        );
        assert!(warn.is_empty());
    }

    #[test]
    fn selectors_read_as_label_queries() {
        let d = serde_json::json!({"spec": {"selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]}}});
        assert_eq!(selector_of("Deployment", &d).as_deref(), Some("app=web,tier in (a,b),!canary"));
        let s = serde_json::json!({"spec": {"selector": {"app": "web"}}});
        assert_eq!(selector_of("Service", &s).as_deref(), Some("app=web"));
        assert_eq!(selector_of("Service", &serde_json::json!({"spec": {}})), None);
    }

    #[test]
    fn the_running_ready_pod_is_picked_over_a_pending_one() {
        let pending = pod(
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n", "containers": []},
            "status": {"phase": "Pending"}}),
        );
        let running = pod(
            serde_json::json!({"metadata": {"name": "b"}, "spec": {"nodeName": "n", "containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let got = most_active(vec![pending, running]).and_then(|p| p.metadata.name);
        assert_eq!(got.as_deref(), Some("b"));
    }

    #[test]
    fn a_pod_running_timeout_must_be_a_positive_duration() {
        assert_eq!(running_timeout("1m0s").ok(), Some(Duration::from_secs(60)));
        assert!(running_timeout("0s").is_err());
        assert!(running_timeout("soon").is_err());
    }
}
