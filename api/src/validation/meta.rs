//! The `ObjectMeta` rules every kind shares beyond names and labels: owner references (at most
//! one controller), finalizer names (and never both `orphan` and `foregroundDeletion`), and no
//! new finalizers once an object is being deleted.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{ErrorList, FieldError, Path, names};

/// The finalizer the garbage collector honours by orphaning the dependents first.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer the garbage collector honours by deleting the blocking dependents first.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// `(group, version)` of an `apiVersion`; the version is empty when it cannot be parsed.
fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [v] => ("", v),
        [g, v] => (g, v),
        _ => ("", ""),
    }
}

/// Upstream's `ValidateOwnerReferences`: each reference's fields are reported at the list's
/// path (upstream does not index them).
pub fn validate_owner_references(refs: &[OwnerReference], path: &Path, errs: &mut ErrorList) {
    let mut first_controller: Option<String> = None;
    for r in refs {
        let (group, version) = group_version(&r.api_version);
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &path.child("apiVersion"),
                r.api_version.as_str(),
                "version must not be empty",
            ));
        }
        for (field, value) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
            if value.is_empty() {
                errs.push(FieldError::invalid(&path.child(field), value, "must not be empty"));
            }
        }
        if group.is_empty() && version == "v1" && r.kind == "Event" {
            let rendered = serde_json::to_value(r).unwrap_or_default();
            errs.push(FieldError::invalid(
                path,
                &rendered,
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.controller == Some(true) {
            let this = format!("{}/{}", r.kind, r.name);
            match &first_controller {
                Some(first) => {
                    let rendered = serde_json::to_value(refs).unwrap_or_default();
                    errs.push(FieldError::invalid(
                        path,
                        &rendered,
                        format!(
                            "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                        ),
                    ));
                }
                None => first_controller = Some(this),
            }
        }
    }
}

/// Upstream's `ValidateFinalizers`: qualified names, not both GC finalizers.
pub fn validate_finalizers(finalizers: &[String], path: &Path, errs: &mut ErrorList) {
    for f in finalizers {
        for m in names::qualified_name(f) {
            errs.push(FieldError::invalid(path, f, m));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has(ORPHAN_FINALIZER) && has(FOREGROUND_FINALIZER) {
        let rendered = serde_json::to_value(finalizers).unwrap_or_default();
        errs.push(FieldError::invalid(
            path,
            &rendered,
            format!("finalizer {ORPHAN_FINALIZER} and {FOREGROUND_FINALIZER} cannot be both set"),
        ));
    }
}

/// Upstream's `ValidateNoNewFinalizers`, applied once an object is being deleted.
pub fn validate_no_new_finalizers(
    new: &[String],
    old: &[String],
    path: &Path,
    errs: &mut ErrorList,
) {
    let mut extra: Vec<&String> = new.iter().filter(|f| !old.contains(f)).collect();
    extra.sort();
    extra.dedup();
    if !extra.is_empty() {
        let list: Vec<String> = extra.iter().map(|f| format!("{f:?}")).collect();
        errs.push(FieldError::forbidden(
            path,
            format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                list.join(", ")
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    #[test]
    fn one_controller_owner_and_every_field_set() {
        let path = Path::root("metadata").child("ownerReferences");
        let mut errs = ErrorList::default();
        validate_owner_references(
            &[owner("ReplicaSet", "a", true), owner("ReplicaSet", "b", false)],
            &path,
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs}");
        validate_owner_references(
            &[owner("ReplicaSet", "a", true), owner("DaemonSet", "b", true)],
            &path,
            &mut errs,
        );
        assert_eq!(errs.0.len(), 1);
        assert!(errs.0[0].to_string().ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/a and DaemonSet/b"
        ), "{}", errs.0[0]);
        let mut errs = ErrorList::default();
        let empty = OwnerReference { api_version: "a/b/c".into(), ..Default::default() };
        validate_owner_references(&[empty], &path, &mut errs);
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.ownerReferences.apiVersion",
                "metadata.ownerReferences.kind",
                "metadata.ownerReferences.name",
                "metadata.ownerReferences.uid"
            ]
        );
    }

    #[test]
    fn finalizers_are_qualified_and_gc_ones_exclusive() {
        let path = Path::root("metadata").child("finalizers");
        let mut errs = ErrorList::default();
        validate_finalizers(&["orphan".into(), "example.com/x".into()], &path, &mut errs);
        assert!(errs.is_empty());
        validate_finalizers(&["orphan".into(), "foregroundDeletion".into()], &path, &mut errs);
        assert_eq!(
            errs.0[0].to_string(),
            "metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"
        );
        let mut errs = ErrorList::default();
        validate_no_new_finalizers(
            &["a/b".into(), "c/d".into()],
            &["a/b".into()],
            &path,
            &mut errs,
        );
        assert_eq!(
            errs.0[0].to_string(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"c/d\"}"
        );
    }
}
