//! Security contexts, as upstream's `securitycontext` package and kuberuntime's
//! `security_context.go`: a container's effective context is its own over the pod's
//! (`runAsUser`, `runAsGroup`, `runAsNonRoot`, `seLinuxOptions`, `seccompProfile`,
//! `appArmorProfile`), turned into CRI's with the pod's supplemental groups and `fsGroup`, the
//! seccomp and AppArmor profiles (`Localhost` ones under `<root-dir>/seccomp`), and upstream's
//! masked and read-only `/proc` paths; `runAsNonRoot` is checked against the image's user
//! before a container is created.

use std::path::Path;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodSecurityContext, SELinuxOptions, SecurityContext,
};
use proto::cri;

/// Paths upstream's kubelet masks in every unprivileged container (`procMount: Default`).
pub const DEFAULT_MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths upstream's kubelet makes read-only in every unprivileged container.
pub const DEFAULT_READONLY_PATHS: &[&str] =
    &["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

/// Why a container may not be created as its security context asks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityContextError {
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsUserRoot { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    ImageRunsAsRoot { pod: String, container: String },
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {container})"
    )]
    NonNumericUser { pod: String, container: String, user: String },
    #[error(
        "localhostProfile must be set if seccomp profile type is Localhost (container {container})"
    )]
    LocalhostSeccompWithoutProfile { container: String },
    #[error(
        "localhostProfile must be set if AppArmor profile type is Localhost (container {container})"
    )]
    LocalhostAppArmorWithoutProfile { container: String },
    #[error("Cannot enforce AppArmor: AppArmor is not enabled on the host (container {container})")]
    AppArmorDisabled { container: String },
}

/// Upstream's `DetermineEffectiveSecurityContext`: the container's context, with the pod's
/// settings where the container has none.
pub fn effective(pod: &Pod, c: &Container) -> SecurityContext {
    let mut sc = c.security_context.clone().unwrap_or_default();
    let Some(p) = pod_context(pod) else { return sc };
    sc.run_as_user = sc.run_as_user.or(p.run_as_user);
    sc.run_as_group = sc.run_as_group.or(p.run_as_group);
    sc.run_as_non_root = sc.run_as_non_root.or(p.run_as_non_root);
    sc.se_linux_options = sc.se_linux_options.or_else(|| p.se_linux_options.clone());
    sc.seccomp_profile = sc.seccomp_profile.or_else(|| p.seccomp_profile.clone());
    sc.app_armor_profile = sc.app_armor_profile.or_else(|| p.app_armor_profile.clone());
    sc
}

fn pod_context(pod: &Pod) -> Option<&PodSecurityContext> {
    pod.spec.as_ref()?.security_context.as_ref()
}

fn pod_label(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The pod's supplemental groups with its `fsGroup` (upstream adds both to every container).
pub fn supplemental_groups(pod: &Pod) -> Vec<i64> {
    let Some(p) = pod_context(pod) else { return Vec::new() };
    let mut groups: Vec<i64> = p.fs_group.into_iter().collect();
    for g in p.supplemental_groups.iter().flatten() {
        if !groups.contains(g) {
            groups.push(*g);
        }
    }
    groups
}

fn selinux(o: &SELinuxOptions) -> cri::SeLinuxOption {
    cri::SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    }
}

fn profile(
    profile_type: cri::security_profile::ProfileType,
    localhost_ref: String,
) -> cri::SecurityProfile {
    cri::SecurityProfile { profile_type: profile_type as i32, localhost_ref }
}

/// The seccomp profile: the effective one, or `fallback` (upstream: `Unconfined` for
/// containers unless `seccompDefault`; the sandbox gets the runtime's default).
fn seccomp(
    sc: Option<&k8s_openapi::api::core::v1::SeccompProfile>,
    root: &Path,
    fallback: cri::security_profile::ProfileType,
    container: &str,
) -> Result<cri::SecurityProfile, SecurityContextError> {
    use cri::security_profile::ProfileType;
    let Some(sc) = sc else { return Ok(profile(fallback, String::new())) };
    Ok(match sc.type_.as_str() {
        "RuntimeDefault" => profile(ProfileType::RuntimeDefault, String::new()),
        "Localhost" => {
            let name =
                sc.localhost_profile.as_deref().filter(|p| !p.is_empty()).ok_or_else(|| {
                    SecurityContextError::LocalhostSeccompWithoutProfile {
                        container: container.to_string(),
                    }
                })?;
            profile(ProfileType::Localhost, root.join(name).display().to_string())
        }
        // Validation admits only these three; Unconfined and anything else is unconfined.
        _ => profile(ProfileType::Unconfined, String::new()),
    })
}

/// Whether the host enforces AppArmor (`/sys/module/apparmor/parameters/enabled` is `Y`).
pub fn apparmor_enabled() -> bool {
    std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.trim() == "Y")
}

/// The AppArmor profile asked for, if any. Without AppArmor on the host, asking for a profile
/// other than `Unconfined` refuses the container (upstream refuses the pod at admission).
fn apparmor(
    sc: Option<&k8s_openapi::api::core::v1::AppArmorProfile>,
    host_enabled: bool,
    container: &str,
) -> Result<Option<cri::SecurityProfile>, SecurityContextError> {
    use cri::security_profile::ProfileType;
    let Some(sc) = sc else { return Ok(None) };
    let p = match sc.type_.as_str() {
        "Unconfined" => return Ok(Some(profile(ProfileType::Unconfined, String::new()))),
        "Localhost" => {
            let name =
                sc.localhost_profile.as_deref().filter(|p| !p.is_empty()).ok_or_else(|| {
                    SecurityContextError::LocalhostAppArmorWithoutProfile {
                        container: container.to_string(),
                    }
                })?;
            profile(ProfileType::Localhost, name.to_string())
        }
        _ => profile(ProfileType::RuntimeDefault, String::new()),
    };
    if !host_enabled {
        return Err(SecurityContextError::AppArmorDisabled { container: container.to_string() });
    }
    Ok(Some(p))
}

/// What CRI gets for one container: the effective context and the pod's groups.
pub fn container(
    pod: &Pod,
    c: &Container,
    seccomp_root: &Path,
    apparmor_host: bool,
) -> Result<cri::LinuxContainerSecurityContext, SecurityContextError> {
    use cri::security_profile::ProfileType;
    let sc = effective(pod, c);
    let caps = sc.capabilities.as_ref();
    let privileged = sc.privileged.unwrap_or(false);
    // Privileged containers see everything; `procMount: Unmasked` is refused by validation
    // (it needs a user namespace), so every other container gets upstream's lists.
    let paths = |list: &[&str]| {
        if privileged { Vec::new() } else { list.iter().map(|p| p.to_string()).collect() }
    };
    Ok(cri::LinuxContainerSecurityContext {
        capabilities: caps.map(|c| cri::Capability {
            add_capabilities: c.add.clone().unwrap_or_default(),
            drop_capabilities: c.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        }),
        privileged,
        namespace_options: Some(super::sandbox::namespace_options(pod)),
        selinux_options: sc.se_linux_options.as_ref().map(selinux),
        run_as_user: sc.run_as_user.map(|value| cri::Int64Value { value }),
        run_as_group: sc.run_as_group.map(|value| cri::Int64Value { value }),
        readonly_rootfs: sc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: supplemental_groups(pod),
        no_new_privs: sc.allow_privilege_escalation.is_some_and(|a| !a),
        masked_paths: paths(DEFAULT_MASKED_PATHS),
        readonly_paths: paths(DEFAULT_READONLY_PATHS),
        seccomp: Some(seccomp(
            sc.seccomp_profile.as_ref(),
            seccomp_root,
            ProfileType::Unconfined,
            &c.name,
        )?),
        apparmor: apparmor(sc.app_armor_profile.as_ref(), apparmor_host, &c.name)?,
        ..Default::default()
    })
}

/// Where `Localhost` seccomp profiles live: `<root-dir>/seccomp`, as upstream's.
pub fn seccomp_root(root_dir: &Path) -> std::path::PathBuf {
    root_dir.join("seccomp")
}

/// What CRI gets for the pod's sandbox: the pod's context, privileged when a container is.
pub fn sandbox(
    pod: &Pod,
    seccomp_root: &Path,
) -> Result<cri::LinuxSandboxSecurityContext, SecurityContextError> {
    use cri::security_profile::ProfileType;
    let p = pod_context(pod);
    let privileged = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
        .any(|c| c.security_context.as_ref().and_then(|s| s.privileged).unwrap_or(false));
    Ok(cri::LinuxSandboxSecurityContext {
        namespace_options: Some(super::sandbox::namespace_options(pod)),
        privileged,
        selinux_options: p.and_then(|p| p.se_linux_options.as_ref()).map(selinux),
        run_as_user: p.and_then(|s| s.run_as_user).map(|value| cri::Int64Value { value }),
        run_as_group: p.and_then(|s| s.run_as_group).map(|value| cri::Int64Value { value }),
        supplemental_groups: supplemental_groups(pod),
        seccomp: Some(seccomp(
            p.and_then(|p| p.seccomp_profile.as_ref()),
            seccomp_root,
            ProfileType::RuntimeDefault,
            "POD",
        )?),
        ..Default::default()
    })
}

/// Upstream's `verifyRunAsNonRoot`: with `runAsNonRoot: true`, the container must run as a
/// non-zero uid, from its context or else from the image's numeric user (`image_uid`, or
/// `image_user` when the image names a user).
pub fn verify_run_as_non_root(
    pod: &Pod,
    c: &Container,
    image_uid: Option<i64>,
    image_user: &str,
) -> Result<(), SecurityContextError> {
    let sc = effective(pod, c);
    if sc.run_as_non_root != Some(true) {
        return Ok(());
    }
    let ids = || (pod_label(pod), c.name.clone());
    if let Some(uid) = sc.run_as_user {
        if uid == 0 {
            let (pod, container) = ids();
            return Err(SecurityContextError::RunAsUserRoot { pod, container });
        }
        return Ok(());
    }
    match image_uid {
        Some(0) => {
            let (pod, container) = ids();
            Err(SecurityContextError::ImageRunsAsRoot { pod, container })
        }
        Some(_) => Ok(()),
        None if !image_user.is_empty() => {
            let (pod, container) = ids();
            Err(SecurityContextError::NonNumericUser { pod, container, user: image_user.into() })
        }
        // An image with no user runs as root.
        None => {
            let (pod, container) = ids();
            Err(SecurityContextError::ImageRunsAsRoot { pod, container })
        }
    }
}

#[cfg(test)]
mod tests;
