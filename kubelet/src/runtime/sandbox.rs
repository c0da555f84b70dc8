//! Pod sandbox configs for CRI, as upstream's `generatePodSandboxConfig`: metadata and attempt,
//! hostname, log directory, DNS, port mappings, labels and annotations, namespaces and cgroup
//! parent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use api::keys;
use k8s_openapi::api::core::v1::Pod;
use proto::cri;

/// `<podLogsDir>/<namespace>_<name>_<uid>`, the pod's log directory.
pub fn pod_log_dir(pod_logs_dir: &Path, pod: &Pod) -> PathBuf {
    let m = &pod.metadata;
    pod_logs_dir.join(pod_log_dir_name(
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default(),
    ))
}

/// The name of a pod's log directory under `podLogsDir`: `<namespace>_<name>_<uid>`.
pub fn pod_log_dir_name(namespace: &str, name: &str, uid: &str) -> String {
    format!("{namespace}_{name}_{uid}")
}

/// The pod's hostname: `spec.hostname`, else its name cut to 63 characters.
pub fn pod_hostname(pod: &Pod) -> String {
    if let Some(h) = pod.spec.as_ref().and_then(|s| s.hostname.clone()).filter(|h| !h.is_empty()) {
        return h;
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}

/// Parses resolv.conf content into a CRI DNS config.
pub fn parse_resolv_conf(text: &str) -> cri::DnsConfig {
    let mut dns = cri::DnsConfig::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => dns.servers.extend(words.next().map(str::to_string)),
            Some("search" | "domain") => dns.searches = words.map(str::to_string).collect(),
            Some("options") => dns.options.extend(words.map(str::to_string)),
            _ => {}
        }
    }
    dns
}

/// The DNS a pod gets. With no cluster DNS (standalone), `ClusterFirst` falls back to the
/// node's resolver as upstream does; `None` takes the pod's own `dnsConfig`.
pub fn dns_config(pod: &Pod, host_resolv_conf: &str) -> cri::DnsConfig {
    let spec = pod.spec.as_ref();
    let policy = spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("ClusterFirst");
    let pod_dns = spec.and_then(|s| s.dns_config.as_ref());
    let mut dns = if policy == "None" {
        cri::DnsConfig::default()
    } else {
        parse_resolv_conf(host_resolv_conf)
    };
    if let Some(d) = pod_dns {
        dns.servers.extend(d.nameservers.iter().flatten().cloned());
        dns.searches.extend(d.searches.iter().flatten().cloned());
        for o in d.options.iter().flatten() {
            let name = o.name.clone().unwrap_or_default();
            dns.options.push(match &o.value {
                Some(v) => format!("{name}:{v}"),
                None => name,
            });
        }
    }
    dns
}

/// The pod's namespaces, for its sandbox and (as upstream does) for each of its containers:
/// CRI's default for a container is the sandbox's PID namespace, not its own.
pub fn namespace_options(pod: &Pod) -> cri::NamespaceOption {
    let spec = pod.spec.as_ref();
    let flag = |f: Option<bool>| f.unwrap_or(false);
    let node = cri::NamespaceMode::Node as i32;
    cri::NamespaceOption {
        network: if flag(spec.and_then(|s| s.host_network)) {
            node
        } else {
            cri::NamespaceMode::Pod as i32
        },
        pid: if flag(spec.and_then(|s| s.host_pid)) {
            node
        } else if flag(spec.and_then(|s| s.share_process_namespace)) {
            cri::NamespaceMode::Pod as i32
        } else {
            cri::NamespaceMode::Container as i32
        },
        ipc: if flag(spec.and_then(|s| s.host_ipc)) {
            node
        } else {
            cri::NamespaceMode::Pod as i32
        },
        ..Default::default()
    }
}

/// The host ports the pod's containers ask for, as CRI port mappings.
pub fn port_mappings(pod: &Pod) -> Vec<cri::PortMapping> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| cri::PortMapping {
            protocol: match p.protocol.as_deref() {
                Some("UDP") => cri::Protocol::Udp as i32,
                Some("SCTP") => cri::Protocol::Sctp as i32,
                _ => cri::Protocol::Tcp as i32,
            },
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect()
}

/// Builds the sandbox config for `pod` at `attempt`.
pub fn sandbox_config(
    pod: &Pod,
    attempt: u32,
    log_dir: &Path,
    cgroup_parent: &str,
    host_resolv_conf: &str,
    security: cri::LinuxSandboxSecurityContext,
) -> cri::PodSandboxConfig {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let mut labels: HashMap<String, String> =
        m.labels.clone().unwrap_or_default().into_iter().collect();
    labels.insert(keys::POD_NAME.into(), m.name.clone().unwrap_or_default());
    labels.insert(keys::POD_NAMESPACE.into(), m.namespace.clone().unwrap_or_default());
    labels.insert(keys::POD_UID.into(), m.uid.clone().unwrap_or_default());
    let annotations = m.annotations.clone().unwrap_or_default().into_iter().collect();
    let port_mappings = port_mappings(pod);
    let pod_sc = spec.and_then(|s| s.security_context.as_ref());
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
            namespace: m.namespace.clone().unwrap_or_default(),
            attempt,
        }),
        hostname: if host_network { String::new() } else { pod_hostname(pod) },
        log_directory: log_dir.display().to_string(),
        dns_config: Some(dns_config(pod, host_resolv_conf)),
        port_mappings,
        labels,
        annotations,
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: cgroup_parent.to_string(),
            security_context: Some(security),
            sysctls: pod_sc
                .and_then(|s| s.sysctls.as_ref())
                .map(|s| s.iter().map(|kv| (kv.name.clone(), kv.value.clone())).collect())
                .unwrap_or_default(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_carries_names_labels_ports_and_namespaces() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "nginx-pod-node-1", "namespace": "default", "uid": "u1", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]}]},
        }))
        .unwrap();
        let cfg = sandbox_config(
            &pod,
            1,
            Path::new("/var/log/pods/default_nginx-pod-node-1_u1"),
            "/kubepods/besteffort/podu1",
            "nameserver 9.9.9.9\nsearch lan\n",
            crate::runtime::security_context::sandbox(&pod, Path::new("/seccomp")).unwrap(),
        );
        let meta = cfg.metadata.unwrap();
        assert_eq!(
            (meta.name.as_str(), meta.namespace.as_str(), meta.uid.as_str(), meta.attempt),
            ("nginx-pod-node-1", "default", "u1", 1)
        );
        assert_eq!(cfg.hostname, "nginx-pod-node-1");
        assert_eq!(cfg.labels["app"], "web");
        assert_eq!(cfg.labels[keys::POD_UID], "u1");
        assert_eq!(
            (cfg.port_mappings[0].container_port, cfg.port_mappings[0].host_port),
            (80, 8080)
        );
        assert_eq!(cfg.dns_config.unwrap().servers, ["9.9.9.9"]);
        let linux = cfg.linux.unwrap();
        assert_eq!(linux.cgroup_parent, "/kubepods/besteffort/podu1");
        let ns = linux.security_context.unwrap().namespace_options.unwrap();
        assert_eq!(
            (ns.network, ns.pid),
            (cri::NamespaceMode::Pod as i32, cri::NamespaceMode::Container as i32)
        );
    }

    #[test]
    fn hostnames_are_cut_to_a_dns_label() {
        let mut pod = Pod::default();
        pod.metadata.name = Some(format!("{}-x", "a".repeat(62)));
        assert_eq!(pod_hostname(&pod), "a".repeat(62));
    }
}
