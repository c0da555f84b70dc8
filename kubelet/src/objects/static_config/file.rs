//! Reading one file of the static config directory: size-limited, YAML (one or more `---`
//! documents) or JSON (one object), each document a `v1` `ConfigMap` or `Secret`, decoded with
//! field paths, defaulted and validated as the apiserver does (`stringData` merged into `data`,
//! `type` defaulted, config keys, 1 MiB, the type's required keys), in namespace `default`
//! unless it names one. A file holding a Secret must be readable and writable by its owner
//! only, and owned by root or the kubelet's user. A file is used whole or not at all.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use api::validation::{ErrorList, FieldError, Path as FieldPath};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use crate::objects::{Object, ObjectKey, ObjectKind};

/// The largest file read: the API server's request limit (a 1 MiB Secret is larger in base64).
pub const MAX_FILE_BYTES: u64 = 3 * 1024 * 1024;

/// Upstream's message for data changed under `immutable: true`.
const IMMUTABLE_MSG: &str = "field is immutable when `immutable` is set";

/// Why a static config file is refused. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{file}: {size} bytes is larger than the {limit}-byte limit for a static config file")]
    TooLarge { file: PathBuf, size: u64, limit: u64 },
    #[error("{file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{file}: not valid UTF-8")]
    NotUtf8 { file: PathBuf },
    #[error("{file}: {message}")]
    Syntax { file: PathBuf, message: String },
    #[error("{file}: the file holds no object")]
    Empty { file: PathBuf },
    #[error(
        "{file}: document {index}: expected apiVersion v1 and kind ConfigMap or Secret, found {api_version:?} {kind:?}"
    )]
    WrongKind { file: PathBuf, index: usize, api_version: String, kind: String },
    #[error("{file}: document {index}: {field}: {message}")]
    Decode { file: PathBuf, index: usize, field: String, message: String },
    #[error("{file}: document {index}: metadata.name: Required value: name is needed")]
    NoName { file: PathBuf, index: usize },
    #[error("{file}: {object} is invalid: {errors}")]
    Invalid { file: PathBuf, object: ObjectKey, errors: ErrorList },
    #[error("{file}: defines {object} twice (documents {first} and {second})")]
    Repeated { file: PathBuf, object: ObjectKey, first: usize, second: usize },
    #[error(
        "{file}: holds {object} but its mode is {mode:04o}: a file holding a Secret must not be readable or writable by group or others (chmod 0600 {file})"
    )]
    SecretMode { file: PathBuf, object: ObjectKey, mode: u32 },
    #[error(
        "{file}: holds {object} but is owned by uid {uid}: a file holding a Secret must be owned by root or the kubelet's user (uid {kubelet})"
    )]
    SecretOwner { file: PathBuf, object: ObjectKey, uid: u32, kubelet: u32 },
}

/// A refused file, with the objects it was seen to declare before the refusal (so a pod that
/// references one is told why it is not there).
#[derive(Debug)]
pub struct Refused {
    pub error: Box<FileError>,
    pub declared: Vec<ObjectKey>,
}

impl Refused {
    fn new(error: FileError, declared: Vec<ObjectKey>) -> Self {
        Self { error: Box::new(error), declared }
    }
}

impl From<FileError> for Refused {
    fn from(error: FileError) -> Self {
        Self::new(error, Vec::new())
    }
}

/// What a good file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct FileObjects {
    pub objects: Vec<(ObjectKey, Object)>,
    /// Fields the documents have that their kind does not (`document 2: data.x.y`).
    pub unknown_fields: Vec<String>,
}

/// Who may own a Secret file besides root: the kubelet's effective uid.
#[derive(Debug, Clone, Copy)]
pub struct Owners {
    pub kubelet_uid: u32,
}

/// Reads the file at `file` (whose metadata `meta` was taken when it was found). `previous`
/// gives the objects as last served, for `immutable` ones.
pub fn read(
    file: &Path,
    meta: &std::fs::Metadata,
    owners: Owners,
    previous: &dyn Fn(&ObjectKey) -> Option<Object>,
) -> Result<FileObjects, Refused> {
    let f = || file.to_path_buf();
    let too_large = |size| FileError::TooLarge { file: f(), size, limit: MAX_FILE_BYTES };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()).into());
    }
    let bytes = std::fs::read(file).map_err(|source| FileError::Read { file: f(), source })?;
    // The file may have grown between the two calls.
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64).into());
    }
    let text = String::from_utf8(bytes).map_err(|_| FileError::NotUtf8 { file: f() })?;
    let parsed = parse(file, &text, previous)?;
    let declared = || -> Vec<ObjectKey> { parsed.objects.iter().map(|(k, _)| k.clone()).collect() };
    if let Some((key, _)) = parsed.objects.iter().find(|(k, _)| k.kind == ObjectKind::Secret) {
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            let error = FileError::SecretMode { file: f(), object: key.clone(), mode };
            return Err(Refused::new(error, declared()));
        }
        if meta.uid() != 0 && meta.uid() != owners.kubelet_uid {
            let (uid, kubelet) = (meta.uid(), owners.kubelet_uid);
            let error = FileError::SecretOwner { file: f(), object: key.clone(), uid, kubelet };
            return Err(Refused::new(error, declared()));
        }
    }
    Ok(parsed)
}

/// The file's documents as JSON values (the file name only chooses JSON or YAML; a byte-order
/// mark is dropped and a repeated key refused, as in manifests).
fn documents(file: &Path, text: &str) -> Result<Vec<serde_json::Value>, FileError> {
    let syntax = |message: String| FileError::Syntax { file: file.to_path_buf(), message };
    if file.extension().is_some_and(|e| e == "json") {
        return Ok(vec![crate::config::syntax::json(text).map_err(syntax)?]);
    }
    // Document by document: the first error ends the read. serde_yaml_ng bounds alias
    // expansion and nesting, so a billion-laughs file fails fast. Empty documents (a stray
    // `---`) are skipped.
    let mut out = Vec::new();
    for document in crate::config::syntax::yaml_documents(text) {
        let value = document.map_err(syntax)?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// Parses a file's text into its objects.
pub fn parse(
    file: &Path,
    text: &str,
    previous: &dyn Fn(&ObjectKey) -> Option<Object>,
) -> Result<FileObjects, Refused> {
    let values = documents(file, text)?;
    if values.is_empty() {
        return Err(FileError::Empty { file: file.to_path_buf() }.into());
    }
    let mut out = FileObjects { objects: Vec::new(), unknown_fields: Vec::new() };
    let mut seen: Vec<(ObjectKey, usize)> = Vec::new();
    for (i, value) in values.into_iter().enumerate() {
        let index = i + 1;
        let (key, object, unknown) = decode_object(file, index, value)?;
        if let Err(errors) = check_immutable(&object, previous(&key).as_ref()) {
            let error =
                FileError::Invalid { file: file.to_path_buf(), object: key.clone(), errors };
            return Err(Refused::new(error, vec![key]));
        }
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            let (object, first, second) = (key.clone(), *first, index);
            let error = FileError::Repeated { file: file.to_path_buf(), object, first, second };
            return Err(Refused::new(error, vec![key]));
        }
        seen.push((key.clone(), index));
        out.unknown_fields.extend(unknown.into_iter().map(|f| format!("document {index}: {f}")));
        out.objects.push((key, object));
    }
    Ok(out)
}

/// One document: kind, decoding, defaults, validation.
fn decode_object(
    file: &Path,
    index: usize,
    value: serde_json::Value,
) -> Result<(ObjectKey, Object, Vec<String>), Refused> {
    let text = |k: &str| value.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let kind = match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => ObjectKind::ConfigMap,
        ("v1", "Secret") => ObjectKind::Secret,
        _ => {
            return Err(FileError::WrongKind {
                file: file.to_path_buf(),
                index,
                api_version,
                kind,
            }
            .into());
        }
    };
    let decode_error = |e: api::decode::DecodeError| FileError::Decode {
        file: file.to_path_buf(),
        index,
        field: e.path,
        message: e.message,
    };
    let (mut meta, object, unknown) = match kind {
        ObjectKind::ConfigMap => {
            let d = api::decode::decode::<ConfigMap>(value).map_err(decode_error)?;
            (d.value.metadata.clone(), Object::ConfigMap(Arc::new(d.value)), d.unknown_fields)
        }
        ObjectKind::Secret => {
            let d = api::decode::decode::<Secret>(value).map_err(decode_error)?;
            let mut secret = d.value;
            api::secret::merge_string_data(&mut secret);
            api::secret::default_secret(&mut secret);
            (secret.metadata.clone(), Object::Secret(Arc::new(secret)), d.unknown_fields)
        }
    };
    let name = meta.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(FileError::NoName { file: file.to_path_buf(), index }.into());
    }
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = Some("default".into());
    }
    let namespace = meta.namespace.clone().unwrap_or_default();
    let key = ObjectKey::new(kind, &namespace, &name);
    let mut errors =
        api::validation::pod::validate_object_meta(&meta, &FieldPath::root("metadata"));
    let object = match object {
        Object::ConfigMap(cm) => {
            errors.extend(api::validation::config::validate_config_map(&cm));
            let mut cm = Arc::unwrap_or_clone(cm);
            cm.metadata = meta;
            Object::ConfigMap(Arc::new(cm))
        }
        Object::Secret(s) => {
            errors.extend(api::validation::config::validate_secret(&s));
            let mut s = Arc::unwrap_or_clone(s);
            s.metadata = meta;
            Object::Secret(Arc::new(s))
        }
    };
    if !errors.is_empty() {
        let error = FileError::Invalid { file: file.to_path_buf(), object: key.clone(), errors };
        return Err(Refused::new(error, vec![key]));
    }
    Ok((key, object, unknown))
}

/// An `immutable: true` object served before keeps its data and stays immutable, as the
/// apiserver's update validation has it.
fn check_immutable(new: &Object, old: Option<&Object>) -> Result<(), ErrorList> {
    let Some(old) = old.filter(|o| o.immutable()) else { return Ok(()) };
    let mut errs = ErrorList::default();
    if !new.immutable() {
        errs.push(FieldError::forbidden(&FieldPath::root("immutable"), IMMUTABLE_MSG));
    }
    let same_data = match (new, old) {
        (Object::ConfigMap(n), Object::ConfigMap(o)) => {
            n.data == o.data && n.binary_data == o.binary_data
        }
        (Object::Secret(n), Object::Secret(o)) => n.data == o.data,
        _ => true,
    };
    if !same_data {
        errs.push(FieldError::forbidden(&FieldPath::root("data"), IMMUTABLE_MSG));
    }
    errs.into_result()
}
