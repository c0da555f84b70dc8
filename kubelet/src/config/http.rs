//! The manifest URL source (`staticPodURL`, `staticPodURLHeader`, `httpCheckFrequency`), as
//! upstream's `pkg/kubelet/config/http.go`: every period the URL is fetched
//! ([`fetch`]: the headers, a 10 s timeout), and its answer — one `v1` `Pod`, or a `v1`
//! `PodList` or `List` of pods, YAML or JSON — decoded with the manifest files' rules
//! ([`manifest::from_value`]): defaults, the `<name>-<node>` name, a UID from the content,
//! node and URL, `kubernetes.io/config.source: http`, validation.
//!
//! As upstream:
//! - an answer unchanged since the last fetch is not decoded again;
//! - a failed fetch (no connection, a timeout, a status other than 200) or an answer that does
//!   not decode keeps the last good set, and the source counts as seen (SourcesReady) only
//!   after its first answer: until then the kubelet treats no pod as an orphan;
//! - an empty answer is an empty set (its pods stop), and reported;
//! - the first failures are logged as warnings, later ones at debug level.
//!
//! Beyond upstream: the answer is read up to [`fetch::MAX_BODY_BYTES`]; each problem is
//! reported in `/manifests` (the URL as the file, with the pods it still runs) and as an event
//! once per change, not at every fetch; two pods of one answer with the same name: the first
//! wins, the other is reported as a duplicate.

pub mod fetch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::dir::{ManifestReport, ManifestState};
use super::identity::Identities;
use super::manifest::{self, StaticPod};
use super::{Source, SourceSet, syntax};
use crate::events::{ObjectRef, Recorder};
use crate::runtime::adoption::RunningPod;

/// The event reason of a manifest URL that gives no usable answer (ours).
pub const FAILED: &str = "FailedManifestURL";

/// What the answer held: its pods (first of a name wins) and the duplicates left out.
#[derive(Debug, Default, PartialEq)]
struct Decoded {
    pods: Vec<StaticPod>,
    /// (pod name, why it was left out).
    duplicates: Vec<(String, String)>,
}

/// The pods of one answer, or why it holds none usable (naming the URL, and for a list's item
/// its index).
fn decode(url: &str, body: &[u8], node_name: &str) -> Result<Decoded, String> {
    let text = std::str::from_utf8(body).map_err(|_| format!("{url}: not valid UTF-8"))?;
    let text = syntax::strip_bom(text);
    let value = if text.trim_start().starts_with('{') {
        syntax::json(text).map_err(|e| format!("{url}: {e}"))?
    } else {
        let mut documents = syntax::yaml_documents(text);
        let first = documents.next().unwrap_or(Ok(serde_json::Value::Null));
        let first = first.map_err(|e| format!("{url}: {e}"))?;
        if documents.next().is_some() {
            return Err(format!("{url}: holds more than one YAML document; use a v1 List"));
        }
        first
    };
    let field = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or_default();
    let (api_version, kind) = (field("apiVersion").to_string(), field("kind").to_string());
    let file = Path::new(url);
    let pods: Vec<StaticPod> = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Pod") => vec![
            manifest::from_value(file, value, node_name, Source::Http)
                .map_err(|e| e.to_string())?,
        ],
        ("v1", "PodList" | "List") => {
            let items = match value.get("items") {
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(serde_json::Value::Array(items)) => items.clone(),
                Some(_) => return Err(format!("{url}: items: expected a list of pods")),
            };
            let prefix = format!("{url}: ");
            let mut pods = Vec::new();
            for (i, item) in items.into_iter().enumerate() {
                let pod =
                    manifest::from_value(file, item, node_name, Source::Http).map_err(|e| {
                        let message = e.to_string();
                        let rest = message.strip_prefix(&prefix).unwrap_or(&message);
                        format!("{url}: items[{i}]: {rest}")
                    })?;
                pods.push(pod);
            }
            pods
        }
        _ => {
            return Err(format!(
                "{url}: expected apiVersion v1 and kind Pod, PodList or List, found {api_version:?} {kind:?}"
            ));
        }
    };
    let mut out = Decoded::default();
    let mut owners: HashMap<(String, String), usize> = HashMap::new();
    for (i, sp) in pods.into_iter().enumerate() {
        let m = &sp.pod.metadata;
        let key = (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default());
        if let Some(first) = owners.get(&key) {
            let reason = format!("pod {}/{} is already declared by items[{first}]", key.0, key.1);
            out.duplicates.push((key.1, reason));
            continue;
        }
        owners.insert(key, i);
        out.pods.push(sp);
    }
    Ok(out)
}

/// The URL's state: the last answer and what it gave, the last fetch's problem.
#[derive(Debug)]
pub struct UrlState {
    url: String,
    node_name: String,
    recorder: Recorder,
    /// The last answer (a repeat is not decoded again).
    last_body: Option<Vec<u8>>,
    /// The pods of the last good answer; `None` until there is one.
    pods: Option<Vec<StaticPod>>,
    duplicates: Vec<(String, String)>,
    /// Why the last answer gives no pods (it does not decode, or is empty).
    answer_error: Option<String>,
    /// Why the last fetch gave no answer.
    fetch_error: Option<String>,
    /// Fetches failed in a row (the first three are warned about).
    failures: u32,
    /// The problem last recorded as an event, so each is recorded once.
    recorded: Option<String>,
    /// The UIDs its pods run under, by `<url>#<namespace>/<name>` ([`Identities`]).
    identities: Identities,
}

impl UrlState {
    pub fn new(url: String, node_name: String, recorder: Recorder) -> Self {
        Self {
            url,
            node_name,
            recorder,
            last_body: None,
            pods: None,
            duplicates: Vec::new(),
            answer_error: None,
            fetch_error: None,
            failures: 0,
            recorded: None,
            identities: Identities::default(),
        }
    }

    /// As [`Self::new`], adopting the URL's pods the runtime already runs that match.
    pub fn adopting(
        url: String,
        node_name: String,
        recorder: Recorder,
        running: Vec<RunningPod>,
    ) -> Self {
        Self { identities: Identities::new(running), ..Self::new(url, node_name, recorder) }
    }

    /// Takes one fetch's outcome.
    pub fn apply(&mut self, fetched: Result<Vec<u8>, fetch::FetchError>) {
        match fetched {
            Err(e) => self.fetch_error = Some(e.to_string()),
            Ok(body) => {
                self.fetch_error = None;
                if body.is_empty() {
                    // Upstream: an empty answer is an empty set, and an error.
                    self.pods = Some(Vec::new());
                    self.duplicates.clear();
                    self.answer_error =
                        Some(format!("zero-length data received from {}", self.url));
                    self.last_body = None;
                } else if self.last_body.as_ref() != Some(&body) {
                    self.answer(&body);
                    self.last_body = Some(body);
                }
            }
        }
        self.log();
    }

    fn answer(&mut self, body: &[u8]) {
        match decode(&self.url, body, &self.node_name) {
            Ok(decoded) => {
                let at = ObjectRef::file(Path::new(&self.url));
                for sp in &decoded.pods {
                    for field in &sp.unknown_fields {
                        let message = format!("unknown field {field:?} ignored");
                        self.recorder.warning(&at, "UnknownField", message);
                    }
                }
                self.pods = Some(decoded.pods);
                self.duplicates = decoded.duplicates;
                self.answer_error = None;
            }
            Err(e) => self.answer_error = Some(e),
        }
    }

    /// The current problem, if any.
    fn problem(&self) -> Option<&String> {
        self.fetch_error.as_ref().or(self.answer_error.as_ref())
    }

    /// Upstream's logging (warnings for the first three failures in a row), and an event per
    /// new problem.
    fn log(&mut self) {
        let problem = self.problem().cloned();
        match &problem {
            Some(e) => {
                if self.failures < 3 {
                    tracing::warn!(url = %self.url, "Failed to read pods from URL: {e}");
                } else if self.failures == 3 {
                    tracing::warn!(url = %self.url, "Failed to read pods from URL. Dropping verbosity of this message to V(4): {e}");
                } else {
                    tracing::debug!(url = %self.url, "Failed to read pods from URL: {e}");
                }
                self.failures += 1;
            }
            None if self.failures > 0 => {
                tracing::info!(url = %self.url, "Successfully read pods from URL.");
                self.failures = 0;
            }
            None => {}
        }
        if problem != self.recorded {
            let at = ObjectRef::file(Path::new(&self.url));
            match &problem {
                Some(e) => {
                    let kept = self.pods.as_ref().is_some_and(|p| !p.is_empty());
                    let note = if kept { " (its previous pods keep running)" } else { "" };
                    self.recorder.warning(&at, FAILED, format!("{e}{note}"));
                }
                None => self.recorder.normal(&at, "ManifestURLRead", "pods read from the URL"),
            }
            self.recorded = problem;
        }
    }

    /// The pods to run, once the URL has answered, under the UIDs [`Identities`] gives them
    /// (kept across in-place edits, adopted at start), as the directory's.
    pub fn pods(&mut self) -> Option<Vec<Pod>> {
        let key = |url: &str, p: &Pod| {
            let m = &p.metadata;
            let ns = m.namespace.as_deref().unwrap_or("default");
            PathBuf::from(format!("{url}#{ns}/{}", m.name.as_deref().unwrap_or_default()))
        };
        let pods = self.pods.as_ref()?;
        let keys: Vec<PathBuf> = pods.iter().map(|sp| key(&self.url, &sp.pod)).collect();
        self.identities.retain(|k| keys.iter().any(|p| p == k));
        let mut out = Vec::with_capacity(pods.len());
        for (sp, k) in pods.iter().zip(&keys) {
            let mut pod = sp.pod.clone();
            self.identities.resolve(k, &mut pod);
            out.push(pod);
        }
        Some(out)
    }

    /// The URL's lines in `/manifests`: one per pod it gives (rejected, with the problem, while
    /// a problem keeps the previous pods), the problem alone when there are none, and the
    /// duplicates.
    pub fn reports(&self) -> Vec<ManifestReport> {
        let url = Path::new(&self.url);
        let problem = self.problem();
        let state =
            if problem.is_some() { ManifestState::Rejected } else { ManifestState::Accepted };
        let mut out: Vec<ManifestReport> = self
            .pods
            .iter()
            .flatten()
            .map(|sp| ManifestReport {
                pod: sp.pod.metadata.name.clone(),
                reason: problem.cloned(),
                running_previous_version: problem.is_some(),
                ..ManifestReport::new(url, state.clone())
            })
            .collect();
        if out.is_empty() && (problem.is_some() || self.pods.is_some()) {
            out.push(ManifestReport {
                reason: problem.cloned(),
                ..ManifestReport::new(url, state)
            });
        }
        out.extend(self.duplicates.iter().map(|(pod, reason)| ManifestReport {
            pod: Some(pod.clone()),
            reason: Some(reason.clone()),
            ..ManifestReport::new(url, ManifestState::Duplicate)
        }));
        out
    }
}

/// Runs the manifest URL source: a fetch now and every `period`, sending the pod set whenever
/// it changes (the first answer always), until `stop`.
#[derive(Debug)]
pub struct HttpSource {
    pub url: String,
    /// `staticPodURLHeader`, in order: a name once per value.
    pub headers: Vec<(String, String)>,
    pub node_name: String,
    pub period: Duration,
    pub timeout: Duration,
    pub recorder: Recorder,
    /// The URL-sourced pods the runtime ran at start, which may be adopted.
    pub running: Vec<RunningPod>,
}

impl HttpSource {
    pub async fn run(
        self,
        out: mpsc::Sender<SourceSet>,
        report: watch::Sender<Vec<ManifestReport>>,
        stop: CancellationToken,
    ) {
        tracing::info!(url = %self.url, "Watching URL");
        let mut state =
            UrlState::adopting(self.url.clone(), self.node_name, self.recorder, self.running);
        let mut last_sent: Option<Vec<Pod>> = None;
        let mut ticker = tokio::time::interval(self.period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let fetch = fetch::get(&self.url, &self.headers, self.timeout, fetch::MAX_BODY_BYTES);
            let fetched = tokio::select! {
                () = stop.cancelled() => return,
                fetched = fetch => fetched,
            };
            state.apply(fetched);
            let reports = state.reports();
            report.send_if_modified(|r| {
                let changed = *r != reports;
                *r = reports;
                changed
            });
            if let Some(pods) = state.pods()
                && last_sent.as_ref() != Some(&pods)
            {
                last_sent = Some(pods.clone());
                if out.send(SourceSet { source: Source::Http, pods }).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
