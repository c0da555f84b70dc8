//! Decoding JSON into a typed object as the API server does: a wrong type fails with the field
//! path, and fields the type does not have are collected (for `fieldValidation` and for the
//! kubelet's warnings) instead of silently vanishing.

use serde::de::DeserializeOwned;

/// A decoded object and the paths of the fields it ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<T> {
    pub value: T,
    /// Paths as the API server prints them: `spec.containers[0].comand`.
    pub unknown_fields: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DecodeError {
    pub path: String,
    pub message: String,
}

fn field_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => {
            let parent = field_path(parent);
            if parent.is_empty() { key.clone() } else { format!("{parent}.{key}") }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => field_path(parent),
    }
}

/// Decodes `value` as a `T`.
pub fn decode<T: DeserializeOwned>(value: serde_json::Value) -> Result<Decoded<T>, DecodeError> {
    let mut unknown_fields = Vec::new();
    let mut note = |p: serde_ignored::Path<'_>| unknown_fields.push(field_path(&p));
    let value =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut note))
            .map_err(|e| DecodeError {
                path: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
    Ok(Decoded { value, unknown_fields })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn reports_unknown_fields_and_type_errors_by_path() {
        let v = serde_json::json!({"spec": {"containers": [{"name": "c", "comand": ["x"]}]}, "extra": 1});
        let d: Decoded<Pod> = decode(v).unwrap();
        assert_eq!(d.unknown_fields, ["extra", "spec.containers[0].comand"]);
        let bad = serde_json::json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "x"}]}]}});
        let e = decode::<Pod>(bad).unwrap_err();
        assert_eq!(e.path, "spec.containers[0].ports[0].containerPort");
    }
}
