//! Pod defaulting as upstream's `SetDefaults_Pod`, `SetDefaults_PodSpec`, `SetDefaults_Container`
//! and friends, so the kubelet's static pods and apiserver-lite's pods look alike.

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, Probe};

pub const DEFAULT_TERMINATION_GRACE_PERIOD: i64 = 30;
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";
pub const DEFAULT_TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// `Always` for `:latest` or untagged images, `IfNotPresent` otherwise (digests included).
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_probe(p: &mut Probe) {
    p.timeout_seconds.get_or_insert(1);
    p.period_seconds.get_or_insert(10);
    p.success_threshold.get_or_insert(1);
    p.failure_threshold.get_or_insert(3);
    if let Some(h) = p.http_get.as_mut() {
        h.path.get_or_insert_with(|| "/".into());
        h.scheme.get_or_insert_with(|| "HTTP".into());
    }
}

fn default_container(c: &mut Container, host_network: bool) {
    if c.image_pull_policy.is_none() {
        let image = c.image.as_deref().unwrap_or_default();
        c.image_pull_policy = Some(default_pull_policy(image).into());
    }
    c.termination_message_path.get_or_insert_with(|| DEFAULT_TERMINATION_MESSAGE_PATH.into());
    c.termination_message_policy.get_or_insert_with(|| "File".into());
    for p in c.ports.iter_mut().flatten() {
        p.protocol.get_or_insert_with(|| "TCP".into());
        if host_network && p.host_port.is_none_or(|h| h == 0) {
            p.host_port = Some(p.container_port);
        }
    }
    for env in c.env.iter_mut().flatten() {
        if let Some(f) = env.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            f.api_version.get_or_insert_with(|| "v1".into());
        }
    }
    for probe in [&mut c.liveness_probe, &mut c.readiness_probe, &mut c.startup_probe] {
        if let Some(p) = probe.as_mut() {
            default_probe(p);
        }
    }
    // Requests default to limits for every resource that has a limit and no request.
    if let Some(r) = c.resources.as_mut()
        && let Some(limits) = r.limits.clone()
    {
        let requests = r.requests.get_or_insert_with(Default::default);
        for (name, q) in limits {
            requests.entry(name).or_insert(q);
        }
    }
}

/// Fills in every default the API server would.
pub fn default_pod(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds.get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD);
    spec.scheduler_name.get_or_insert_with(|| DEFAULT_SCHEDULER.into());
    spec.security_context.get_or_insert_with(PodSecurityContext::default);
    spec.enable_service_links.get_or_insert(true);
    let host_network = spec.host_network.unwrap_or(false);
    for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
        default_container(c, host_network);
    }
    for v in spec.volumes.iter_mut().flatten() {
        if let Some(cm) = v.config_map.as_mut() {
            cm.default_mode.get_or_insert(0o644);
        }
        if let Some(s) = v.secret.as_mut() {
            s.default_mode.get_or_insert(0o644);
        }
        if let Some(d) = v.downward_api.as_mut() {
            d.default_mode.get_or_insert(0o644);
        }
        if let Some(p) = v.projected.as_mut() {
            p.default_mode.get_or_insert(0o644);
            for t in p.sources.iter_mut().flatten().filter_map(|s| s.service_account_token.as_mut())
            {
                t.expiration_seconds.get_or_insert(3600);
            }
        }
        if let Some(h) = v.host_path.as_mut() {
            h.type_.get_or_insert_with(String::new);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerPort, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(default_pull_policy("nginx"), "Always");
        assert_eq!(default_pull_policy("nginx:latest"), "Always");
        assert_eq!(default_pull_policy("nginx:1.8"), "IfNotPresent");
        assert_eq!(default_pull_policy("127.0.0.1:5000/busybox"), "Always");
        assert_eq!(default_pull_policy("127.0.0.1:5000/busybox:1.35"), "IfNotPresent");
        assert_eq!(default_pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn fills_spec_and_container_defaults() {
        let limits = [("cpu".to_string(), Quantity("1".into()))].into_iter().collect();
        let mut pod = Pod {
            spec: Some(PodSpec {
                host_network: Some(true),
                containers: vec![Container {
                    name: "web".into(),
                    image: Some("nginx:1.8".into()),
                    ports: Some(vec![ContainerPort { container_port: 80, ..Default::default() }]),
                    resources: Some(ResourceRequirements {
                        limits: Some(limits),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        default_pod(&mut pod);
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(c.termination_message_path.as_deref(), Some("/dev/termination-log"));
        let port = &c.ports.as_ref().unwrap()[0];
        assert_eq!((port.protocol.as_deref(), port.host_port), (Some("TCP"), Some(80)));
        assert_eq!(c.resources.as_ref().unwrap().requests.as_ref().unwrap()["cpu"].0, "1");
    }
}
