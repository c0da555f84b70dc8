//! `as=Table` responses with kubectl's usual columns per kind. Each row carries the object's
//! metadata (or the whole object with `includeObject=Object`), which `-A`, `--show-labels` and
//! `-L` read.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// What a row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// Upstream's `duration.HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    let (d, y) = (h / 24, h / (24 * 365));
    let pair = |a: i64, ua: &str, b: i64, ub: &str| {
        if b == 0 { format!("{a}{ua}") } else { format!("{a}{ua}{b}{ub}") }
    };
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => pair(m, "m", s % 60, "s"),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => pair(h, "h", m % 60, "m"),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => pair(d, "d", h % 24, "h"),
        _ if h < 24 * 365 * 2 => format!("{d}d"),
        _ if h < 24 * 365 * 8 => pair(y, "y", d % 365, "d"),
        _ => format!("{y}y"),
    }
}

fn age(ts: &Value, now: jiff::Timestamp) -> String {
    match ts.as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()) {
        Some(t) => human_duration((now - t).get_seconds()),
        None => "<unknown>".into(),
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn or_none(v: String) -> String {
    if v.is_empty() { "<none>".into() } else { v }
}

/// Upstream's pod STATUS column.
fn pod_status(p: &Value) -> String {
    let mut reason = s(&p["status"]["reason"]);
    if reason.is_empty() {
        reason = s(&p["status"]["phase"]);
    }
    let inits = p["status"]["initContainerStatuses"].as_array().cloned().unwrap_or_default();
    let init_total = p["spec"]["initContainers"].as_array().map_or(0, Vec::len);
    for (i, c) in inits.iter().enumerate() {
        let st = &c["state"];
        if st["terminated"]["exitCode"].as_i64() == Some(0) {
            continue;
        }
        reason = if st["terminated"].is_object() {
            let r = s(&st["terminated"]["reason"]);
            format!(
                "Init:{}",
                if r.is_empty() { format!("ExitCode:{}", st["terminated"]["exitCode"]) } else { r }
            )
        } else if st["waiting"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty() && r != "PodInitializing")
        {
            format!("Init:{}", s(&st["waiting"]["reason"]))
        } else {
            format!("Init:{i}/{init_total}")
        };
        break;
    }
    if !reason.starts_with("Init:") {
        for c in p["status"]["containerStatuses"].as_array().into_iter().flatten().rev() {
            let st = &c["state"];
            if let Some(w) = st["waiting"]["reason"].as_str().filter(|r| !r.is_empty()) {
                reason = w.to_string();
            } else if st["terminated"].is_object() {
                let r = s(&st["terminated"]["reason"]);
                reason = if r.is_empty() {
                    format!("ExitCode:{}", st["terminated"]["exitCode"])
                } else {
                    r
                };
            }
        }
    }
    if p["metadata"]["deletionTimestamp"].is_string() {
        reason = "Terminating".into();
    }
    reason
}

fn pod_restarts(p: &Value, now: jiff::Timestamp) -> String {
    let mut total = 0;
    let mut last: Option<jiff::Timestamp> = None;
    for c in p["status"]["containerStatuses"].as_array().into_iter().flatten() {
        total += c["restartCount"].as_i64().unwrap_or(0);
        if let Some(t) = c["lastState"]["terminated"]["finishedAt"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        {
            last = Some(last.map_or(t, |l| l.max(t)));
        }
    }
    match last.filter(|_| total > 0) {
        Some(t) => format!("{total} ({} ago)", human_duration((now - t).get_seconds())),
        None => total.to_string(),
    }
}

fn containers_images(tpl: &Value) -> (String, String) {
    let cs = tpl["spec"]["containers"].as_array().cloned().unwrap_or_default();
    (
        cs.iter().map(|c| s(&c["name"])).collect::<Vec<_>>().join(","),
        cs.iter().map(|c| s(&c["image"])).collect::<Vec<_>>().join(","),
    )
}

fn selector(sel: &Value) -> String {
    sel["matchLabels"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", s(v))).collect::<Vec<_>>().join(","))
        .unwrap_or_default()
}

type Column = (&'static str, &'static str, u8);

/// Column definitions (name, type, priority) and the cells of one object.
fn columns(r: &ResourceType) -> Vec<Column> {
    let name: Column = ("Name", "string", 0);
    let age: Column = ("Age", "string", 0);
    match (r.group, r.name) {
        ("", "pods") => vec![
            name,
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            age,
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        ("", "nodes") => vec![
            name,
            ("Status", "string", 0),
            ("Roles", "string", 0),
            age,
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        ("", "namespaces") => vec![name, ("Status", "string", 0), age],
        ("", "events") | ("events.k8s.io", "events") => vec![
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Message", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("First Seen", "string", 1),
            ("Count", "string", 1),
            ("Name", "string", 1),
        ],
        ("apps", "deployments") => vec![
            name,
            ("Ready", "string", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            age,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("apps", "replicasets") => vec![
            name,
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            age,
            ("Containers", "string", 1),
            ("Images", "string", 1),
            ("Selector", "string", 1),
        ],
        ("apps", "daemonsets") => vec![
            name,
            ("Desired", "integer", 0),
            ("Current", "integer", 0),
            ("Ready", "integer", 0),
            ("Up-to-date", "integer", 0),
            ("Available", "integer", 0),
            ("Node Selector", "string", 0),
            age,
        ],
        ("", "services") => vec![
            name,
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            age,
            ("Selector", "string", 1),
        ],
        ("", "configmaps") => vec![name, ("Data", "integer", 0), age],
        ("", "secrets") => vec![name, ("Type", "string", 0), ("Data", "integer", 0), age],
        ("coordination.k8s.io", "leases") => vec![name, ("Holder", "string", 0), age],
        _ => vec![name, age],
    }
}

fn cells(r: &ResourceType, o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let name = s(&o["metadata"]["name"]);
    let age = age(&o["metadata"]["creationTimestamp"], now);
    let i = |v: &Value| json!(v.as_i64().unwrap_or(0));
    match (r.group, r.name) {
        ("", "pods") => {
            let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
            let ready = o["status"]["containerStatuses"]
                .as_array()
                .map_or(0, |c| c.iter().filter(|c| c["ready"] == true).count());
            vec![
                json!(name),
                json!(format!("{ready}/{total}")),
                json!(pod_status(o)),
                json!(pod_restarts(o, now)),
                json!(age),
                json!(or_none(s(&o["status"]["podIP"]))),
                json!(or_none(s(&o["spec"]["nodeName"]))),
                json!(or_none(s(&o["status"]["nominatedNodeName"]))),
                json!("<none>"),
            ]
        }
        ("", "nodes") => {
            let ready = o["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready");
            let mut status = if ready.is_some_and(|c| c["status"] == "True") {
                "Ready".to_string()
            } else if ready.is_some() {
                "NotReady".into()
            } else {
                "Unknown".into()
            };
            if o["spec"]["unschedulable"] == true {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<String> = o["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/").map(str::to_string))
                .collect();
            let addr = |t: &str| {
                o["status"]["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|a| a["type"] == t)
                    .map(|a| s(&a["address"]))
                    .unwrap_or_default()
            };
            let info = &o["status"]["nodeInfo"];
            vec![
                json!(name),
                json!(status),
                json!(or_none(roles.join(","))),
                json!(age),
                json!(s(&info["kubeletVersion"])),
                json!(or_none(addr("InternalIP"))),
                json!(or_none(addr("ExternalIP"))),
                json!(s(&info["osImage"])),
                json!(s(&info["kernelVersion"])),
                json!(s(&info["containerRuntimeVersion"])),
            ]
        }
        ("", "namespaces") => vec![json!(name), json!(s(&o["status"]["phase"])), json!(age)],
        ("", "events") | ("events.k8s.io", "events") => {
            let obj = if r.group.is_empty() { &o["involvedObject"] } else { &o["regarding"] };
            let last = [
                &o["lastTimestamp"],
                &o["eventTime"],
                &o["deprecatedLastTimestamp"],
                &o["metadata"]["creationTimestamp"],
            ]
            .into_iter()
            .find(|t| t.is_string())
            .cloned()
            .unwrap_or(Value::Null);
            let first =
                [&o["firstTimestamp"], &o["eventTime"], &o["metadata"]["creationTimestamp"]]
                    .into_iter()
                    .find(|t| t.is_string())
                    .cloned()
                    .unwrap_or(Value::Null);
            let source = if o["source"]["component"].is_string() {
                s(&o["source"]["component"])
            } else {
                s(&o["reportingController"])
            };
            vec![
                json!(self::age(&last, now)),
                json!(s(&o["type"])),
                json!(s(&o["reason"])),
                json!(format!("{}/{}", s(&obj["kind"]).to_lowercase(), s(&obj["name"]))),
                json!(s(if r.group.is_empty() { &o["message"] } else { &o["note"] })),
                json!(s(&obj["fieldPath"])),
                json!(source),
                json!(self::age(&first, now)),
                json!(o["count"].as_i64().unwrap_or(1)),
                json!(name),
            ]
        }
        ("apps", "deployments") => {
            let (c, im) = containers_images(&o["spec"]["template"]);
            vec![
                json!(name),
                json!(format!(
                    "{}/{}",
                    o["status"]["readyReplicas"].as_i64().unwrap_or(0),
                    o["spec"]["replicas"].as_i64().unwrap_or(0)
                )),
                i(&o["status"]["updatedReplicas"]),
                i(&o["status"]["availableReplicas"]),
                json!(age),
                json!(c),
                json!(im),
                json!(selector(&o["spec"]["selector"])),
            ]
        }
        ("apps", "replicasets") => {
            let (c, im) = containers_images(&o["spec"]["template"]);
            vec![
                json!(name),
                i(&o["spec"]["replicas"]),
                i(&o["status"]["replicas"]),
                i(&o["status"]["readyReplicas"]),
                json!(age),
                json!(c),
                json!(im),
                json!(selector(&o["spec"]["selector"])),
            ]
        }
        ("apps", "daemonsets") => {
            let st = &o["status"];
            let sel = o["spec"]["template"]["spec"]["nodeSelector"]
                .as_object()
                .map(|m| {
                    m.iter().map(|(k, v)| format!("{k}={}", s(v))).collect::<Vec<_>>().join(",")
                })
                .unwrap_or_default();
            vec![
                json!(name),
                i(&st["desiredNumberScheduled"]),
                i(&st["currentNumberScheduled"]),
                i(&st["numberReady"]),
                i(&st["updatedNumberScheduled"]),
                i(&st["numberAvailable"]),
                json!(or_none(sel)),
                json!(age),
            ]
        }
        ("", "services") => {
            let ports: Vec<String> = o["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| format!("{}/{}", p["port"], s(&p["protocol"])))
                .collect();
            let sel = o["spec"]["selector"]
                .as_object()
                .map(|m| {
                    m.iter().map(|(k, v)| format!("{k}={}", s(v))).collect::<Vec<_>>().join(",")
                })
                .unwrap_or_default();
            vec![
                json!(name),
                json!(s(&o["spec"]["type"])),
                json!(or_none(s(&o["spec"]["clusterIP"]))),
                json!("<none>"),
                json!(or_none(ports.join(","))),
                json!(age),
                json!(or_none(sel)),
            ]
        }
        ("", "configmaps") => vec![
            json!(name),
            json!(
                o["data"].as_object().map_or(0, |d| d.len())
                    + o["binaryData"].as_object().map_or(0, |d| d.len())
            ),
            json!(age),
        ],
        ("", "secrets") => vec![
            json!(name),
            json!(s(&o["type"])),
            json!(o["data"].as_object().map_or(0, |d| d.len())),
            json!(age),
        ],
        ("coordination.k8s.io", "leases") => {
            vec![json!(name), json!(s(&o["spec"]["holderIdentity"])), json!(age)]
        }
        _ => vec![json!(name), json!(age)],
    }
}

fn row(r: &ResourceType, o: &Value, include: IncludeObject, now: jiff::Timestamp) -> Value {
    let mut row = json!({"cells": cells(r, o, now)});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = o.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
        }
    }
    row
}

/// The column definitions of `r`.
pub fn column_definitions(r: &ResourceType) -> Value {
    json!(
        columns(r)
            .iter()
            .map(|(name, typ, priority)| json!({
                "name": name, "type": typ, "format": if *name == "Name" { "name" } else { "" },
                "description": format!("{name} of the {}", r.singular), "priority": priority,
            }))
            .collect::<Vec<_>>()
    )
}

/// A Table of `objects`; `with_columns` is false for watch events after the first.
pub fn table(
    r: &ResourceType,
    objects: &[Value],
    include: IncludeObject,
    metadata: Value,
    with_columns: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": objects.iter().map(|o| row(r, o, include, now)).collect::<Vec<_>>(),
    });
    if with_columns {
        t["columnDefinitions"] = column_definitions(r);
    }
    t
}

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=Table"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::find;

    #[test]
    fn durations_read_like_kubectl() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (10 * 3600, "10h"),
            (3 * 86400, "3d"),
            (3 * 86400 + 3600, "3d1h"),
            (400 * 86400, "400d"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn pod_rows_have_kubectls_columns() {
        let pods = find("", "v1", "pods").unwrap();
        let pod = json!({
            "metadata": {"name": "nginx-pod", "namespace": "default", "labels": {"app": "nginx"}, "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
        });
        let t = table(pods, &[pod], IncludeObject::Metadata, json!({"resourceVersion": "7"}), true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(
            (cells[0].as_str(), cells[1].as_str(), cells[2].as_str(), cells[3].as_str()),
            (Some("nginx-pod"), Some("1/1"), Some("Running"), Some("0"))
        );
        assert_eq!((cells[5].as_str(), cells[6].as_str()), (Some("10.0.0.5"), Some("node-1")));
        assert_eq!(t["rows"][0]["object"]["metadata"]["labels"]["app"], "nginx");
        assert_eq!(t["columnDefinitions"][1]["name"], "Ready");
        let crash = json!({"metadata": {"name": "c", "deletionTimestamp": null}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running", "containerStatuses": [{"ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(pod_status(&crash), "CrashLoopBackOff");
        assert_eq!(pod_restarts(&crash, jiff::Timestamp::now()), "3");
    }
}
