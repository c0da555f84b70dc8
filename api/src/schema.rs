//! What the built-in types' OpenAPI says about merging, for the fields where it is not "a struct
//! of fields" or "an atomic list": associative lists and their keys (`x-kubernetes-list-type:
//! map` with `-list-map-keys`, or upstream's patch merge key where no list type is given, as
//! structured-merge-diff reads it), sets (`list-type: set`), maps whose entries are owned one by
//! one (labels, data, resource lists) and atomic structs and maps (`x-kubernetes-map-type:
//! atomic`). Written once: apiserver-lite's strategic merge patch and kubectl-lite's three-way
//! patch read their merge keys from here too. Looked up by field name, as every name below
//! means the same thing wherever the served kinds use it (`ports` is told apart by its items).

use serde_json::Value;

/// How a list merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole (the default for a list).
    Atomic,
    /// Scalars, each item owned by itself.
    Set,
    /// Objects identified by these key fields.
    Map(&'static [&'static str]),
}

/// How an object merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectType {
    /// Named fields (the default).
    Struct,
    /// Free keys, each entry owned by itself.
    Map,
    /// Replaced as a whole.
    Atomic,
}

/// The list type of the list field `field`; `sample` is one of its items.
pub fn list_type(field: &str, sample: Option<&Value>) -> ListType {
    ListType::Map(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => &["name"],
        "readinessGates" => &["conditionType"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "conditions" => &["type"],
        "ownerReferences" => &["uid"],
        "hostAliases" => &["ip"],
        "topologySpreadConstraints" => &["topologyKey", "whenUnsatisfiable"],
        "ports" => {
            if sample.is_some_and(|s| s.get("containerPort").is_some()) {
                &["containerPort", "protocol"]
            } else {
                &["port", "protocol"]
            }
        }
        "finalizers" => return ListType::Set,
        _ => return ListType::Atomic,
    })
}

/// The default of a list map key an item may leave out (upstream's schema defaults).
pub fn key_default(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::from("TCP"))
}

/// The object type of the object field `field`.
pub fn object_type(field: &str) -> ObjectType {
    match field {
        "labels" | "annotations" | "data" | "binaryData" | "stringData" | "limits" | "requests"
        | "capacity" | "allocatable" | "overhead" | "matchLabels" => ObjectType::Map,
        "selector" | "nodeSelector" | "labelSelector" | "namespaceSelector" | "fieldRef"
        | "resourceFieldRef" | "configMapKeyRef" | "secretKeyRef" | "configMapRef"
        | "secretRef" | "involvedObject" | "regarding" | "related" => ObjectType::Atomic,
        _ => ObjectType::Struct,
    }
}

/// Strategic merge patch's merge key of a list field: the first of its list map keys.
pub fn merge_key(field: &str, sample: Option<&Value>) -> Option<&'static str> {
    match list_type(field, sample) {
        ListType::Map(keys) => keys.first().copied(),
        ListType::Atomic | ListType::Set => None,
    }
}

/// Whether strategic merge patch's `retainKeys` strategy applies to the field: a patch of it
/// lists the keys to keep (`$retainKeys`), as the union types `volumes[*]` (a volume's one
/// source) and a Deployment's `strategy` declare.
pub fn retains_keys(field: &str) -> bool {
    matches!(field, "volumes" | "strategy")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ports_are_keyed_by_port_and_protocol_in_either_kind() {
        let container = json!({"containerPort": 80});
        assert_eq!(
            list_type("ports", Some(&container)),
            ListType::Map(&["containerPort", "protocol"])
        );
        assert_eq!(
            list_type("ports", Some(&json!({"port": 80}))),
            ListType::Map(&["port", "protocol"])
        );
        assert_eq!(merge_key("ports", Some(&container)), Some("containerPort"));
        assert_eq!(key_default("protocol"), Some(json!("TCP")));
    }

    #[test]
    fn unlisted_lists_are_atomic_and_finalizers_a_set() {
        assert_eq!(list_type("args", None), ListType::Atomic);
        assert_eq!(list_type("tolerations", None), ListType::Atomic);
        assert_eq!(list_type("finalizers", None), ListType::Set);
        assert_eq!(merge_key("finalizers", None), None);
        assert_eq!(object_type("selector"), ObjectType::Atomic);
        assert_eq!(object_type("labels"), ObjectType::Map);
        assert_eq!(object_type("template"), ObjectType::Struct);
    }
}
