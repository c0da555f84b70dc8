//! Volume validation (`spec.volumes`), as upstream's `ValidateVolumes`.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Volume;

use super::names;
use super::pod::invalid_each;
use super::{ErrorList, FieldError, Path};
use crate::quantity::Quantity;

/// Validates volumes; returns the names of those without errors (mounts may refer to them).
pub(super) fn validate_volumes(
    volumes: &[Volume],
    path: &Path,
    errs: &mut ErrorList,
) -> HashSet<String> {
    let mut ok = HashSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = path.index(i);
        let before = errs.0.len();
        let sources: Vec<&str> = [
            ("emptyDir", v.empty_dir.is_some()),
            ("hostPath", v.host_path.is_some()),
            ("secret", v.secret.is_some()),
            ("nfs", v.nfs.is_some()),
            ("persistentVolumeClaim", v.persistent_volume_claim.is_some()),
            ("downwardAPI", v.downward_api.is_some()),
            ("configMap", v.config_map.is_some()),
            ("projected", v.projected.is_some()),
            ("csi", v.csi.is_some()),
            ("ephemeral", v.ephemeral.is_some()),
            ("image", v.image.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        match sources.as_slice() {
            [] => errs.push(FieldError::required(&p, "must specify a volume type")),
            [_, rest @ ..] => {
                for extra in rest {
                    errs.push(FieldError::forbidden(
                        &p.child(extra),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
        if let Some(h) = &v.host_path {
            let hp = p.child("hostPath");
            if h.path.is_empty() {
                errs.push(FieldError::required(&hp.child("path"), ""));
            } else if h.path.split('/').any(|seg| seg == "..") {
                errs.push(FieldError::invalid(&hp.child("path"), &h.path, "must not contain '..'"));
            }
            const TYPES: [&str; 8] = [
                "",
                "BlockDevice",
                "CharDevice",
                "Directory",
                "DirectoryOrCreate",
                "File",
                "FileOrCreate",
                "Socket",
            ];
            if let Some(t) = h.type_.as_deref().filter(|t| !TYPES.contains(t)) {
                errs.push(FieldError::not_supported(&hp.child("type"), t, &TYPES));
            }
        }
        if let Some(q) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref())
            && Quantity::parse(&q.0).is_ok_and(Quantity::is_negative)
        {
            errs.push(FieldError::forbidden(
                &p.child("emptyDir").child("sizeLimit"),
                "SizeLimit field must be a valid resource quantity",
            ));
        }
        // Upstream evicts a pod whose disk-backed emptyDir outgrows `sizeLimit`; without that
        // eviction here, the field would be accepted and ignored, so only a tmpfs takes it.
        if let Some(e) = &v.empty_dir
            && e.size_limit.is_some()
            && e.medium.as_deref() != Some("Memory")
        {
            errs.push(FieldError::forbidden(
                &p.child("emptyDir").child("sizeLimit"),
                "not enforced for a disk-backed emptyDir yet (no local storage eviction); only `medium: Memory` takes it, as the tmpfs size",
            ));
        }
        if v.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            invalid_each(errs, &p.child("name"), &v.name, names::dns1123_label(&v.name));
        }
        if ok.contains(&v.name) {
            errs.push(FieldError::duplicate(&p.child("name"), &v.name));
        } else if errs.0.len() == before {
            ok.insert(v.name.clone());
        }
    }
    ok
}
