//! Reading one static pod manifest: size-limited, YAML or JSON (a byte-order mark dropped, a
//! repeated key refused), exactly one `v1` `Pod`, decoded with field paths on type errors and
//! unknown fields reported, then defaulted, named for this node and validated with the API
//! server's rules. The manifest URL source decodes its pods with the same [`from_value`].

use std::path::{Path, PathBuf};

use api::keys;
use k8s_openapi::api::core::v1::{Pod, Toleration};

use super::Source;

/// The largest manifest read (the API server's request limit is 3 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// A static pod read from a file, ready for the pod config.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticPod {
    pub pod: Pod,
    pub file: PathBuf,
    /// Fields the manifest has that a `Pod` does not (typos, wrong nesting), as paths.
    pub unknown_fields: Vec<String>,
}

/// Why a manifest was rejected. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{file}: {size} bytes is larger than the {limit}-byte limit for a manifest")]
    TooLarge { file: PathBuf, size: u64, limit: u64 },
    #[error("{file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{file}: not valid UTF-8")]
    NotUtf8 { file: PathBuf },
    #[error("{file}: {message}")]
    Syntax { file: PathBuf, message: String },
    #[error("{file}: the file is empty")]
    Empty { file: PathBuf },
    #[error("{file}: holds more than one YAML document; a manifest holds exactly one pod")]
    MultipleDocuments { file: PathBuf },
    #[error("{file}: expected apiVersion v1 and kind Pod, found {api_version:?} {kind:?}")]
    NotAPod { file: PathBuf, api_version: String, kind: String },
    #[error("{file}: {field}: {message}")]
    Decode { file: PathBuf, field: String, message: String },
    #[error("{file}: metadata.name: Required value: name is needed for the pod")]
    NoName { file: PathBuf },
    #[error("{file}: invalid pod: {errors}")]
    Invalid { file: PathBuf, errors: api::validation::ErrorList },
}

impl ManifestError {
    pub fn file(&self) -> &Path {
        match self {
            ManifestError::TooLarge { file, .. }
            | ManifestError::Read { file, .. }
            | ManifestError::NotUtf8 { file }
            | ManifestError::Syntax { file, .. }
            | ManifestError::Empty { file }
            | ManifestError::MultipleDocuments { file }
            | ManifestError::NotAPod { file, .. }
            | ManifestError::Decode { file, .. }
            | ManifestError::NoName { file }
            | ManifestError::Invalid { file, .. } => file,
        }
    }
}

/// Reads, parses, defaults, names and validates the manifest at `file` for `node_name`.
pub fn read(file: &Path, node_name: &str) -> Result<StaticPod, ManifestError> {
    let f = || file.to_path_buf();
    let meta =
        std::fs::metadata(file).map_err(|source| ManifestError::Read { file: f(), source })?;
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            file: f(),
            size: meta.len(),
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let bytes = std::fs::read(file).map_err(|source| ManifestError::Read { file: f(), source })?;
    // The file may have grown between the two calls.
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            file: f(),
            size: bytes.len() as u64,
            limit: MAX_MANIFEST_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| ManifestError::NotUtf8 { file: f() })?;
    parse(file, &text, node_name)
}

/// The manifest's one document as a JSON value: a leading byte-order mark dropped, a repeated
/// mapping key refused ([`super::syntax`]).
pub(crate) fn to_value(file: &Path, text: &str) -> Result<serde_json::Value, ManifestError> {
    let syntax = |message: String| ManifestError::Syntax { file: file.to_path_buf(), message };
    let text = super::syntax::strip_bom(text);
    if text.trim().is_empty() {
        return Err(ManifestError::Empty { file: file.to_path_buf() });
    }
    if file.extension().is_some_and(|e| e == "json") {
        return super::syntax::json(text).map_err(syntax);
    }
    // Document by document: the first error ends the read (the iterator itself would go on
    // after a syntax error), and a second document is refused. serde_yaml_ng bounds alias
    // expansion and nesting, so a billion-laughs file fails fast.
    let mut first = None;
    for (i, document) in super::syntax::yaml_documents(text).enumerate() {
        let value = document.map_err(syntax)?;
        if i > 0 {
            return Err(ManifestError::MultipleDocuments { file: file.to_path_buf() });
        }
        first = Some(value);
    }
    first.ok_or_else(|| ManifestError::Empty { file: file.to_path_buf() })
}

/// Parses manifest text (the file name only chooses JSON or YAML and names errors).
pub fn parse(file: &Path, text: &str, node_name: &str) -> Result<StaticPod, ManifestError> {
    let value = to_value(file, text)?;
    from_value(file, value, node_name, Source::File)
}

/// Decodes one pod of `source` (named by `file`: a path, or the manifest URL), then defaults,
/// names and validates it.
pub(crate) fn from_value(
    file: &Path,
    value: serde_json::Value,
    node_name: &str,
    source: Source,
) -> Result<StaticPod, ManifestError> {
    let (api_version, kind) = (
        value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default().to_string(),
        value.get("kind").and_then(|v| v.as_str()).unwrap_or_default().to_string(),
    );
    if api_version != "v1" || kind != "Pod" {
        return Err(ManifestError::NotAPod { file: file.to_path_buf(), api_version, kind });
    }
    let decoded = api::decode::decode::<Pod>(value).map_err(|e| ManifestError::Decode {
        file: file.to_path_buf(),
        field: e.path,
        message: e.message,
    })?;
    let (mut pod, unknown_fields) = (decoded.value, decoded.unknown_fields);
    if pod.metadata.name.as_deref().unwrap_or_default().is_empty() {
        return Err(ManifestError::NoName { file: file.to_path_buf() });
    }
    api::defaults::default_pod(&mut pod);
    let after = validate_after(&pod, node_name);
    apply_static_defaults(&mut pod, file, node_name, source);
    let mut errors = match api::validation::validate_pod(&pod) {
        Ok(()) => api::validation::ErrorList::default(),
        Err(errors) => errors,
    };
    if let Err(e) = after {
        errors.push(e);
    }
    errors
        .into_result()
        .map_err(|errors| ManifestError::Invalid { file: file.to_path_buf(), errors })?;
    Ok(StaticPod { pod, file: file.to_path_buf(), unknown_fields })
}

/// The `kubelet-rs.io/after` declaration, checked against the pod's manifest name.
fn validate_after(pod: &Pod, node_name: &str) -> Result<(), api::validation::FieldError> {
    let Some(value) = pod.metadata.annotations.as_ref().and_then(|a| a.get(keys::STATIC_AFTER))
    else {
        return Ok(());
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let own = pod.metadata.name.as_deref().unwrap_or_default();
    crate::ordering::parse(value, namespace, own, node_name).map(|_| ()).map_err(|why| {
        let path =
            api::validation::Path::root("metadata").child("annotations").key(keys::STATIC_AFTER);
        api::validation::FieldError::invalid(&path, value.as_str(), why)
    })
}

/// What the kubelet adds to a static pod (from a file or the manifest URL): a UID derived from
/// the content, node and file (or URL), the `<name>-<node>` name, the default namespace, this
/// node, the config hash and source, and a toleration of every NoExecute taint.
fn apply_static_defaults(pod: &mut Pod, file: &Path, node_name: &str, source: Source) {
    if pod.metadata.uid.as_deref().unwrap_or_default().is_empty() {
        let source = file.display().to_string();
        pod.metadata.uid = Some(api::static_pod::static_pod_uid(pod, node_name, &source));
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    pod.metadata.name = Some(api::static_pod::static_pod_name(&name, node_name));
    if pod.metadata.namespace.as_deref().unwrap_or_default().is_empty() {
        pod.metadata.namespace = Some("default".into());
    }
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node_name.to_string());
    let tolerate_all = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    if !tolerations.contains(&tolerate_all) {
        tolerations.push(tolerate_all);
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(keys::CONFIG_HASH.into(), uid);
    annotations.insert(keys::CONFIG_SOURCE.into(), source.as_str().into());
    pod.status.get_or_insert_with(Default::default).phase = Some("Pending".into());
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nginx-pod\nspec:\n  containers:\n  - name: nginx\n    image: busybox-httpd:1.35\n";

    fn p(name: &str) -> PathBuf {
        PathBuf::from(format!("/etc/kubernetes/manifests/{name}"))
    }

    #[test]
    fn a_crash_back_off_annotation_out_of_bounds_rejects_the_manifest_naming_it() {
        let text = NGINX.replace(
            "name: nginx-pod\n",
            "name: nginx-pod\n  annotations: {kubelet-rs.io/crash-loop-backoff-max: 10m}\n",
        );
        let err = parse(&p("nginx.yaml"), &text, "node-1").unwrap_err().to_string();
        assert!(err.starts_with("/etc/kubernetes/manifests/nginx.yaml: invalid pod:"), "{err}");
        assert!(
            err.contains("metadata.annotations[kubelet-rs.io/crash-loop-backoff-max]: Invalid value: \"10m\": must be between 1s and 5m0s"),
            "{err}"
        );
    }

    #[test]
    fn a_manifest_becomes_a_named_defaulted_static_pod() {
        let sp = parse(&p("nginx.yaml"), NGINX, "node-1").unwrap();
        let pod = &sp.pod;
        assert_eq!(pod.metadata.name.as_deref(), Some("nginx-pod-node-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let uid = pod.metadata.uid.clone().unwrap();
        assert_eq!(pod.metadata.annotations.as_ref().unwrap()[keys::CONFIG_HASH], uid);
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert!(sp.unknown_fields.is_empty());
        // Same content and file: same UID; any change: a new one.
        assert_eq!(
            parse(&p("nginx.yaml"), NGINX, "node-1").unwrap().pod.metadata.uid,
            Some(uid.clone())
        );
        let edited = NGINX.replace("1.35", "1.36");
        assert_ne!(parse(&p("nginx.yaml"), &edited, "node-1").unwrap().pod.metadata.uid, Some(uid));
    }

    #[test]
    fn json_manifests_and_unknown_fields() {
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox:1.35","imagePullPolicy":"Never","comand":["x"]}]}}"#;
        let sp = parse(&p("j.json"), json, "n").unwrap();
        assert_eq!(sp.unknown_fields, ["spec.containers[0].comand"]);
    }

    #[test]
    fn bad_manifests_name_the_file_and_the_problem() {
        let cases: &[(&str, &str, &str)] = &[
            ("empty.yaml", "   \n", "the file is empty"),
            ("syntax.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [\n", "YAML"),
            (
                "two.yaml",
                "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\n",
                "more than one YAML document",
            ),
            ("bad-second.yaml", "apiVersion: v1\nkind: Pod\n---\nx: [\n", "YAML"),
            (
                "svc.yaml",
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n",
                "expected apiVersion v1 and kind Pod",
            ),
            (
                "noname.yaml",
                "apiVersion: v1\nkind: Pod\nspec:\n  containers: []\n",
                "name is needed",
            ),
            (
                "type.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\nspec:\n  containers:\n  - name: c\n    image: x:1\n    ports:\n    - containerPort: eighty\n",
                "spec.containers[0].ports[0].containerPort",
            ),
            (
                "invalid.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\nspec:\n  containers:\n  - name: c\n",
                "spec.containers[0].image: Required value",
            ),
        ];
        for (file, text, want) in cases {
            let err = parse(&p(file), text, "n").unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(file), "{file}: error must name the file: {msg}");
            assert!(msg.contains(want), "{file}: {msg} should mention {want:?}");
        }
    }

    #[test]
    fn a_byte_order_mark_is_read_past() {
        let with_bom = format!("\u{feff}{NGINX}");
        let sp = parse(&p("bom.yaml"), &with_bom, "node-1").unwrap();
        assert_eq!(sp.pod.metadata.name.as_deref(), Some("nginx-pod-node-1"));
        let json = "\u{feff}{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"j\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1.35\"}]}}";
        assert!(parse(&p("bom.json"), json, "n").is_ok());
        let err = parse(&p("only-bom.yaml"), "\u{feff}\n", "n").unwrap_err();
        assert!(matches!(err, ManifestError::Empty { .. }), "{err}");
    }

    #[test]
    fn a_duplicated_key_is_refused_naming_the_key_and_line() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n";
        let err = parse(&p("dup.yaml"), text, "n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/etc/kubernetes/manifests/dup.yaml: YAML: line 3: key \"name\" already set in map"
        );
        let json = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\n\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}";
        let err = parse(&p("dup.json"), json, "n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/etc/kubernetes/manifests/dup.json: JSON syntax: line 2: key \"name\" already set in map"
        );
    }

    #[test]
    fn billion_laughs_is_rejected_fast() {
        let mut s = String::from(
            "apiVersion: v1\nkind: Pod\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for w in names.windows(2) {
            let refs = vec![format!("*{}", w[0]); 9].join(",");
            s.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
        }
        let started = std::time::Instant::now();
        let err = parse(&p("lol.yaml"), &s, "n").unwrap_err();
        assert!(matches!(err, ManifestError::Syntax { .. }), "{err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn oversized_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        std::fs::write(&path, vec![b'#'; (MAX_MANIFEST_BYTES + 1) as usize]).unwrap();
        assert!(matches!(read(&path, "n"), Err(ManifestError::TooLarge { .. })));
    }
}
