//! Which pods of a node `drain` deletes, as kubectl's `pkg/drain/filters.go` decides it, pure:
//! the pods in the server's order through kubectl's filters in kubectl's order — pods deleted
//! long enough ago skipped (`--skip-wait-for-delete-timeout`), DaemonSet pods refused or left
//! alone (`--ignore-daemonsets`), mirror pods skipped, pods with emptyDir refused
//! (`--delete-emptydir-data`), pods without a controller refused (`--force`); finished pods
//! always go. The first filter that keeps a pod decides; otherwise the last one's word stands.
//! The DaemonSets the pods name are looked up by the caller ([`daemon_set_of`]).

use std::collections::BTreeMap;

use serde_json::Value;

const DAEMON_SET_FATAL: &str = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)";
const DAEMON_SET_WARNING: &str = "ignoring DaemonSet-managed Pods";
const LOCAL_STORAGE_FATAL: &str =
    "Pods with local storage (use --delete-emptydir-data to override)";
const LOCAL_STORAGE_WARNING: &str = "deleting Pods with local storage";
// kubectl v1.35's words: its refusal reads `cannot delete cannot delete Pods that declare no
// controller …` (the repetition went away after v1.35).
const UNMANAGED_FATAL: &str =
    "cannot delete Pods that declare no controller (use --force to override)";
const UNMANAGED_WARNING: &str = "deleting Pods that declare no controller";
const MIRROR: &str = "kubernetes.io/config.mirror";

/// The flags the filters read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    pub force: bool,
    pub ignore_daemonsets: bool,
    pub delete_emptydir_data: bool,
    pub skip_wait_for_delete_timeout_seconds: i64,
}

/// What the server said of a pod's DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DaemonSet {
    Found,
    /// Not found; the server's message.
    Missing(String),
    /// Another error; its message.
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Okay,
    Skip,
    Warning,
    Error,
}

/// A filter's word on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub delete: bool,
    pub reason: Reason,
    /// kubectl's words, or the server's (a DaemonSet lookup that failed).
    pub message: String,
}

impl Status {
    fn okay() -> Self {
        Status { delete: true, reason: Reason::Okay, message: String::new() }
    }

    fn skip() -> Self {
        Status { delete: false, reason: Reason::Skip, message: String::new() }
    }

    fn warning(delete: bool, message: &str) -> Self {
        Status { delete, reason: Reason::Warning, message: message.to_string() }
    }

    fn error(message: &str) -> Self {
        Status { delete: false, reason: Reason::Error, message: message.to_string() }
    }
}

/// Each pod listed with the filters' word on it.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub items: Vec<(Value, Status)>,
}

/// `namespace/name` of a pod.
pub fn key(pod: &Value) -> String {
    let meta = &pod["metadata"];
    format!(
        "{}/{}",
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default()
    )
}

/// `(pods by message)` in the order the messages first appear (kubectl's map has none).
fn grouped(items: &[(Value, Status)], reason: Reason) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (pod, status) in items.iter().filter(|(_, s)| s.reason == reason) {
        match groups.iter_mut().find(|(m, _)| *m == status.message) {
            Some((_, pods)) => pods.push(key(pod)),
            None => groups.push((status.message.clone(), vec![key(pod)])),
        }
    }
    groups
}

impl Plan {
    /// The pods to delete or evict.
    pub fn pods(&self) -> Vec<Value> {
        self.items.iter().filter(|(_, s)| s.delete).map(|(p, _)| p.clone()).collect()
    }

    /// kubectl's one warning line: `message: ns/a, ns/b; message: …`; empty when none.
    pub fn warnings(&self) -> String {
        grouped(&self.items, Reason::Warning)
            .into_iter()
            .map(|(m, pods)| format!("{m}: {}", pods.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// kubectl's refusals: `cannot delete <message>: ns/a, ns/b`, one per message.
    pub fn errors(&self) -> Vec<String> {
        grouped(&self.items, Reason::Error)
            .into_iter()
            .map(|(m, pods)| {
                let m = if m.is_empty() { "unexpected error".to_string() } else { m };
                format!("cannot delete {m}: {}", pods.join(", "))
            })
            .collect()
    }
}

fn finished(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// The pod's controller reference, if it has one.
fn controller(pod: &Value) -> Option<&Value> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"].as_bool() == Some(true))
}

/// The DaemonSet (`namespace`, `name`) the filters need to look up for `pod`: its controller,
/// when that is an `apps/v1` DaemonSet and the pod is not finished.
pub fn daemon_set_of(pod: &Value) -> Option<(String, String)> {
    let c = controller(pod)?;
    let daemon = c["kind"] == "DaemonSet" && c["apiVersion"] == "apps/v1";
    (daemon && !finished(pod)).then(|| {
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        (ns, c["name"].as_str().unwrap_or_default().to_string())
    })
}

/// Whether the pod was marked for deletion more than `skip` seconds before `now` (`skip` > 0).
pub fn deleted_long_ago(pod: &Value, skip: i64, now: jiff::Timestamp) -> bool {
    let Some(since) = pod["metadata"]["deletionTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    else {
        return false;
    };
    // Go's `int(d.Seconds())`: whole seconds, truncated.
    let seconds = now.duration_since(since).as_secs();
    skip > 0 && seconds > skip
}

fn skip_deleted(pod: &Value, o: &Options, now: jiff::Timestamp) -> Status {
    if deleted_long_ago(pod, o.skip_wait_for_delete_timeout_seconds, now) {
        Status::skip()
    } else {
        Status::okay()
    }
}

fn daemon_set(pod: &Value, o: &Options, found: &BTreeMap<(String, String), DaemonSet>) -> Status {
    let Some(ds) = daemon_set_of(pod) else { return Status::okay() };
    match found.get(&ds) {
        Some(DaemonSet::Found) if o.ignore_daemonsets => Status::warning(false, DAEMON_SET_WARNING),
        Some(DaemonSet::Found) => Status::error(DAEMON_SET_FATAL),
        // An orphan goes with --force.
        Some(DaemonSet::Missing(m)) if o.force => Status::warning(true, m),
        Some(DaemonSet::Missing(m) | DaemonSet::Failed(m)) => Status::error(m),
        None => Status::error(""),
    }
}

fn mirror(pod: &Value) -> Status {
    if pod["metadata"]["annotations"].get(MIRROR).is_some() {
        Status::skip()
    } else {
        Status::okay()
    }
}

fn local_storage(pod: &Value, o: &Options) -> Status {
    let volumes = pod["spec"]["volumes"].as_array();
    let empty_dir = volumes.into_iter().flatten().any(|v| v.get("emptyDir").is_some());
    if !empty_dir || finished(pod) {
        return Status::okay();
    }
    if !o.delete_emptydir_data {
        return Status::error(LOCAL_STORAGE_FATAL);
    }
    Status::warning(true, LOCAL_STORAGE_WARNING)
}

fn unreplicated(pod: &Value, o: &Options) -> Status {
    if finished(pod) || controller(pod).is_some() {
        return Status::okay();
    }
    if o.force { Status::warning(true, UNMANAGED_WARNING) } else { Status::error(UNMANAGED_FATAL) }
}

/// kubectl's `filterPods`: each pod through the filters until one keeps it.
pub fn filter(
    pods: Vec<Value>,
    daemon_sets: &BTreeMap<(String, String), DaemonSet>,
    o: &Options,
    now: jiff::Timestamp,
) -> Plan {
    let items = pods
        .into_iter()
        .map(|pod| {
            let filters: [&dyn Fn(&Value) -> Status; 5] = [
                &|p| skip_deleted(p, o, now),
                &|p| daemon_set(p, o, daemon_sets),
                &mirror,
                &|p| local_storage(p, o),
                &|p| unreplicated(p, o),
            ];
            let mut status = Status::okay();
            for f in filters {
                status = f(&pod);
                if !status.delete {
                    break;
                }
            }
            (pod, status)
        })
        .collect();
    Plan { items }
}

#[cfg(test)]
mod tests;
