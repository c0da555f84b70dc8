//! A pod's (or a pod template's) containers as kubectl describes them: image, ports,
//! command, state, resources, probes, environment and mounts; and the pod template block
//! the workload describers share.

use std::collections::BTreeMap;

use serde_json::Value;

use super::quantity::Quantity;
use super::writer::{LEVEL_0, LEVEL_1, LEVEL_2, LEVEL_3, PrefixWriter};
use super::{Clock, fields, has, int, items, s, volumes};

/// `describeContainers`: `pod` resolves downward-API environment values (none for templates).
pub fn describe_containers(
    w: &mut PrefixWriter,
    label: &str,
    containers: &[Value],
    statuses: &[Value],
    pod: Option<&Value>,
    space: &str,
    clock: &Clock,
) {
    let by_name: BTreeMap<&str, &Value> = statuses.iter().map(|st| (s(st, "/name"), st)).collect();
    let none = if containers.is_empty() { " <none>" } else { "" };
    w.write(LEVEL_0, &format!("{space}{label}:{none}\n"));
    for c in containers {
        let status = by_name.get(s(c, "/name")).copied();
        basic_info(w, c, status, space);
        command(w, c);
        if let Some(st) = status {
            state("State", st.get("state"), w, clock);
            if has(st, "/lastState/terminated") {
                state("Last State", st.get("lastState"), w, clock);
            }
            let ready = if super::flag(st, "/ready") { "True" } else { "False" };
            w.write(LEVEL_2, &format!("Ready:\t{ready}\n"));
            w.write(LEVEL_2, &format!("Restart Count:\t{}\n", int(st, "/restartCount")));
        }
        resources(w, c.get("resources"), LEVEL_2);
        for (title, key) in [
            ("Liveness", "livenessProbe"),
            ("Readiness", "readinessProbe"),
            ("Startup", "startupProbe"),
        ] {
            if let Some(p) = c.get(key).filter(|p| !p.is_null()) {
                w.write(LEVEL_2, &format!("{title}:\t{}\n", probe(p)));
            }
        }
        if !items(c, "/envFrom").is_empty() {
            env_from(w, c);
        }
        env(w, c, pod);
        mounts(w, c);
    }
}

fn basic_info(w: &mut PrefixWriter, c: &Value, status: Option<&Value>, space: &str) {
    let indent = if space.is_empty() { "" } else { " " };
    w.write(LEVEL_1, &format!("{indent}{}:\n", s(c, "/name")));
    if let Some(st) = status {
        w.write(LEVEL_2, &format!("Container ID:\t{}\n", s(st, "/containerID")));
    }
    w.write(LEVEL_2, &format!("Image:\t{}\n", s(c, "/image")));
    if let Some(st) = status {
        w.write(LEVEL_2, &format!("Image ID:\t{}\n", s(st, "/imageID")));
    }
    let ports = items(c, "/ports");
    let list = |port: &str| {
        ports
            .iter()
            .map(|p| {
                let mut t = format!("{}/{}", int(p, &format!("/{port}")), s(p, "/protocol"));
                if !s(p, "/name").is_empty() {
                    t = format!("{t} ({})", s(p, "/name"));
                }
                t
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (one, many, text) in
        [("Port", "Ports", list("containerPort")), ("Host Port", "Host Ports", list("hostPort"))]
    {
        if text.contains(',') {
            w.write(LEVEL_2, &format!("{many}:\t{text}\n"));
        } else {
            let text = if text.is_empty() { "<none>".to_string() } else { text };
            w.write(LEVEL_2, &format!("{one}:\t{text}\n"));
        }
    }
    let seccomp = s(c, "/securityContext/seccompProfile/type");
    if has(c, "/securityContext/seccompProfile") {
        w.write(LEVEL_2, &format!("SeccompProfile:\t{seccomp}\n"));
        if seccomp == "Localhost" {
            let p = s(c, "/securityContext/seccompProfile/localhostProfile");
            w.write(LEVEL_3, &format!("LocalhostProfile:\t{p}\n"));
        }
    }
}

fn command(w: &mut PrefixWriter, c: &Value) {
    for (title, key) in [("Command", "/command"), ("Args", "/args")] {
        let list = items(c, key);
        if list.is_empty() {
            continue;
        }
        w.write(LEVEL_2, &format!("{title}:\n"));
        for part in list.iter().filter_map(Value::as_str) {
            for line in part.split('\n') {
                w.write(LEVEL_3, &format!("{line}\n"));
            }
        }
    }
}

/// `describeStatus`: a container state (running, waiting, terminated).
fn state(title: &str, st: Option<&Value>, w: &mut PrefixWriter, clock: &Clock) {
    let st = st.unwrap_or(&Value::Null);
    if let Some(r) = st.get("running").filter(|v| !v.is_null()) {
        w.write(LEVEL_2, &format!("{title}:\tRunning\n"));
        w.write(LEVEL_3, &format!("Started:\t{}\n", fields::time(clock, r.get("startedAt"))));
    } else if let Some(wt) = st.get("waiting").filter(|v| !v.is_null()) {
        w.write(LEVEL_2, &format!("{title}:\tWaiting\n"));
        if !s(wt, "/reason").is_empty() {
            w.write(LEVEL_3, &format!("Reason:\t{}\n", s(wt, "/reason")));
        }
    } else if let Some(t) = st.get("terminated").filter(|v| !v.is_null()) {
        w.write(LEVEL_2, &format!("{title}:\tTerminated\n"));
        if !s(t, "/reason").is_empty() {
            w.write(LEVEL_3, &format!("Reason:\t{}\n", s(t, "/reason")));
        }
        if !s(t, "/message").is_empty() {
            w.write(LEVEL_3, &format!("Message:\t{}\n", s(t, "/message")));
        }
        w.write(LEVEL_3, &format!("Exit Code:\t{}\n", int(t, "/exitCode")));
        if int(t, "/signal") > 0 {
            w.write(LEVEL_3, &format!("Signal:\t{}\n", int(t, "/signal")));
        }
        w.write(LEVEL_3, &format!("Started:\t{}\n", fields::time(clock, t.get("startedAt"))));
        w.write(LEVEL_3, &format!("Finished:\t{}\n", fields::time(clock, t.get("finishedAt"))));
    } else {
        w.write(LEVEL_2, &format!("{title}:\tWaiting\n"));
    }
}

/// A resource list's entries, sorted by name, each quantity in its canonical form.
pub fn sorted_quantities(list: Option<&Value>) -> Vec<(String, String)> {
    let Some(m) = list.and_then(Value::as_object) else { return Vec::new() };
    let mut out: Vec<(String, String)> = m
        .iter()
        .map(|(k, v)| {
            let q = Quantity::of(v).map_or_else(|| fields::go_v(v), |q| q.to_string());
            (k.clone(), q)
        })
        .collect();
    out.sort();
    out
}

/// `describeResources`: limits, then requests.
pub fn resources(w: &mut PrefixWriter, r: Option<&Value>, level: usize) {
    let Some(r) = r else { return };
    for (title, key) in [("Limits", "limits"), ("Requests", "requests")] {
        let list = sorted_quantities(r.get(key));
        if !list.is_empty() {
            w.write(level, &format!("{title}:\n"));
        }
        for (name, q) in list {
            w.write(level + 1, &format!("{name}:\t{q}\n"));
        }
    }
}

/// `DescribeProbe`: `http-get http://:8080/healthz delay=0s timeout=1s period=10s …`.
pub fn probe(p: &Value) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s #success={} #failure={}",
        int(p, "/initialDelaySeconds"),
        int(p, "/timeoutSeconds"),
        int(p, "/periodSeconds"),
        int(p, "/successThreshold"),
        int(p, "/failureThreshold")
    );
    if let Some(e) = p.get("exec").filter(|v| !v.is_null()) {
        let cmd: Vec<&str> = items(e, "/command").iter().filter_map(Value::as_str).collect();
        return format!("exec [{}] {attrs}", cmd.join(" "));
    }
    if let Some(h) = p.get("httpGet").filter(|v| !v.is_null()) {
        let scheme = s(h, "/scheme").to_lowercase();
        let port = int_or_string(h.get("port"));
        let host = s(h, "/host");
        let hostport = if port.is_empty() { host.to_string() } else { join_host_port(host, &port) };
        let mut url = String::new();
        if !scheme.is_empty() {
            url.push_str(&scheme);
            url.push(':');
        }
        if !scheme.is_empty() || !hostport.is_empty() {
            url.push_str("//");
        }
        url.push_str(&hostport);
        let path = s(h, "/path");
        if !path.is_empty() && !path.starts_with('/') && !hostport.is_empty() {
            url.push('/');
        }
        url.push_str(path);
        return format!("http-get {url} {attrs}");
    }
    if let Some(t) = p.get("tcpSocket").filter(|v| !v.is_null()) {
        return format!("tcp-socket {}:{} {attrs}", s(t, "/host"), int_or_string(t.get("port")));
    }
    if let Some(g) = p.get("grpc").filter(|v| !v.is_null()) {
        return format!("grpc <pod>:{} {} {attrs}", int(g, "/port"), s(g, "/service"));
    }
    format!("unknown {attrs}")
}

/// `net.JoinHostPort`: IPv6 hosts in brackets.
fn join_host_port(host: &str, port: &str) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// An `IntOrString` as its `String()`.
pub fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => s.clone(),
        _ => "0".into(),
    }
}

fn env_from(w: &mut PrefixWriter, c: &Value) {
    w.write(LEVEL_2, "Environment Variables from:\n");
    for e in items(c, "/envFrom") {
        let (from, r) = if has(e, "/configMapRef") {
            ("ConfigMap", e.get("configMapRef"))
        } else if has(e, "/secretRef") {
            ("Secret", e.get("secretRef"))
        } else {
            ("", None)
        };
        let r = r.unwrap_or(&Value::Null);
        let (name, optional) = (s(r, "/name"), super::flag(r, "/optional"));
        let prefix = s(e, "/prefix");
        if prefix.is_empty() {
            w.write(LEVEL_3, &format!("{name}\t{from}\tOptional: {optional}\n"));
        } else {
            w.write(
                LEVEL_3,
                &format!("{name}\t{from} with prefix '{prefix}'\tOptional: {optional}\n"),
            );
        }
    }
}

fn env(w: &mut PrefixWriter, c: &Value, pod: Option<&Value>) {
    let env = items(c, "/env");
    let none = if env.is_empty() { "\t<none>" } else { "" };
    w.write(LEVEL_2, &format!("Environment:{none}\n"));
    for e in env {
        let name = s(e, "/name");
        let Some(from) = e.get("valueFrom").filter(|v| !v.is_null()) else {
            for (i, line) in s(e, "/value").split('\n').enumerate() {
                if i == 0 {
                    w.write(LEVEL_3, &format!("{name}:\t{line}\n"));
                } else {
                    w.write(LEVEL_3, &format!("\t{line}\n"));
                }
            }
            continue;
        };
        if let Some(fr) = from.get("fieldRef").filter(|v| !v.is_null()) {
            let path = s(fr, "/fieldPath");
            let value = pod.map(|p| field_value(p, path)).unwrap_or_default();
            w.write(LEVEL_3, &format!("{name}:\t{value} ({}:{path})\n", s(fr, "/apiVersion")));
        } else if let Some(rf) = from.get("resourceFieldRef").filter(|v| !v.is_null()) {
            let resource = s(rf, "/resource");
            let mut value = resource_value(rf, c);
            if value == "0" && (resource == "limits.cpu" || resource == "limits.memory") {
                value = "node allocatable".into();
            }
            w.write(LEVEL_3, &format!("{name}:\t{value} ({resource})\n"));
        } else if let Some(k) = from.get("secretKeyRef").filter(|v| !v.is_null()) {
            w.write(
                LEVEL_3,
                &format!(
                    "{name}:\t<set to the key '{}' in secret '{}'>\tOptional: {}\n",
                    s(k, "/key"),
                    s(k, "/name"),
                    super::flag(k, "/optional")
                ),
            );
        } else if let Some(k) = from.get("configMapKeyRef").filter(|v| !v.is_null()) {
            w.write(
                LEVEL_3,
                &format!(
                    "{name}:\t<set to the key '{}' of config map '{}'>\tOptional: {}\n",
                    s(k, "/key"),
                    s(k, "/name"),
                    super::flag(k, "/optional")
                ),
            );
        }
    }
}

/// A downward-API field of the pod, as kubectl resolves it (metadata only; other fields
/// resolve to nothing, as in kubectl).
fn field_value(pod: &Value, path: &str) -> String {
    let subscript = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['"))
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    if let Some(k) = subscript("metadata.annotations") {
        return pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(&k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    if let Some(k) = subscript("metadata.labels") {
        return pod
            .pointer("/metadata/labels")
            .and_then(|a| a.get(&k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    let format_map = |v: Option<&Value>| {
        fields::string_map(v)
            .iter()
            .map(|(k, v)| format!("{k}={}", serde_json::to_string(v).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match path {
        "metadata.annotations" => format_map(pod.pointer("/metadata/annotations")),
        "metadata.labels" => format_map(pod.pointer("/metadata/labels")),
        "metadata.name" => s(pod, "/metadata/name").to_string(),
        "metadata.namespace" => s(pod, "/metadata/namespace").to_string(),
        "metadata.uid" => s(pod, "/metadata/uid").to_string(),
        _ => String::new(),
    }
}

/// `ExtractContainerResourceValue`: a container's request or limit over the divisor, rounded up.
fn resource_value(rf: &Value, c: &Value) -> String {
    let divisor = rf.get("divisor").and_then(Quantity::of).filter(|d| !d.is_zero());
    let divisor = divisor.or_else(|| Quantity::parse("1")).unwrap_or_default();
    let Some((kind, name)) = s(rf, "/resource").split_once('.') else { return String::new() };
    let q =
        c.pointer(&format!("/resources/{kind}/{name}")).and_then(Quantity::of).unwrap_or_default();
    let ceil = |a: i128, b: i128| if b == 0 { 0 } else { (a + b - 1).div_euclid(b) };
    match name {
        "cpu" => ceil(q.milli_value(), divisor.milli_value()).to_string(),
        _ => ceil(q.value(), divisor.value()).to_string(),
    }
}

fn mounts(w: &mut PrefixWriter, c: &Value) {
    let mut list: Vec<&Value> = items(c, "/volumeMounts").iter().collect();
    let none = if list.is_empty() { "\t<none>" } else { "" };
    w.write(LEVEL_2, &format!("Mounts:{none}\n"));
    list.sort_by(|a, b| s(a, "/mountPath").cmp(s(b, "/mountPath")));
    for m in list {
        let mut flags = vec![if super::flag(m, "/readOnly") { "ro" } else { "rw" }.to_string()];
        let sub = s(m, "/subPath");
        if !sub.is_empty() {
            flags.push(format!("path={}", serde_json::to_string(sub).unwrap_or_default()));
        }
        w.write(
            LEVEL_3,
            &format!("{} from {} ({})\n", s(m, "/mountPath"), s(m, "/name"), flags.join(",")),
        );
    }
    let mut devices: Vec<&Value> = items(c, "/volumeDevices").iter().collect();
    if !devices.is_empty() {
        w.write(LEVEL_2, &format!("Devices:{none}\n"));
        devices.sort_by(|a, b| s(a, "/devicePath").cmp(s(b, "/devicePath")));
        for d in devices {
            w.write(LEVEL_3, &format!("{} from {}\n", s(d, "/devicePath"), s(d, "/name")));
        }
    }
}

/// `DescribePodTemplate`: the template of a Deployment, ReplicaSet, ….
pub fn describe_pod_template(w: &mut PrefixWriter, template: Option<&Value>, clock: &Clock) {
    w.write(LEVEL_0, "Pod Template:\n");
    let Some(t) = template.filter(|t| !t.is_null()) else {
        w.write(LEVEL_1, "<unset>");
        return;
    };
    fields::labels_multiline(w, "  Labels", t.pointer("/metadata/labels"));
    if !fields::string_map(t.pointer("/metadata/annotations")).is_empty() {
        fields::annotations_multiline(w, "  Annotations", t.pointer("/metadata/annotations"));
    }
    let sa = s(t, "/spec/serviceAccountName");
    if !sa.is_empty() {
        w.write(LEVEL_1, &format!("Service Account:\t{sa}\n"));
    }
    let init = items(t, "/spec/initContainers");
    if !init.is_empty() {
        describe_containers(w, "Init Containers", init, &[], None, "  ", clock);
    }
    describe_containers(w, "Containers", items(t, "/spec/containers"), &[], None, "  ", clock);
    volumes::describe_volumes(w, items(t, "/spec/volumes"), "  ");
    super::pod::topology_spread(w, items(t, "/spec/topologySpreadConstraints"), "  ");
    let pc = s(t, "/spec/priorityClassName");
    if !pc.is_empty() {
        w.write(LEVEL_1, &format!("Priority Class Name:\t{pc}\n"));
    }
    fields::labels_multiline(w, "  Node-Selectors", t.pointer("/spec/nodeSelector"));
    fields::tolerations_multiline(w, "  Tolerations", items(t, "/spec/tolerations"));
}
