//! Validation with upstream's field paths, error types and messages, so the kubelet (for static
//! pods) and apiserver-lite (for 422 answers) reject the same things the real apiserver does.
//!
//! - [`names`]: DNS-1123 labels and subdomains, C identifiers, IANA service names, qualified
//!   names, label values.
//! - [`meta`]: owner references and finalizers.
//! - [`pod`]: `ValidatePodCreate`: metadata and pod-level spec; `ValidatePodTemplateSpec`.
//! - [`selector`]: label selectors: validation, matching, and their text form.
//! - [`config`]: ConfigMaps and Secrets (config keys, 1 MiB, Secret types).
//! - `container` and `volume`: the per-container and per-volume rules it calls.

pub mod config;
mod container;
pub mod meta;
pub mod names;
pub mod pod;
mod security_context;
pub mod selector;
mod volume;

use std::fmt;

pub use pod::validate_pod;

/// Upstream's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
}

impl ErrorKind {
    /// The text `field.ErrorType.String()` gives.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "Not found",
            ErrorKind::Required => "Required value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::Internal => "Internal error",
        }
    }

    /// The `StatusCause.reason` a 422 answer carries.
    pub fn cause_reason(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "FieldValueNotFound",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::Internal => "InternalError",
        }
    }
}

/// One field error: `spec.containers[0].image: Required value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: ErrorKind,
    /// The JSON path as upstream prints it: `spec.containers[0].ports[1].containerPort`.
    pub field: String,
    /// The offending value, already rendered (strings quoted), when the error shows one.
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    fn new(
        kind: ErrorKind,
        field: &Path,
        value: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self { kind, field: field.to_string(), value, detail: detail.into() }
    }

    pub fn required(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Required, field, None, detail)
    }

    pub fn invalid(field: &Path, value: impl Value, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, field, Some(value.render()), detail)
    }

    pub fn not_supported(field: &Path, value: impl Value, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self::new(
            ErrorKind::NotSupported,
            field,
            Some(value.render()),
            format!("supported values: {}", list.join(", ")),
        )
    }

    pub fn duplicate(field: &Path, value: impl Value) -> Self {
        Self::new(ErrorKind::Duplicate, field, Some(value.render()), "")
    }

    pub fn not_found(field: &Path, value: impl Value) -> Self {
        Self::new(ErrorKind::NotFound, field, Some(value.render()), "")
    }

    pub fn forbidden(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, field, None, detail)
    }

    /// An invalid field whose value is left out of the message (upstream's `OmitValueType`).
    pub fn invalid_omitted(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, field, None, detail)
    }

    pub fn too_many(field: &Path, actual: usize, max: usize) -> Self {
        Self::new(
            ErrorKind::TooMany,
            field,
            Some(actual.to_string()),
            format!("must have at most {max} items"),
        )
    }

    /// Upstream's `TooLong`: a value over `max` bytes (the value is never shown).
    pub fn too_long(field: &Path, max: usize) -> Self {
        Self::new(ErrorKind::TooLong, field, None, format!("must have at most {max} bytes"))
    }

    /// Upstream's `TooLongMaxLength`: a string over `max` characters.
    pub fn too_long_max_length(field: &Path, max: usize) -> Self {
        Self::new(ErrorKind::TooLong, field, None, format!("may not be longer than {max}"))
    }

    /// The message as a `StatusCause` carries it (without the field).
    pub fn message(&self) -> String {
        let mut m = self.kind.as_str().to_string();
        if let Some(v) = &self.value {
            m.push_str(": ");
            m.push_str(v);
        }
        if !self.detail.is_empty() {
            m.push_str(": ");
            m.push_str(&self.detail);
        }
        m
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

/// Values as upstream (1.34+) renders them in messages: JSON, so strings are quoted and numbers
/// bare.
pub trait Value {
    fn render(&self) -> String;
}

fn json_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

impl Value for &str {
    fn render(&self) -> String {
        json_quote(self)
    }
}

impl Value for &String {
    fn render(&self) -> String {
        json_quote(self)
    }
}

/// Structured values (maps, selectors, objects) render as compact JSON, as upstream marshals
/// them.
impl Value for &serde_json::Value {
    fn render(&self) -> String {
        self.to_string()
    }
}

macro_rules! bare_values {
    ($($t:ty),*) => { $( impl Value for $t { fn render(&self) -> String { self.to_string() } } )* };
}
bare_values!(i32, i64, u16, u32, usize, bool);

/// Upstream's `IsNegativeErrorMsg`.
pub const NEGATIVE_MSG: &str = "must be greater than or equal to 0";

/// Upstream's `FieldImmutableErrorMsg`.
pub const IMMUTABLE_MSG: &str = "field is immutable";

/// `ValidateNonnegativeField`.
pub fn validate_nonnegative(value: i64, path: &Path, errs: &mut ErrorList) {
    if value < 0 {
        errs.push(FieldError::invalid(path, value, NEGATIVE_MSG));
    }
}

/// `ValidateImmutableField`: the new value (as JSON) when it differs from the old one.
pub fn validate_immutable<T: PartialEq + serde::Serialize>(
    new: &T,
    old: &T,
    path: &Path,
    errs: &mut ErrorList,
) {
    if new != old {
        let rendered = serde_json::to_value(new).unwrap_or(serde_json::Value::Null);
        errs.push(FieldError::invalid(path, &rendered, IMMUTABLE_MSG));
    }
}

/// All the field errors of one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorList(pub Vec<FieldError>);

impl ErrorList {
    pub fn push(&mut self, e: FieldError) {
        self.0.push(e);
    }

    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_result(self) -> Result<(), ErrorList> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }

    /// The aggregate message: one error alone, several in brackets joined by `, `.
    pub fn summary(&self) -> String {
        match self.0.as_slice() {
            [one] => one.to_string(),
            many => {
                format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
            }
        }
    }

    /// `Pod "name" is invalid: …`, the message of a 422 answer.
    pub fn status_message(&self, kind: &str, name: &str) -> String {
        format!("{kind} {name:?} is invalid: {}", self.summary())
    }
}

impl fmt::Display for ErrorList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}

impl std::error::Error for ErrorList {}

/// A field path under construction: `Path::root("spec").child("containers").index(0)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    pub fn root(name: &str) -> Self {
        Path(name.to_string())
    }

    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() { Path(name.to_string()) } else { Path(format!("{}.{name}", self.0)) }
    }

    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    pub fn key(&self, k: &str) -> Self {
        Path(format!("{}[{k}]", self.0))
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
