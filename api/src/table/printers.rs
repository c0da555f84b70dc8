//! kubectl's columns per kind. Each kind's row is written as (column, cell) pairs side by side,
//! so a header and its cell cannot drift apart; the column definitions are the columns of any
//! row (read from an empty object's).

use serde_json::{Value, json};

use super::human_duration;

/// One column: header, type, and priority (1: shown only by `-o wide`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    pub ty: &'static str,
    pub priority: u8,
}

const fn col(name: &'static str, ty: &'static str, priority: u8) -> Column {
    Column { name, ty, priority }
}

const NAME: Column = col("Name", "string", 0);
const AGE: Column = col("Age", "string", 0);

/// A row: each column with its cell.
pub type Row = Vec<(Column, Value)>;

/// A kind's printer: an object's row at `now`.
pub type Printer = fn(&Value, jiff::Timestamp) -> Row;

/// The columns of a kind with no printer of its own.
pub fn plain(o: &Value, now: jiff::Timestamp) -> Row {
    vec![name(o), age_of(o, now)]
}

pub fn namespace(o: &Value, now: jiff::Timestamp) -> Row {
    vec![name(o), (col("Status", "string", 0), str(&o["status"]["phase"])), age_of(o, now)]
}

pub fn core_event(o: &Value, now: jiff::Timestamp) -> Row {
    event(o, now, Event::Core)
}

pub fn events_v1_event(o: &Value, now: jiff::Timestamp) -> Row {
    event(o, now, Event::EventsV1)
}

pub fn config_map(o: &Value, now: jiff::Timestamp) -> Row {
    let data = o["data"].as_object().map_or(0, |d| d.len())
        + o["binaryData"].as_object().map_or(0, |d| d.len());
    vec![name(o), (col("Data", "integer", 0), json!(data)), age_of(o, now)]
}

pub fn secret(o: &Value, now: jiff::Timestamp) -> Row {
    vec![
        name(o),
        (col("Type", "string", 0), str(&o["type"])),
        (col("Data", "integer", 0), json!(o["data"].as_object().map_or(0, |d| d.len()))),
        age_of(o, now),
    ]
}

pub fn lease(o: &Value, now: jiff::Timestamp) -> Row {
    vec![name(o), (col("Holder", "string", 0), str(&o["spec"]["holderIdentity"])), age_of(o, now)]
}

/// Roles and cluster roles.
pub fn role(o: &Value, _: jiff::Timestamp) -> Row {
    vec![name(o), (col("Created At", "date", 0), str(&o["metadata"]["creationTimestamp"]))]
}

/// Upstream's role binding columns: the role as `Kind/name`, and (wide) the subjects by kind,
/// service accounts as `namespace/name`.
pub fn binding(o: &Value, now: jiff::Timestamp) -> Row {
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in o["subjects"].as_array().into_iter().flatten() {
        let name = s(&subject["name"]);
        match subject["kind"].as_str() {
            Some("User") => users.push(name),
            Some("Group") => groups.push(name),
            Some("ServiceAccount") => accounts.push(format!("{}/{name}", s(&subject["namespace"]))),
            _ => {}
        }
    }
    let role = format!("{}/{}", s(&o["roleRef"]["kind"]), s(&o["roleRef"]["name"]));
    vec![
        name(o),
        (col("Role", "string", 0), json!(role)),
        age_of(o, now),
        (col("Users", "string", 1), json!(users.join(", "))),
        (col("Groups", "string", 1), json!(groups.join(", "))),
        (col("ServiceAccounts", "string", 1), json!(accounts.join(", "))),
    ]
}

/// The columns of a printer's rows.
pub fn columns(printer: Printer) -> Vec<Column> {
    printer(&Value::Null, jiff::Timestamp::UNIX_EPOCH).into_iter().map(|(c, _)| c).collect()
}

fn name(o: &Value) -> (Column, Value) {
    (NAME, str(&o["metadata"]["name"]))
}

fn age_of(o: &Value, now: jiff::Timestamp) -> (Column, Value) {
    (AGE, json!(age(&o["metadata"]["creationTimestamp"], now)))
}

fn str(v: &Value) -> Value {
    json!(s(v))
}

fn int(v: &Value) -> Value {
    json!(v.as_i64().unwrap_or(0))
}

fn none_if_empty(v: String) -> Value {
    json!(or_none(v))
}

pub fn pod(o: &Value, now: jiff::Timestamp) -> Row {
    let summary = PodSummary::of(o);
    vec![
        name(o),
        (col("Ready", "string", 0), json!(format!("{}/{}", summary.ready, summary.total))),
        (col("Status", "string", 0), json!(summary.status)),
        (col("Restarts", "string", 0), json!(summary.restarts(now))),
        age_of(o, now),
        (col("IP", "string", 1), none_if_empty(s(&o["status"]["podIP"]))),
        (col("Node", "string", 1), none_if_empty(s(&o["spec"]["nodeName"]))),
        (col("Nominated Node", "string", 1), none_if_empty(s(&o["status"]["nominatedNodeName"]))),
        (col("Readiness Gates", "string", 1), json!(readiness_gates(o))),
    ]
}

/// The wide column: how many readiness gates' conditions are `True`, of how many.
fn readiness_gates(o: &Value) -> String {
    let Some(gates) = o["spec"]["readinessGates"].as_array().filter(|g| !g.is_empty()) else {
        return "<none>".into();
    };
    let conditions = o["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let true_ = gates
        .iter()
        .filter(|g| {
            conditions
                .iter()
                .find(|c| c["type"] == g["conditionType"])
                .is_some_and(|c| c["status"] == "True")
        })
        .count();
    format!("{true_}/{}", gates.len())
}

pub fn node(o: &Value, now: jiff::Timestamp) -> Row {
    let ready =
        o["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "Ready");
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
        name(o),
        (col("Status", "string", 0), json!(status)),
        (col("Roles", "string", 0), none_if_empty(roles.join(","))),
        age_of(o, now),
        (col("Version", "string", 0), str(&info["kubeletVersion"])),
        (col("Internal-IP", "string", 1), none_if_empty(addr("InternalIP"))),
        (col("External-IP", "string", 1), none_if_empty(addr("ExternalIP"))),
        (col("OS-Image", "string", 1), str(&info["osImage"])),
        (col("Kernel-Version", "string", 1), str(&info["kernelVersion"])),
        (col("Container-Runtime", "string", 1), str(&info["containerRuntimeVersion"])),
    ]
}

/// Which events API an event comes from: the fields that name the object and the message differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Core,
    EventsV1,
}

/// Upstream's `formatEventSource`: `<component>, <host>` from `source` (`deprecatedSource` in
/// events.k8s.io), else from `reportingController`/`reportingInstance`; `<unknown>` without a
/// component.
fn event_source(o: &Value, api: Event) -> String {
    let source = match api {
        Event::Core => &o["source"],
        Event::EventsV1 => &o["deprecatedSource"],
    };
    let first_non_empty =
        |a: &Value, b: &Value| Some(s(a)).filter(|a| !a.is_empty()).unwrap_or_else(|| s(b));
    let component = first_non_empty(&source["component"], &o["reportingController"]);
    let instance = first_non_empty(&source["host"], &o["reportingInstance"]);
    match (component.is_empty(), instance.is_empty()) {
        (true, _) => "<unknown>".into(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    }
}

pub fn event(o: &Value, now: jiff::Timestamp, api: Event) -> Row {
    let (obj, message) = match api {
        Event::Core => (&o["involvedObject"], &o["message"]),
        Event::EventsV1 => (&o["regarding"], &o["note"]),
    };
    let first_string = |candidates: &[&Value]| {
        candidates.iter().find(|t| t.is_string()).map_or(Value::Null, |t| (*t).clone())
    };
    let created = &o["metadata"]["creationTimestamp"];
    let last = first_string(&[
        &o["lastTimestamp"],
        &o["eventTime"],
        &o["deprecatedLastTimestamp"],
        created,
    ]);
    let first = first_string(&[&o["firstTimestamp"], &o["eventTime"], created]);
    let source = event_source(o, api);
    vec![
        (col("Last Seen", "string", 0), json!(age(&last, now))),
        (col("Type", "string", 0), str(&o["type"])),
        (col("Reason", "string", 0), str(&o["reason"])),
        (
            col("Object", "string", 0),
            json!(format!("{}/{}", s(&obj["kind"]).to_lowercase(), s(&obj["name"]))),
        ),
        (col("Message", "string", 0), str(message)),
        (col("Subobject", "string", 1), str(&obj["fieldPath"])),
        (col("Source", "string", 1), json!(source)),
        (col("First Seen", "string", 1), json!(age(&first, now))),
        (col("Count", "string", 1), json!(o["count"].as_i64().unwrap_or(1))),
        (col("Name", "string", 1), str(&o["metadata"]["name"])),
    ]
}

/// The wide columns every workload with a pod template shows.
fn template_columns(o: &Value) -> [(Column, Value); 3] {
    let (containers, images) = containers_images(&o["spec"]["template"]);
    [
        (col("Containers", "string", 1), json!(containers)),
        (col("Images", "string", 1), json!(images)),
        (col("Selector", "string", 1), json!(selector(&o["spec"]["selector"]))),
    ]
}

pub fn deployment(o: &Value, now: jiff::Timestamp) -> Row {
    let ready = format!(
        "{}/{}",
        o["status"]["readyReplicas"].as_i64().unwrap_or(0),
        o["spec"]["replicas"].as_i64().unwrap_or(0)
    );
    let mut row = vec![
        name(o),
        (col("Ready", "string", 0), json!(ready)),
        (col("Up-to-date", "integer", 0), int(&o["status"]["updatedReplicas"])),
        (col("Available", "integer", 0), int(&o["status"]["availableReplicas"])),
        age_of(o, now),
    ];
    row.extend(template_columns(o));
    row
}

pub fn replica_set(o: &Value, now: jiff::Timestamp) -> Row {
    let mut row = vec![
        name(o),
        (col("Desired", "integer", 0), int(&o["spec"]["replicas"])),
        (col("Current", "integer", 0), int(&o["status"]["replicas"])),
        (col("Ready", "integer", 0), int(&o["status"]["readyReplicas"])),
        age_of(o, now),
    ];
    row.extend(template_columns(o));
    row
}

pub fn daemon_set(o: &Value, now: jiff::Timestamp) -> Row {
    let st = &o["status"];
    let mut row = vec![
        name(o),
        (col("Desired", "integer", 0), int(&st["desiredNumberScheduled"])),
        (col("Current", "integer", 0), int(&st["currentNumberScheduled"])),
        (col("Ready", "integer", 0), int(&st["numberReady"])),
        (col("Up-to-date", "integer", 0), int(&st["updatedNumberScheduled"])),
        (col("Available", "integer", 0), int(&st["numberAvailable"])),
        (
            col("Node Selector", "string", 0),
            none_if_empty(pairs(&o["spec"]["template"]["spec"]["nodeSelector"])),
        ),
        age_of(o, now),
    ];
    row.extend(template_columns(o));
    row
}

/// Upstream's `printControllerRevision`: the controller as `<kind>.<group>/<name>`.
pub fn controller_revision(o: &Value, now: jiff::Timestamp) -> Row {
    let owner = o["metadata"]["ownerReferences"]
        .as_array()
        .and_then(|refs| refs.iter().find(|r| r["controller"] == json!(true)));
    let controller = owner.map_or_else(
        || "<none>".to_string(),
        |r| {
            let group = s(&r["apiVersion"]).rsplit_once('/').map(|(g, _)| g.to_string());
            let kind = s(&r["kind"]).to_lowercase();
            match group {
                Some(g) => format!("{kind}.{g}/{}", s(&r["name"])),
                None => format!("{kind}/{}", s(&r["name"])),
            }
        },
    );
    vec![
        name(o),
        (col("Controller", "string", 0), json!(controller)),
        (col("Revision", "integer", 0), int(&o["revision"])),
        age_of(o, now),
    ]
}

/// Whether a Job condition of `kind` is there and `True` (the first of that type decides).
fn job_condition(o: &Value, kind: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .is_some_and(|c| c["status"] == "True")
}

fn timestamp(v: &Value) -> Option<jiff::Timestamp> {
    v.as_str().and_then(|t| t.parse().ok())
}

pub fn job(o: &Value, now: jiff::Timestamp) -> Row {
    let (spec, st) = (&o["spec"], &o["status"]);
    let succeeded = st["succeeded"].as_i64().unwrap_or(0);
    let completions = match spec["completions"].as_i64() {
        Some(c) => format!("{succeeded}/{c}"),
        None => match spec["parallelism"].as_i64().unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (timestamp(&st["startTime"]), timestamp(&st["completionTime"])) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration((now - start).get_seconds()),
        (Some(start), Some(end)) => human_duration((end - start).get_seconds()),
    };
    let status = if job_condition(o, "Complete") {
        "Complete"
    } else if job_condition(o, "Failed") {
        "Failed"
    } else if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if job_condition(o, "Suspended") {
        "Suspended"
    } else if job_condition(o, "FailureTarget") {
        "FailureTarget"
    } else if job_condition(o, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let mut row = vec![
        name(o),
        (col("Status", "string", 0), json!(status)),
        (col("Completions", "string", 0), json!(completions)),
        (col("Duration", "string", 0), json!(duration)),
        age_of(o, now),
    ];
    row.extend(template_columns(o));
    row
}

pub fn cron_job(o: &Value, now: jiff::Timestamp) -> Row {
    let (spec, st) = (&o["spec"], &o["status"]);
    let last = match &st["lastScheduleTime"] {
        Value::Null => "<none>".to_string(),
        t => age(t, now),
    };
    let suspend = match spec["suspend"].as_bool() {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let template = &spec["jobTemplate"]["spec"];
    let (containers, images) = containers_images(&template["template"]);
    vec![
        name(o),
        (col("Schedule", "string", 0), str(&spec["schedule"])),
        (col("Timezone", "string", 0), none_if_empty(s(&spec["timeZone"]))),
        (col("Suspend", "boolean", 0), json!(suspend)),
        (col("Active", "integer", 0), json!(st["active"].as_array().map_or(0, Vec::len))),
        (col("Last Schedule", "string", 0), json!(last)),
        age_of(o, now),
        (col("Containers", "string", 1), json!(containers)),
        (col("Images", "string", 1), json!(images)),
        (col("Selector", "string", 1), json!(selector(&template["selector"]))),
    ]
}

pub fn service(o: &Value, now: jiff::Timestamp) -> Row {
    let ports: Vec<String> = o["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("{}/{}", p["port"], s(&p["protocol"])))
        .collect();
    vec![
        name(o),
        (col("Type", "string", 0), str(&o["spec"]["type"])),
        (col("Cluster-IP", "string", 0), none_if_empty(s(&o["spec"]["clusterIP"]))),
        (col("External-IP", "string", 0), json!("<none>")),
        (col("Port(s)", "string", 0), none_if_empty(ports.join(","))),
        age_of(o, now),
        (col("Selector", "string", 1), none_if_empty(pairs(&o["spec"]["selector"]))),
    ]
}

/// `k=v,k2=v2` of a string map.
fn pairs(map: &Value) -> String {
    map.as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", s(v))).collect::<Vec<_>>().join(","))
        .unwrap_or_default()
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

/// Upstream's pod READY, STATUS and RESTARTS columns, computed in one pass as its `printPod`:
/// sidecars (init containers with `restartPolicy: Always`) count among the containers, ready
/// once started; an init container that has not finished gives `Init:…`; containers' waiting
/// and terminated reasons override the phase; a deleted pod that is not finished is
/// `Terminating`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSummary {
    pub ready: usize,
    pub total: usize,
    pub status: String,
    pub restart_count: i64,
    pub last_restart: Option<jiff::Timestamp>,
}

fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = s(&t["reason"]);
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    match t["signal"].as_i64().filter(|s| *s != 0) {
        Some(signal) => format!("{prefix}Signal:{signal}"),
        None => format!("{prefix}ExitCode:{}", t["exitCode"].as_i64().unwrap_or(0)),
    }
}

fn finished_at(c: &Value) -> Option<jiff::Timestamp> {
    c["lastState"]["terminated"]["finishedAt"].as_str().and_then(|t| t.parse().ok())
}

impl PodSummary {
    pub fn of(p: &Value) -> Self {
        let spec_init = p["spec"]["initContainers"].as_array().cloned().unwrap_or_default();
        let sidecar = |name: &Value| {
            spec_init.iter().any(|c| c["name"] == *name && c["restartPolicy"] == "Always")
        };
        let mut total = p["spec"]["containers"].as_array().map_or(0, Vec::len);
        total += spec_init.iter().filter(|c| c["restartPolicy"] == "Always").count();
        let phase = s(&p["status"]["phase"]);
        let mut status = s(&p["status"]["reason"]);
        if status.is_empty() {
            status = phase.clone();
        }
        let conditions = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let condition_true =
            |t: &str| conditions.iter().any(|c| c["type"] == t && c["status"] == "True");
        if conditions
            .iter()
            .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
        {
            status = "SchedulingGated".into();
        }
        let (mut ready, mut restart_count, mut last_restart) = (0, 0i64, None);
        let (mut sidecar_restarts, mut sidecar_last) = (0i64, None);
        let latest = |a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let mut initializing = false;
        let inits = p["status"]["initContainerStatuses"].as_array().cloned().unwrap_or_default();
        for (i, c) in inits.iter().enumerate() {
            let count = c["restartCount"].as_i64().unwrap_or(0);
            restart_count += count;
            last_restart = latest(last_restart, finished_at(c));
            let is_sidecar = sidecar(&c["name"]);
            if is_sidecar {
                sidecar_restarts += count;
                sidecar_last = latest(sidecar_last, finished_at(c));
            }
            let st = &c["state"];
            if st["terminated"].is_object() && st["terminated"]["exitCode"].as_i64() == Some(0) {
                continue;
            }
            if is_sidecar && c["started"] == true {
                if c["ready"] == true {
                    ready += 1;
                }
                continue;
            }
            status = if st["terminated"].is_object() {
                terminated_reason(&st["terminated"], "Init:")
            } else if st["waiting"]["reason"]
                .as_str()
                .is_some_and(|r| !r.is_empty() && r != "PodInitializing")
            {
                format!("Init:{}", s(&st["waiting"]["reason"]))
            } else {
                format!("Init:{i}/{}", spec_init.len())
            };
            initializing = true;
            break;
        }
        if !initializing || condition_true("Initialized") {
            restart_count = sidecar_restarts;
            last_restart = sidecar_last;
            let mut has_running = false;
            for c in p["status"]["containerStatuses"].as_array().into_iter().flatten().rev() {
                restart_count += c["restartCount"].as_i64().unwrap_or(0);
                last_restart = latest(last_restart, finished_at(c));
                let st = &c["state"];
                if let Some(w) = st["waiting"]["reason"].as_str().filter(|r| !r.is_empty()) {
                    status = w.to_string();
                } else if st["terminated"].is_object() {
                    status = terminated_reason(&st["terminated"], "");
                } else if c["ready"] == true && st["running"].is_object() {
                    has_running = true;
                    ready += 1;
                }
            }
            if status == "Completed" && has_running {
                status = if condition_true("Ready") { "Running" } else { "NotReady" }.into();
            }
        }
        let terminal = phase == "Succeeded" || phase == "Failed";
        if p["metadata"]["deletionTimestamp"].is_string() {
            if p["status"]["reason"] == "NodeLost" {
                status = "Unknown".into();
            } else if !terminal {
                status = "Terminating".into();
            }
        }
        PodSummary { ready, total, status, restart_count, last_restart }
    }

    /// `3 (2m ago)`, or the bare count when nothing restarted.
    pub fn restarts(&self, now: jiff::Timestamp) -> String {
        match self.last_restart.filter(|_| self.restart_count > 0) {
            Some(t) => {
                format!("{} ({} ago)", self.restart_count, human_duration((now - t).get_seconds()))
            }
            None => self.restart_count.to_string(),
        }
    }
}

fn containers_images(tpl: &Value) -> (String, String) {
    let cs = tpl["spec"]["containers"].as_array().cloned().unwrap_or_default();
    (
        cs.iter().map(|c| s(&c["name"])).collect::<Vec<_>>().join(","),
        cs.iter().map(|c| s(&c["image"])).collect::<Vec<_>>().join(","),
    )
}

/// kubectl's `FormatLabelSelector`: `<none>` for no selector.
fn selector(sel: &Value) -> String {
    let typed = serde_json::from_value(sel.clone()).ok();
    crate::validation::selector::format_label_selector(typed.as_ref())
}
