use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};
use proto::cri::security_profile::ProfileType;
use serde_json::json;

use super::*;

fn pod(pod_sc: serde_json::Value, container_sc: serde_json::Value) -> (Pod, Container) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"securityContext": pod_sc, "containers": [{"name": "c", "image": "i", "securityContext": container_sc}]},
    }))
    .unwrap();
    let c = pod.spec.as_ref().unwrap().containers[0].clone();
    (pod, c)
}

const ROOT: &str = "/var/lib/kubelet/seccomp";

#[test]
fn the_pods_user_group_and_non_root_apply_to_containers_that_set_none() {
    let (p, c) =
        pod(json!({"runAsUser": 1000, "runAsGroup": 3000, "runAsNonRoot": true}), json!({}));
    let sc = container(&p, &c, Path::new(ROOT), false).unwrap();
    assert_eq!(sc.run_as_user.unwrap().value, 1000);
    assert_eq!(sc.run_as_group.unwrap().value, 3000);
    assert_eq!(effective(&p, &c).run_as_non_root, Some(true));
}

#[test]
fn the_containers_own_settings_win_over_the_pods() {
    let (p, c) = pod(
        json!({"runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"level": "s0:c1"}}),
        json!({"runAsUser": 2000, "seccompProfile": {"type": "Unconfined"}}),
    );
    let sc = container(&p, &c, Path::new(ROOT), false).unwrap();
    assert_eq!(sc.run_as_user.unwrap().value, 2000);
    assert_eq!(sc.seccomp.unwrap().profile_type, ProfileType::Unconfined as i32);
    assert_eq!(sc.selinux_options.unwrap().level, "s0:c1");
}

#[test]
fn supplemental_groups_carry_fs_group_first_without_duplicates() {
    let (p, c) = pod(json!({"fsGroup": 2000, "supplementalGroups": [5, 2000, 6]}), json!({}));
    assert_eq!(
        container(&p, &c, Path::new(ROOT), false).unwrap().supplemental_groups,
        [2000, 5, 6]
    );
    assert_eq!(sandbox(&p, Path::new(ROOT)).unwrap().supplemental_groups, [2000, 5, 6]);
}

#[test]
fn seccomp_defaults_as_upstream_and_localhost_profiles_live_under_the_root() {
    let (p, c) = pod(json!({}), json!({}));
    let sc = container(&p, &c, Path::new(ROOT), false).unwrap();
    assert_eq!(sc.seccomp.unwrap().profile_type, ProfileType::Unconfined as i32);
    let sb = sandbox(&p, Path::new(ROOT)).unwrap();
    assert_eq!(sb.seccomp.unwrap().profile_type, ProfileType::RuntimeDefault as i32);

    let (p, c) = pod(
        json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "audit.json"}}),
        json!({}),
    );
    let s = container(&p, &c, Path::new(ROOT), false).unwrap().seccomp.unwrap();
    assert_eq!(s.profile_type, ProfileType::Localhost as i32);
    assert_eq!(s.localhost_ref, "/var/lib/kubelet/seccomp/audit.json");

    let (p, c) = pod(json!({}), json!({"seccompProfile": {"type": "Localhost"}}));
    assert_eq!(
        container(&p, &c, Path::new(ROOT), false).unwrap_err(),
        SecurityContextError::LocalhostSeccompWithoutProfile { container: "c".into() }
    );
}

#[test]
fn unprivileged_containers_get_upstreams_masked_paths_and_privileged_ones_none() {
    let (p, c) = pod(json!({}), json!({}));
    let sc = container(&p, &c, Path::new(ROOT), false).unwrap();
    assert_eq!(sc.masked_paths, DEFAULT_MASKED_PATHS);
    assert_eq!(sc.readonly_paths, DEFAULT_READONLY_PATHS);
    let (p, c) = pod(json!({}), json!({"privileged": true}));
    let sc = container(&p, &c, Path::new(ROOT), false).unwrap();
    assert!(sc.privileged && sc.masked_paths.is_empty() && sc.readonly_paths.is_empty());
}

#[test]
fn an_apparmor_profile_needs_apparmor_on_the_host() {
    let (p, c) = pod(json!({"appArmorProfile": {"type": "RuntimeDefault"}}), json!({}));
    assert_eq!(
        container(&p, &c, Path::new(ROOT), false).unwrap_err(),
        SecurityContextError::AppArmorDisabled { container: "c".into() }
    );
    let a = container(&p, &c, Path::new(ROOT), true).unwrap().apparmor.unwrap();
    assert_eq!(a.profile_type, ProfileType::RuntimeDefault as i32);
    let (p, c) = pod(json!({}), json!({"appArmorProfile": {"type": "Unconfined"}}));
    let a = container(&p, &c, Path::new(ROOT), false).unwrap().apparmor.unwrap();
    assert_eq!(a.profile_type, ProfileType::Unconfined as i32);
    let (p, c) = pod(json!({}), json!({}));
    assert!(container(&p, &c, Path::new(ROOT), false).unwrap().apparmor.is_none());
}

#[test]
fn run_as_non_root_refuses_root_by_context_or_by_image() {
    let (p, c) = pod(json!({"runAsNonRoot": true}), json!({"runAsUser": 0}));
    let e = verify_run_as_non_root(&p, &c, Some(1000), "").unwrap_err();
    assert_eq!(
        e.to_string(),
        "container's runAsUser breaks non-root policy (pod: \"p_ns(u1)\", container: c)"
    );

    let (p, c) = pod(json!({"runAsNonRoot": true}), json!({}));
    assert!(verify_run_as_non_root(&p, &c, Some(1000), "").is_ok());
    let e = verify_run_as_non_root(&p, &c, Some(0), "").unwrap_err();
    assert_eq!(
        e.to_string(),
        "container has runAsNonRoot and image will run as root (pod: \"p_ns(u1)\", container: c)"
    );
    assert!(matches!(
        verify_run_as_non_root(&p, &c, None, "").unwrap_err(),
        SecurityContextError::ImageRunsAsRoot { .. }
    ));
    let e = verify_run_as_non_root(&p, &c, None, "nginx").unwrap_err();
    assert_eq!(
        e.to_string(),
        "container has runAsNonRoot and image has non-numeric user (nginx), cannot verify user is non-root (pod: \"p_ns(u1)\", container: c)"
    );

    let (p, c) = pod(json!({"runAsNonRoot": true, "runAsUser": 1000}), json!({}));
    assert!(
        verify_run_as_non_root(&p, &c, Some(0), "").is_ok(),
        "the context's uid wins over the image's"
    );
    let (p, c) = pod(json!({}), json!({}));
    assert!(verify_run_as_non_root(&p, &c, Some(0), "").is_ok(), "no policy, no check");
}
