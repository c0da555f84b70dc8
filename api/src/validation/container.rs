//! Container validation (`spec.containers`, `spec.initContainers`): names, images, ports, env,
//! volume mounts, probes and resources, as upstream's `validateContainers` and friends.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Probe, ResourceRequirements};

use super::names;
use super::pod::invalid_each;
use super::{ErrorList, FieldError, Path};
use crate::quantity::Quantity;

pub(super) fn validate_containers(
    containers: &[Container],
    volumes: &HashSet<String>,
    grace: Option<i64>,
    path: &Path,
    errs: &mut ErrorList,
) {
    if containers.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let mut seen = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, volumes, &p, errs);
        validate_lifecycle(c, grace, &p, errs);
        if !seen.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), &c.name));
        }
        for (field, probe) in [
            ("livenessProbe", &c.liveness_probe),
            ("readinessProbe", &c.readiness_probe),
            ("startupProbe", &c.startup_probe),
        ] {
            if let Some(probe) = probe {
                validate_probe(probe, field != "readinessProbe", &p.child(field), errs);
            }
        }
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                &p.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    let mut host_ports = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        for (j, port) in c.ports.iter().flatten().enumerate() {
            let host = port.host_port.unwrap_or(0);
            if host == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host}",
                port.protocol.as_deref().unwrap_or("TCP"),
                port.host_ip.as_deref().unwrap_or_default()
            );
            if !host_ports.insert(key.clone()) {
                errs.push(FieldError::duplicate(
                    &path.index(i).child("ports").index(j).child("hostPort"),
                    &key,
                ));
            }
        }
    }
}

pub(super) fn validate_init_containers(
    init: &[Container],
    containers: &[Container],
    volumes: &HashSet<String>,
    grace: Option<i64>,
    path: &Path,
    errs: &mut ErrorList,
) {
    let mut seen: HashSet<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in init.iter().enumerate() {
        let p = path.index(i);
        validate_container_common(c, volumes, &p, errs);
        let sidecar = match c.restart_policy.as_deref() {
            None => false,
            Some("Always") => true,
            Some(other) => {
                errs.push(FieldError::not_supported(&p.child("restartPolicy"), other, &["Always"]));
                false
            }
        };
        if seen.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(&p.child("name"), &c.name));
        } else if !c.name.is_empty() {
            seen.insert(c.name.as_str());
        }
        let handlers = [
            ("lifecycle", c.lifecycle.is_some()),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ];
        for (field, set) in handlers {
            if set && !sidecar {
                errs.push(FieldError::forbidden(
                    &p.child(field),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            }
        }
        if sidecar {
            for (field, probe) in [
                ("livenessProbe", &c.liveness_probe),
                ("readinessProbe", &c.readiness_probe),
                ("startupProbe", &c.startup_probe),
            ] {
                if let Some(probe) = probe {
                    validate_probe(probe, field != "readinessProbe", &p.child(field), errs);
                }
            }
            validate_lifecycle(c, grace, &p, errs);
        }
    }
}

/// `lifecycle.postStart` and `preStop`: one handler each, of the kinds the kubelet runs
/// (`exec`, `httpGet`, `sleep`). Upstream also accepts `tcpSocket` there and then fails the
/// hook at run time; we refuse it up front.
fn validate_lifecycle(c: &Container, grace: Option<i64>, path: &Path, errs: &mut ErrorList) {
    let Some(lifecycle) = &c.lifecycle else { return };
    let path = path.child("lifecycle");
    for (field, handler) in [("postStart", &lifecycle.post_start), ("preStop", &lifecycle.pre_stop)]
    {
        let Some(h) = handler else { continue };
        let p = path.child(field);
        let set: Vec<&str> = [
            ("exec", h.exec.is_some()),
            ("httpGet", h.http_get.is_some()),
            ("tcpSocket", h.tcp_socket.is_some()),
            ("sleep", h.sleep.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, s)| s.then_some(n))
        .collect();
        match set.as_slice() {
            [] => errs.push(FieldError::required(&p, "must specify a handler type")),
            [_, rest @ ..] => {
                for extra in rest {
                    errs.push(FieldError::forbidden(
                        &p.child(extra),
                        "may not specify more than 1 handler type",
                    ));
                }
            }
        }
        if h.tcp_socket.is_some() {
            errs.push(FieldError::forbidden(
                &p.child("tcpSocket"),
                "tcpSocket is not supported as a lifecycle handler: use exec, httpGet or sleep",
            ));
        }
        if let Some(e) = &h.exec
            && e.command.as_ref().is_none_or(|c| c.is_empty())
        {
            errs.push(FieldError::required(&p.child("exec").child("command"), ""));
        }
        if let Some(scheme) = h.http_get.as_ref().and_then(|g| g.scheme.as_deref())
            && !["HTTP", "HTTPS"].contains(&scheme)
        {
            errs.push(FieldError::not_supported(
                &p.child("httpGet").child("scheme"),
                scheme,
                &["HTTP", "HTTPS"],
            ));
        }
        if let Some(sleep) = &h.sleep {
            let max = grace.unwrap_or(crate::defaults::DEFAULT_TERMINATION_GRACE_PERIOD);
            if sleep.seconds < 0 || sleep.seconds > max {
                errs.push(FieldError::invalid(
                    &p.child("sleep").child("seconds"),
                    sleep.seconds,
                    format!(
                        "must be non-negative and less than terminationGracePeriodSeconds ({max})"
                    ),
                ));
            }
        }
    }
}

fn validate_probe(probe: &Probe, success_must_be_one: bool, path: &Path, errs: &mut ErrorList) {
    let handlers: Vec<&str> = [
        ("exec", probe.exec.is_some()),
        ("httpGet", probe.http_get.is_some()),
        ("tcpSocket", probe.tcp_socket.is_some()),
        ("grpc", probe.grpc.is_some()),
    ]
    .into_iter()
    .filter_map(|(n, set)| set.then_some(n))
    .collect();
    match handlers.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a handler type")),
        [_, rest @ ..] => {
            for extra in rest {
                errs.push(FieldError::forbidden(
                    &path.child(extra),
                    "may not specify more than 1 handler type",
                ));
            }
        }
    }
    for (field, v) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                &path.child(field),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    if success_must_be_one && let Some(v) = probe.success_threshold.filter(|v| *v != 1) {
        errs.push(FieldError::invalid(&path.child("successThreshold"), v, "must be 1"));
    }
    if let Some(e) = &probe.exec
        && e.command.as_ref().is_none_or(|c| c.is_empty())
    {
        errs.push(FieldError::required(&path.child("exec").child("command"), ""));
    }
    if let Some(scheme) = probe.http_get.as_ref().and_then(|h| h.scheme.as_deref())
        && !["HTTP", "HTTPS"].contains(&scheme)
    {
        errs.push(FieldError::not_supported(
            &path.child("httpGet").child("scheme"),
            scheme,
            &["HTTP", "HTTPS"],
        ));
    }
}

fn validate_container_common(
    c: &Container,
    volumes: &HashSet<String>,
    path: &Path,
    errs: &mut ErrorList,
) {
    if c.name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    } else {
        invalid_each(errs, &path.child("name"), &c.name, names::dns1123_label(&c.name));
    }
    if c.image.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(&path.child("image"), ""));
    }
    match c.termination_message_policy.as_deref() {
        None | Some("") => {
            errs.push(FieldError::required(&path.child("terminationMessagePolicy"), ""))
        }
        Some("File" | "FallbackToLogsOnError") => {}
        Some(other) => errs.push(FieldError::not_supported(
            &path.child("terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    validate_ports(c.ports.as_deref().unwrap_or_default(), &path.child("ports"), errs);
    validate_env(c.env.as_deref().unwrap_or_default(), &path.child("env"), errs);
    let mut mount_paths = HashSet::new();
    for (k, m) in c.volume_mounts.iter().flatten().enumerate() {
        let p = path.child("volumeMounts").index(k);
        if m.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        }
        if !volumes.contains(&m.name) {
            errs.push(FieldError::not_found(&p.child("name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(&p.child("mountPath"), ""));
        }
        if !mount_paths.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(&p.child("mountPath"), &m.mount_path, "must be unique"));
        }
        let subs =
            [("subPath", m.sub_path.as_deref()), ("subPathExpr", m.sub_path_expr.as_deref())];
        for (field, sub) in subs {
            let Some(sub) = sub.filter(|s| !s.is_empty()) else { continue };
            let sp = path.child("volumeMounts").child(field);
            if sub.starts_with('/') {
                errs.push(FieldError::invalid(&sp, sub, "must be a relative path"));
            }
            if sub.split('/').any(|s| s == "..") {
                errs.push(FieldError::invalid(&sp, sub, "must not contain '..'"));
            }
        }
        if m.sub_path.as_deref().is_some_and(|s| !s.is_empty())
            && let Some(expr) = m.sub_path_expr.as_deref().filter(|s| !s.is_empty())
        {
            errs.push(FieldError::invalid(
                &p.child("subPathExpr"),
                expr,
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        match m.recursive_read_only.as_deref() {
            None | Some("Disabled") => {}
            Some(mode @ ("IfPossible" | "Enabled")) => {
                if !m.read_only.unwrap_or(false) {
                    errs.push(FieldError::forbidden(
                        &p.child("recursiveReadOnly"),
                        format!("may only be specified when readOnly is true (got {mode})"),
                    ));
                }
            }
            Some(other) => errs.push(FieldError::not_supported(
                &p.child("recursiveReadOnly"),
                other,
                &["Disabled", "IfPossible", "Enabled"],
            )),
        }
    }
    match c.image_pull_policy.as_deref() {
        None | Some("") => errs.push(FieldError::required(&path.child("imagePullPolicy"), "")),
        Some("Always" | "IfNotPresent" | "Never") => {}
        Some(other) => errs.push(FieldError::not_supported(
            &path.child("imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    if let Some(r) = &c.resources {
        validate_resources(r, &path.child("resources"), errs);
    }
    super::security_context::validate_container(c.security_context.as_ref(), path, errs);
}

fn validate_ports(ports: &[ContainerPort], path: &Path, errs: &mut ErrorList) {
    let mut names_seen = HashSet::new();
    for (j, port) in ports.iter().enumerate() {
        let p = path.index(j);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = names::port_name(name);
            if !msgs.is_empty() {
                invalid_each(errs, &p.child("name"), name, msgs);
            } else if !names_seen.insert(name) {
                errs.push(FieldError::duplicate(&p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(&p.child("containerPort"), ""));
        } else {
            for m in names::port_num(port.container_port) {
                errs.push(FieldError::invalid(&p.child("containerPort"), port.container_port, m));
            }
        }
        if let Some(h) = port.host_port.filter(|h| *h != 0) {
            for m in names::port_num(h) {
                errs.push(FieldError::invalid(&p.child("hostPort"), h, m));
            }
        }
        match port.protocol.as_deref() {
            None | Some("") => errs.push(FieldError::required(&p.child("protocol"), "")),
            Some("TCP" | "UDP" | "SCTP") => {}
            Some(other) => errs.push(FieldError::not_supported(
                &p.child("protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

const FIELD_REF_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

fn validate_env(env: &[EnvVar], path: &Path, errs: &mut ErrorList) {
    for (j, e) in env.iter().enumerate() {
        let p = path.index(j);
        if e.name.is_empty() {
            errs.push(FieldError::required(&p.child("name"), ""));
        } else {
            invalid_each(errs, &p.child("name"), &e.name, names::env_var_name(&e.name));
        }
        let Some(from) = &e.value_from else { continue };
        let vp = p.child("valueFrom");
        let count = [
            from.field_ref.is_some(),
            from.resource_field_ref.is_some(),
            from.config_map_key_ref.is_some(),
            from.secret_key_ref.is_some(),
        ]
        .into_iter()
        .filter(|s| *s)
        .count();
        if count == 0 {
            let msg = "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`";
            errs.push(FieldError::invalid(&vp, "", msg));
        } else if e.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::invalid(
                &vp,
                "",
                "may not be specified when `value` is not empty",
            ));
        } else if count > 1 {
            errs.push(FieldError::invalid(
                &vp,
                "",
                "may not have more than one field specified at a time",
            ));
        }
        if let Some(f) = &from.field_ref {
            let fp = vp.child("fieldRef").child("fieldPath");
            let subscripted = ["metadata.labels['", "metadata.annotations['"]
                .iter()
                .any(|pre| f.field_path.starts_with(pre) && f.field_path.ends_with("']"));
            if f.field_path.is_empty() {
                errs.push(FieldError::required(&fp, ""));
            } else if !subscripted
                && !["metadata.labels", "metadata.annotations"].contains(&f.field_path.as_str())
                && !FIELD_REF_PATHS.contains(&f.field_path.as_str())
            {
                errs.push(FieldError::not_supported(&fp, &f.field_path, &FIELD_REF_PATHS));
            }
        }
        if let Some(k) = &from.config_map_key_ref
            && k.key.is_empty()
        {
            errs.push(FieldError::required(&vp.child("configMapKeyRef").child("key"), ""));
        }
        if let Some(k) = &from.secret_key_ref
            && k.key.is_empty()
        {
            errs.push(FieldError::required(&vp.child("secretKeyRef").child("key"), ""));
        }
    }
}

fn is_standard_container_resource(name: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage"].contains(&name) || name.starts_with("hugepages-")
}

fn validate_resource_name(name: &str, path: &Path, errs: &mut ErrorList) {
    invalid_each(errs, path, name, names::qualified_name(name));
    if !name.contains('/') {
        const STANDARD: [&str; 9] = [
            "cpu",
            "memory",
            "ephemeral-storage",
            "pods",
            "services",
            "storage",
            "requests.cpu",
            "limits.cpu",
            "requests.memory",
        ];
        if !STANDARD.contains(&name) && !name.starts_with("hugepages-") {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource type or fully qualified",
            ));
        }
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    }
}

fn validate_resources(r: &ResourceRequirements, path: &Path, errs: &mut ErrorList) {
    let parse_all = |list: &Option<
        BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
                     field: &str,
                     errs: &mut ErrorList| {
        let mut parsed = BTreeMap::new();
        for (name, q) in list.iter().flatten() {
            let p = path.child(field).key(name);
            validate_resource_name(name, &p, errs);
            match Quantity::parse(&q.0) {
                Ok(v) if v.is_negative() => {
                    errs.push(FieldError::invalid(&p, &q.0, "must be greater than or equal to 0"))
                }
                Ok(v) => {
                    if !is_standard_container_resource(name) && v.milli_value() % 1000 != 0 {
                        errs.push(FieldError::invalid(&p, &q.0, "must be an integer"));
                    }
                    parsed.insert(name.clone(), (v, q.0.clone()));
                }
                Err(e) => errs.push(FieldError::invalid(&p, &q.0, e.to_string())),
            }
        }
        parsed
    };
    let limits = parse_all(&r.limits, "limits", errs);
    let requests = parse_all(&r.requests, "requests", errs);
    for (name, (req, req_text)) in &requests {
        // Upstream's IsOvercommitAllowed: native (no `/`, or under kubernetes.io/) and not hugepages.
        let native = !name.contains('/') || name.contains("kubernetes.io/");
        let overcommittable = native && !name.starts_with("hugepages-");
        match limits.get(name) {
            Some((lim, lim_text)) => {
                if !overcommittable && req != lim {
                    errs.push(FieldError::invalid(
                        &path.child("requests"),
                        req_text,
                        format!("must be equal to {name} limit of {lim_text}"),
                    ));
                } else if req.cmp_value(*lim).is_gt() {
                    errs.push(FieldError::invalid(
                        &path.child("requests"),
                        req_text,
                        format!("must be less than or equal to {name} limit of {lim_text}"),
                    ));
                }
            }
            None if !overcommittable => errs.push(FieldError::required(
                &path.child("limits"),
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
}
