//! Secrets as upstream's REST strategy, conversion and validation keep them:
//!
//! - `stringData` is write-only: a decoded Secret has it merged into `data` (its values win) and
//!   removed, as upstream's v1 → internal conversion does, so it is never stored or returned,
//!   whichever way it came (create, update, patch, a protobuf body, `kubectl apply`);
//! - `type` defaults to `Opaque`, each type's required keys are checked, and it never changes;
//! - data keys are config keys and the data holds at most 1 MiB;
//! - an `immutable: true` Secret keeps its data and stays immutable.
//!
//! The rules themselves are the `api` crate's (`api::secret`, `api::validation::config`), which
//! the kubelet's node-local Secrets share; the update rules are here.

use api::validation::config::secret_data;
use api::validation::{ErrorList, FieldError, Path, validate_immutable};
use k8s_openapi::api::core::v1::Secret;

pub(crate) use api::secret::{default_secret, merge_string_data};
pub(crate) use api::validation::config::validate_secret as validate;

use super::config_map::IMMUTABLE_MSG;

/// Upstream's `ValidateSecretUpdate`: the type never changes; an immutable Secret keeps its
/// data and stays immutable; then the Secret's own rules.
pub(crate) fn validate_update(new: &Secret, old: &Secret) -> ErrorList {
    let mut errs = ErrorList::default();
    validate_immutable(&new.type_, &old.type_, &Path::root("type"), &mut errs);
    if old.immutable == Some(true) {
        if new.immutable != Some(true) {
            errs.push(FieldError::forbidden(&Path::root("immutable"), IMMUTABLE_MSG));
        }
        // `stringData` was merged into `data` at decoding, so this covers it too.
        if secret_data(new) != secret_data(old) {
            errs.push(FieldError::forbidden(&Path::root("data"), IMMUTABLE_MSG));
        }
    }
    errs.extend(validate(new));
    errs
}

#[cfg(test)]
mod tests;
