//! Container configs for CRI, generated from the pod spec as upstream's `generateContainerConfig`:
//! command and args with `$(VAR)` expansion against the environment ([`super::env`]), mounts,
//! log path, resources by QoS, security context, and the labels and annotations the kubelet
//! reads back.

use std::collections::HashMap;

use api::keys;
use api::qos::QosClass;
use api::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Pod};
use proto::cri;
use sha2::{Digest, Sha256};

use crate::cm::resources::{PodCgroupPolicy, milli_cpu_to_quota, milli_cpu_to_shares};

/// The hash recorded in `io.kubernetes.container.hash`: over the name and image, what
/// upstream's `HashContainer` covers since 1.31 (its value is not upstream's: theirs hashes a
/// Go object dump). Informational: whether a container is replaced is decided by comparing
/// its recorded image ([`super::actions`]), so a container made by another kubelet is judged
/// the same way.
pub fn container_hash(c: &Container) -> String {
    let mut h = Sha256::new();
    h.update(c.name.as_bytes());
    h.update([0]);
    h.update(c.image.as_deref().unwrap_or_default().as_bytes());
    h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Upstream's `$(VAR)` expansion: defined names are replaced, `$$` escapes, undefined
/// references stay as written.
pub fn expand(input: &str, vars: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match vars.get(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// What a container config needs beyond the pod spec.
#[derive(Debug)]
pub struct ContainerContext<'a> {
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub restart_count: u32,
    /// The image id the pull resolved to.
    pub image_ref: &'a str,
    /// The environment, resolved by [`super::env::environment`].
    pub envs: Vec<cri::KeyValue>,
    pub mounts: Vec<cri::Mount>,
    pub memory_capacity: u64,
    /// `cpuCFSQuota` and `cpuCFSQuotaPeriod`.
    pub cfs: PodCgroupPolicy,
    /// The effective security context, by [`super::security_context::container`].
    pub security_context: cri::LinuxContainerSecurityContext,
    /// The crash back-off this start counts under (a restart), recorded for a later kubelet.
    pub restart_backoff: Option<std::time::Duration>,
}

/// Upstream's OOM score for a container of a pod with this QoS.
pub fn oom_score_adj(qos: QosClass, memory_request: u64, memory_capacity: u64) -> i64 {
    match qos {
        QosClass::Guaranteed => -997,
        QosClass::BestEffort => 1000,
        QosClass::Burstable => {
            let capacity = memory_capacity.max(1);
            let adj = 1000 - (1000 * i128::from(memory_request) / i128::from(capacity)) as i64;
            adj.clamp(3, 999)
        }
    }
}

fn quantity(c: &Container, list: &str, name: &str) -> Option<Quantity> {
    let r = c.resources.as_ref()?;
    let l = if list == "limits" { r.limits.as_ref()? } else { r.requests.as_ref()? };
    Quantity::parse(&l.get(name)?.0).ok()
}

/// Linux resources: CPU shares from the request (the limit when only it is set), a CFS quota
/// from the limit over the node's period unless `cpuCFSQuota` is off, the memory limit, and
/// the OOM score for the pod's QoS class.
pub fn linux_resources(
    c: &Container,
    qos: QosClass,
    memory_capacity: u64,
    cfs: &PodCgroupPolicy,
) -> cri::LinuxContainerResources {
    let milli =
        |q: Option<Quantity>| q.map_or(0, |q| i64::try_from(q.milli_value()).unwrap_or(i64::MAX));
    let cpu_request = quantity(c, "requests", "cpu").or_else(|| quantity(c, "limits", "cpu"));
    let cpu_shares = i64::try_from(milli_cpu_to_shares(milli(cpu_request))).unwrap_or(i64::MAX);
    let cpu_limit = milli(quantity(c, "limits", "cpu"));
    let period = i64::try_from(cfs.cpu_period_us).unwrap_or(i64::MAX);
    let cpu_quota =
        if cfs.enforce_cpu_limits { milli_cpu_to_quota(cpu_limit, cfs.cpu_period_us) } else { 0 };
    let memory_limit =
        quantity(c, "limits", "memory").map_or(0, |q| i64::try_from(q.value()).unwrap_or(i64::MAX));
    let memory_request =
        quantity(c, "requests", "memory").map_or(0, |q| u64::try_from(q.value()).unwrap_or(0));
    cri::LinuxContainerResources {
        cpu_period: if cpu_quota > 0 { period } else { 0 },
        cpu_quota,
        cpu_shares,
        memory_limit_in_bytes: memory_limit,
        oom_score_adj: oom_score_adj(qos, memory_request, memory_capacity),
        ..Default::default()
    }
}

/// The CRI labels every kubelet container carries (what `crictl ps` and recovery read).
pub fn container_labels(pod: &Pod, name: &str) -> HashMap<String, String> {
    let m = &pod.metadata;
    HashMap::from([
        (keys::POD_NAME.to_string(), m.name.clone().unwrap_or_default()),
        (keys::POD_NAMESPACE.to_string(), m.namespace.clone().unwrap_or_default()),
        (keys::POD_UID.to_string(), m.uid.clone().unwrap_or_default()),
        (keys::CONTAINER_NAME.to_string(), name.to_string()),
    ])
}

/// Builds the CRI config for one container start.
pub fn container_config(ctx: ContainerContext<'_>) -> cri::ContainerConfig {
    let c = ctx.container;
    let spec = ctx.pod.spec.as_ref();
    let envs = ctx.envs;
    let vars: HashMap<String, String> =
        envs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
    let expand_all =
        |v: &Option<Vec<String>>| v.iter().flatten().map(|s| expand(s, &vars)).collect::<Vec<_>>();
    let qos = spec.map_or(QosClass::BestEffort, api::qos::pod_qos);
    let grace = spec
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(api::defaults::DEFAULT_TERMINATION_GRACE_PERIOD);
    let mut annotations = HashMap::from([
        (keys::CONTAINER_HASH.to_string(), container_hash(c)),
        (keys::CONTAINER_RESTART_COUNT.to_string(), ctx.restart_count.to_string()),
        (
            keys::CONTAINER_TERMINATION_MESSAGE_PATH.to_string(),
            c.termination_message_path.clone().unwrap_or_default(),
        ),
        (
            keys::CONTAINER_TERMINATION_MESSAGE_POLICY.to_string(),
            c.termination_message_policy.clone().unwrap_or_default(),
        ),
        (keys::POD_TERMINATION_GRACE_PERIOD.to_string(), grace.to_string()),
    ]);
    if let Some(d) = ctx.restart_backoff {
        let d = api::duration::GoDuration(d).to_string();
        annotations.insert(keys::CONTAINER_RESTART_BACKOFF.to_string(), d);
    }
    if let Some(ports) = c.ports.as_ref().filter(|p| !p.is_empty()) {
        annotations.insert(
            keys::CONTAINER_PORTS.to_string(),
            serde_json::to_string(ports).unwrap_or_default(),
        );
    }
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: c.name.clone(), attempt: ctx.restart_count }),
        image: Some(cri::ImageSpec {
            image: ctx.image_ref.to_string(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            ..Default::default()
        }),
        command: expand_all(&c.command),
        args: expand_all(&c.args),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs,
        mounts: ctx.mounts,
        log_path: format!("{}/{}.log", c.name, ctx.restart_count),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        labels: container_labels(ctx.pod, &c.name),
        annotations,
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(linux_resources(c, qos, ctx.memory_capacity, &ctx.cfs)),
            security_context: Some(ctx.security_context),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn expands_like_upstream() {
        let vars = HashMap::from([("A".to_string(), "1".to_string())]);
        assert_eq!(expand("x$(A)y", &vars), "x1y");
        assert_eq!(expand("$(B)", &vars), "$(B)");
        assert_eq!(expand("$$(A)", &vars), "$(A)");
        assert_eq!(expand("$A $(A", &vars), "$A $(A");
    }

    #[test]
    fn hash_changes_with_the_spec_only() {
        let a: Container =
            serde_json::from_value(serde_json::json!({"name": "c", "image": "x:1"})).unwrap();
        let mut b = a.clone();
        assert_eq!(container_hash(&a), container_hash(&b));
        b.image = Some("x:2".into());
        assert_ne!(container_hash(&a), container_hash(&b));
        assert_eq!(container_hash(&a).len(), 16);
    }

    #[test]
    fn resources_follow_requests_limits_and_qos() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c", "image": "x:1",
            "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        }))
        .unwrap();
        let r = linux_resources(&c, QosClass::Burstable, 1 << 30, &PodCgroupPolicy::default());
        assert_eq!((r.cpu_shares, r.cpu_quota, r.cpu_period), (256, 50_000, 100_000));
        assert_eq!(r.memory_limit_in_bytes, 128 << 20);
        assert_eq!(r.oom_score_adj, 938);
        assert_eq!(oom_score_adj(QosClass::Guaranteed, 0, 1), -997);
        assert_eq!(oom_score_adj(QosClass::BestEffort, 0, 1), 1000);
        let none: Container = serde_json::from_value(serde_json::json!({"name": "c"})).unwrap();
        let r = linux_resources(&none, QosClass::BestEffort, 1 << 30, &PodCgroupPolicy::default());
        assert_eq!((r.cpu_shares, r.cpu_quota, r.memory_limit_in_bytes), (2, 0, 0));
    }

    #[test]
    fn command_and_args_expand_against_the_environment() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-n", "namespace": "default", "uid": "u1"},
            "spec": {"nodeName": "n", "containers": [{
                "name": "c", "image": "x:1",
                "command": ["echo", "$(GREETING)"],
                "args": ["$(MISSING)", "$$(GREETING)"],
            }]},
        }))
        .unwrap();
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let ctx = ContainerContext {
            pod: &pod,
            container,
            restart_count: 2,
            image_ref: "sha256:abc",
            envs: vec![cri::KeyValue { key: "GREETING".into(), value: "hi".into() }],
            mounts: vec![],
            memory_capacity: 1 << 30,
            cfs: PodCgroupPolicy::default(),
            security_context: crate::runtime::security_context::container(
                &pod,
                container,
                Path::new("/var/lib/kubelet/seccomp"),
                false,
            )
            .unwrap(),
            restart_backoff: Some(std::time::Duration::from_secs(20)),
        };
        let cfg = container_config(ctx);
        assert_eq!(cfg.envs.len(), 1);
        assert_eq!(cfg.command, ["echo", "hi"]);
        assert_eq!(cfg.args, ["$(MISSING)", "$(GREETING)"]);
        assert_eq!(cfg.log_path, "c/2.log");
        assert_eq!(cfg.metadata.unwrap().attempt, 2);
        assert_eq!(cfg.annotations[keys::CONTAINER_RESTART_COUNT], "2");
        assert_eq!(cfg.annotations[keys::CONTAINER_RESTART_BACKOFF], "20s");
        assert_eq!(cfg.labels[keys::POD_UID], "u1");
        let ns = cfg.linux.unwrap().security_context.unwrap().namespace_options.unwrap();
        assert_eq!(
            ns.pid,
            cri::NamespaceMode::Container as i32,
            "each container has its own PID namespace"
        );
    }
}
