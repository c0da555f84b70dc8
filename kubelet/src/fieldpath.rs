//! Pod fields by path, as upstream's `pkg/fieldpath`: what a `fieldRef` reads (env vars and
//! downward API files) and what a `resourceFieldRef` reads (a container's requests and limits,
//! the node's allocatable where a limit is unset, in units of a divisor).

use api::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};

/// Why a field cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    #[error("unsupported fieldPath: {0}")]
    Unsupported(String),
    #[error("fieldPath {0:?} does not support subscript")]
    NoSubscript(String),
    #[error("invalid key subscript in {path}: {message}")]
    BadSubscript { path: String, message: String },
    #[error("unsupported container resource : {0}")]
    UnsupportedResource(String),
    #[error("container {0} not found")]
    NoContainer(String),
    #[error("resourceFieldRef {resource}: {value:?}: {message}")]
    Quantity { resource: String, value: String, message: String },
}

/// What the node can give pods: the value of a limit a container does not set (upstream's
/// `defaultPodLimitsForDownwardAPI`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allocatable {
    pub cpu_millis: i128,
    pub memory_bytes: i128,
}

/// What a pod's status fields read (the kubelet knows them before the API does).
#[derive(Debug, Clone, Copy, Default)]
pub struct PodAddresses<'a> {
    pub pod_ip: Option<&'a str>,
    pub host_ip: Option<&'a str>,
}

/// Go's `%q` of a string: double-quoted with Go's escapes, as upstream's `FormatMap` writes
/// label and annotation values.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if c == ' ' || !(c.is_control() || c.is_whitespace()) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Upstream's `FormatMap`: one `key="value"` line per entry, sorted by key, no final newline.
pub fn format_map(map: Option<&std::collections::BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `metadata.labels['k']` → (`metadata.labels`, `k`), as upstream's `SplitMaybeSubscriptedPath`.
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let inner = path.strip_suffix("']")?;
    let (base, key) = inner.split_once("['")?;
    (!base.is_empty()).then_some((base, key))
}

/// The metadata fields a downward API volume may project (upstream's
/// `ExtractFieldPathAsString`): name, namespace, uid, labels and annotations, whole or one key.
pub fn metadata_field(pod: &Pod, path: &str) -> Result<String, FieldPathError> {
    let m = &pod.metadata;
    if let Some((base, key)) = split_subscript(path) {
        let (map, problems) = match base {
            "metadata.annotations" => {
                (&m.annotations, api::validation::names::qualified_name(&key.to_lowercase()))
            }
            "metadata.labels" => (&m.labels, api::validation::names::qualified_name(key)),
            _ => return Err(FieldPathError::NoSubscript(path.to_string())),
        };
        if !problems.is_empty() {
            return Err(FieldPathError::BadSubscript {
                path: path.to_string(),
                message: problems.join(";"),
            });
        }
        return Ok(map.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or_default());
    }
    Ok(match path {
        "metadata.annotations" => format_map(m.annotations.as_ref()),
        "metadata.labels" => format_map(m.labels.as_ref()),
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        _ => return Err(FieldPathError::Unsupported(path.to_string())),
    })
}

/// What an env var's `fieldRef` reads: the spec and status fields the kubelet knows, then the
/// metadata ones (upstream's `podFieldSelectorRuntimeValue`).
pub fn pod_field(
    pod: &Pod,
    path: &str,
    addresses: PodAddresses<'_>,
) -> Result<String, FieldPathError> {
    let spec = pod.spec.as_ref();
    Ok(match path {
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => {
            spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default()
        }
        "status.podIP" | "status.podIPs" => addresses.pod_ip.unwrap_or_default().to_string(),
        "status.hostIP" | "status.hostIPs" => addresses.host_ip.unwrap_or_default().to_string(),
        _ => return metadata_field(pod, path),
    })
}

/// The container a volume's `resourceFieldRef` names (app containers, then init containers).
pub fn find_container<'a>(pod: &'a Pod, name: &str) -> Result<&'a Container, FieldPathError> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
        .find(|c| c.name == name)
        .ok_or_else(|| FieldPathError::NoContainer(name.to_string()))
}

fn parse(resource: &str, value: &str) -> Result<Quantity, FieldPathError> {
    Quantity::parse(value).map_err(|e| FieldPathError::Quantity {
        resource: resource.to_string(),
        value: value.to_string(),
        message: e.to_string(),
    })
}

/// Upstream's `ExtractContainerResourceValue` after `defaultPodLimitsForDownwardAPI`: the
/// request or limit in units of the divisor (default 1), rounded up; an unset CPU or memory
/// limit reads the node's allocatable, an unset request reads 0.
pub fn container_resource(
    selector: &ResourceFieldSelector,
    container: &Container,
    allocatable: Allocatable,
) -> Result<String, FieldPathError> {
    let resource = selector.resource.as_str();
    let unsupported = || FieldPathError::UnsupportedResource(resource.to_string());
    let (list, name) = resource.split_once('.').ok_or_else(unsupported)?;
    let cpu = name == "cpu";
    if !(cpu || name == "memory" || name == "ephemeral-storage" || name.starts_with("hugepages-")) {
        return Err(unsupported());
    }
    let resources = container.resources.as_ref();
    let set = match list {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return Err(unsupported()),
    };
    let value = set.and_then(|l| l.get(name)).map(|q| parse(resource, &q.0)).transpose()?;
    let value = match (list, name, value) {
        ("limits", "cpu", v) if v.is_none_or(Quantity::is_zero) => {
            return Ok(divide(allocatable.cpu_millis, divisor(selector, true)?).to_string());
        }
        ("limits", "memory", v) if v.is_none_or(Quantity::is_zero) => {
            return Ok(divide(allocatable.memory_bytes, divisor(selector, false)?).to_string());
        }
        (_, _, v) => v.unwrap_or(Quantity::ZERO),
    };
    let amount = if cpu { value.milli_value() } else { value.value() };
    Ok(divide(amount, divisor(selector, cpu)?).to_string())
}

/// The divisor in the unit the amount is in (millis for CPU), at least 1.
fn divisor(selector: &ResourceFieldSelector, cpu: bool) -> Result<i128, FieldPathError> {
    let Some(q) = selector.divisor.as_ref() else { return Ok(if cpu { 1000 } else { 1 }) };
    let d = parse(&selector.resource, &q.0)?;
    if d.is_zero() {
        return Ok(if cpu { 1000 } else { 1 });
    }
    Ok((if cpu { d.milli_value() } else { d.value() }).max(1))
}

fn divide(amount: i128, divisor: i128) -> i128 {
    let q = amount / divisor;
    if amount % divisor > 0 { q + 1 } else { q }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "prod", "uid": "u-1",
                "labels": {"tier": "front", "app": "web"},
                "annotations": {"note": "say \"hi\"\n\tbye", "k8s.io/x": "é"},
            },
            "spec": {"nodeName": "n1", "serviceAccountName": "sa", "containers": [{
                "name": "app",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "64Mi"},
                    "limits": {"memory": "128Mi"},
                },
            }]},
        }))
        .expect("pod")
    }

    #[test]
    fn labels_and_annotations_are_formatted_sorted_and_go_quoted() {
        let p = pod();
        assert_eq!(metadata_field(&p, "metadata.labels").unwrap(), "app=\"web\"\ntier=\"front\"");
        assert_eq!(
            metadata_field(&p, "metadata.annotations").unwrap(),
            "k8s.io/x=\"é\"\nnote=\"say \\\"hi\\\"\\n\\tbye\""
        );
        assert_eq!(metadata_field(&p, "metadata.labels['tier']").unwrap(), "front");
        assert_eq!(metadata_field(&p, "metadata.labels['missing']").unwrap(), "");
        assert_eq!(metadata_field(&p, "metadata.uid").unwrap(), "u-1");
        assert_eq!(go_quote("a\u{1}b\u{7f}"), "\"a\\x01b\\x7f\"");
    }

    #[test]
    fn unsupported_paths_and_subscripts_are_errors() {
        let p = pod();
        assert_eq!(
            metadata_field(&p, "spec.nodeName").unwrap_err().to_string(),
            "unsupported fieldPath: spec.nodeName"
        );
        assert!(matches!(
            metadata_field(&p, "metadata.name['x']"),
            Err(FieldPathError::NoSubscript(_))
        ));
        assert!(matches!(
            metadata_field(&p, "metadata.labels['-bad-']"),
            Err(FieldPathError::BadSubscript { .. })
        ));
        let addresses = PodAddresses { pod_ip: Some("10.0.0.2"), host_ip: None };
        assert_eq!(pod_field(&p, "spec.nodeName", addresses).unwrap(), "n1");
        assert_eq!(pod_field(&p, "status.podIP", addresses).unwrap(), "10.0.0.2");
        assert_eq!(pod_field(&p, "metadata.namespace", addresses).unwrap(), "prod");
    }

    #[test]
    fn resources_round_up_in_divisor_units_and_unset_limits_read_the_node() {
        let p = pod();
        let c = find_container(&p, "app").unwrap();
        let node = Allocatable { cpu_millis: 4000, memory_bytes: 8 << 30 };
        let read = |resource: &str, divisor: Option<&str>| {
            let s = ResourceFieldSelector {
                resource: resource.into(),
                divisor: divisor
                    .map(|d| k8s_openapi::apimachinery::pkg::api::resource::Quantity(d.into())),
                container_name: None,
            };
            container_resource(&s, c, node)
        };
        assert_eq!(read("requests.cpu", None).unwrap(), "1");
        assert_eq!(read("requests.cpu", Some("1m")).unwrap(), "250");
        assert_eq!(read("limits.cpu", None).unwrap(), "4", "no CPU limit: the node's");
        assert_eq!(read("limits.memory", Some("1Mi")).unwrap(), "128");
        assert_eq!(read("requests.memory", None).unwrap(), (64u64 << 20).to_string());
        assert_eq!(read("requests.ephemeral-storage", None).unwrap(), "0");
        assert_eq!(
            read("limits.gpu", None).unwrap_err().to_string(),
            "unsupported container resource : limits.gpu"
        );
        assert!(matches!(find_container(&p, "nope"), Err(FieldPathError::NoContainer(_))));
    }
}
