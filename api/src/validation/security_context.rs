//! `securityContext` of a pod and of its containers: upstream's rules (ids in range, seccomp and
//! AppArmor profile types with `localhostProfile` only for `Localhost`, known `procMount`,
//! `fsGroupChangePolicy` and `supplementalGroupsPolicy` values), and what this kubelet cannot
//! enforce refused with a field path saying so: user namespaces (`hostUsers: false`, and the
//! `procMount: Unmasked` that needs them) and `supplementalGroupsPolicy: Strict` (the runtime
//! must report the image's groups, which containerd 1.6 does not).

use k8s_openapi::api::core::v1::{
    AppArmorProfile, PodSecurityContext, PodSpec, SeccompProfile, SecurityContext,
};

use super::{ErrorList, FieldError, Path};

const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";

fn id(value: Option<i64>, path: &Path, errs: &mut ErrorList) {
    if let Some(v) = value.filter(|v| !(0..=i64::from(i32::MAX)).contains(v)) {
        errs.push(FieldError::invalid(path, v, ID_RANGE));
    }
}

fn localhost_profile(
    kind: &str,
    type_: &str,
    profile: Option<&str>,
    path: &Path,
    errs: &mut ErrorList,
) {
    let p = path.child("localhostProfile");
    match (type_ == "Localhost", profile) {
        (true, None) => errs
            .push(FieldError::required(&p, format!("must be set when {kind} type is Localhost"))),
        (true, Some(name)) => {
            if name.is_empty() || name.starts_with('/') || name.split('/').any(|s| s == "..") {
                errs.push(FieldError::invalid(&p, name, "must be a relative path without '..'"));
            }
        }
        (false, Some(name)) => errs.push(FieldError::invalid(
            &p,
            name,
            format!("can only be set when {kind} type is Localhost"),
        )),
        (false, None) => {}
    }
}

fn seccomp(sp: Option<&SeccompProfile>, path: &Path, errs: &mut ErrorList) {
    let Some(sp) = sp else { return };
    let types = ["Localhost", "RuntimeDefault", "Unconfined"];
    if !types.contains(&sp.type_.as_str()) {
        errs.push(FieldError::not_supported(&path.child("type"), &sp.type_, &types));
    }
    localhost_profile("seccomp", &sp.type_, sp.localhost_profile.as_deref(), path, errs);
}

fn apparmor(ap: Option<&AppArmorProfile>, path: &Path, errs: &mut ErrorList) {
    let Some(ap) = ap else { return };
    let types = ["Localhost", "RuntimeDefault", "Unconfined"];
    if !types.contains(&ap.type_.as_str()) {
        errs.push(FieldError::not_supported(&path.child("type"), &ap.type_, &types));
    }
    localhost_profile("AppArmor", &ap.type_, ap.localhost_profile.as_deref(), path, errs);
}

/// The pod's `securityContext` and `hostUsers` (`spec`, at `path` = `spec`).
pub(super) fn validate_pod(spec: &PodSpec, path: &Path, errs: &mut ErrorList) {
    if spec.host_users == Some(false) {
        errs.push(FieldError::forbidden(
            &path.child("hostUsers"),
            "user namespaces (hostUsers: false) are not supported by this kubelet",
        ));
    }
    let Some(sc) = spec.security_context.as_ref() else { return };
    let path = path.child("securityContext");
    validate_pod_context(sc, &path, errs);
}

fn validate_pod_context(sc: &PodSecurityContext, path: &Path, errs: &mut ErrorList) {
    id(sc.run_as_user, &path.child("runAsUser"), errs);
    id(sc.run_as_group, &path.child("runAsGroup"), errs);
    id(sc.fs_group, &path.child("fsGroup"), errs);
    for (i, g) in sc.supplemental_groups.iter().flatten().enumerate() {
        id(Some(*g), &path.child("supplementalGroups").index(i), errs);
    }
    if let Some(p) = sc.fs_group_change_policy.as_deref() {
        let policies = ["OnRootMismatch", "Always"];
        if !policies.contains(&p) {
            errs.push(FieldError::not_supported(&path.child("fsGroupChangePolicy"), p, &policies));
        }
    }
    match sc.supplemental_groups_policy.as_deref() {
        None | Some("Merge") => {}
        Some("Strict") => errs.push(FieldError::forbidden(
            &path.child("supplementalGroupsPolicy"),
            "Strict is not supported by this kubelet: the container runtime does not report the image's groups",
        )),
        Some(other) => errs.push(FieldError::not_supported(
            &path.child("supplementalGroupsPolicy"),
            other,
            &["Merge", "Strict"],
        )),
    }
    seccomp(sc.seccomp_profile.as_ref(), &path.child("seccompProfile"), errs);
    apparmor(sc.app_armor_profile.as_ref(), &path.child("appArmorProfile"), errs);
}

/// A container's `securityContext` (at `path` = the container).
pub(super) fn validate_container(sc: Option<&SecurityContext>, path: &Path, errs: &mut ErrorList) {
    let Some(sc) = sc else { return };
    let path = path.child("securityContext");
    id(sc.run_as_user, &path.child("runAsUser"), errs);
    id(sc.run_as_group, &path.child("runAsGroup"), errs);
    match sc.proc_mount.as_deref() {
        None | Some("Default") => {}
        Some("Unmasked") => errs.push(FieldError::forbidden(
            &path.child("procMount"),
            "Unmasked needs a user namespace (hostUsers: false), which this kubelet does not support",
        )),
        Some(other) => errs.push(FieldError::not_supported(
            &path.child("procMount"),
            other,
            &["Default", "Unmasked"],
        )),
    }
    if sc.privileged == Some(true) && sc.allow_privilege_escalation == Some(false) {
        errs.push(FieldError::invalid_omitted(
            &path,
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        ));
    }
    seccomp(sc.seccomp_profile.as_ref(), &path.child("seccompProfile"), errs);
    apparmor(sc.app_armor_profile.as_ref(), &path.child("appArmorProfile"), errs);
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let mut pod = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"terminationGracePeriodSeconds": 1, "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                     "containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always", "terminationMessagePolicy": "File"}]},
        });
        for (k, v) in spec.as_object().unwrap() {
            if k == "container" {
                for (ck, cv) in v.as_object().unwrap() {
                    pod["spec"]["containers"][0][ck] = cv.clone();
                }
            } else {
                pod["spec"][k] = v.clone();
            }
        }
        let pod: Pod = serde_json::from_value(pod).unwrap();
        match crate::validation::pod::validate_pod(&pod) {
            Ok(()) => vec![],
            Err(list) => list.0.iter().map(|e| format!("{}: {}", e.field, e.message())).collect(),
        }
    }

    #[test]
    fn ids_must_be_in_range() {
        let e = errors(json!({"securityContext": {"runAsUser": -1, "fsGroup": 4294967296_i64}}));
        assert!(e.iter().any(|m| m.starts_with("spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647")), "{e:?}");
        assert!(
            e.iter().any(|m| m.starts_with("spec.securityContext.fsGroup: Invalid value")),
            "{e:?}"
        );
    }

    #[test]
    fn localhost_profiles_are_required_for_localhost_and_only_for_it() {
        let e = errors(json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}}));
        assert_eq!(
            e,
            [
                "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"
            ]
        );
        let e = errors(
            json!({"container": {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault", "localhostProfile": "x"}}}}),
        );
        assert_eq!(
            e,
            [
                "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value: \"x\": can only be set when AppArmor type is Localhost"
            ]
        );
        let e = errors(json!({"securityContext": {"seccompProfile": {"type": "Sometimes"}}}));
        assert!(
            e[0].starts_with(
                "spec.securityContext.seccompProfile.type: Unsupported value: \"Sometimes\""
            ),
            "{e:?}"
        );
        assert!(errors(json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}})).is_empty());
    }

    #[test]
    fn what_this_kubelet_cannot_enforce_is_refused_with_its_field() {
        let e = errors(json!({"hostUsers": false}));
        assert_eq!(
            e,
            [
                "spec.hostUsers: Forbidden: user namespaces (hostUsers: false) are not supported by this kubelet"
            ]
        );
        let e = errors(json!({"container": {"securityContext": {"procMount": "Unmasked"}}}));
        assert!(e[0].starts_with("spec.containers[0].securityContext.procMount: Forbidden: Unmasked needs a user namespace"), "{e:?}");
        let e = errors(json!({"securityContext": {"supplementalGroupsPolicy": "Strict"}}));
        assert!(
            e[0].starts_with(
                "spec.securityContext.supplementalGroupsPolicy: Forbidden: Strict is not supported"
            ),
            "{e:?}"
        );
        assert!(errors(json!({"hostUsers": true, "securityContext": {"supplementalGroupsPolicy": "Merge", "fsGroupChangePolicy": "OnRootMismatch"}})).is_empty());
    }
}
