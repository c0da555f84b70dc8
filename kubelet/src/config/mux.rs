//! The pod config mux: merges each source's full pod set into per-source updates, as upstream's
//! `podStorage.Merge`, and tracks which sources have been seen and handled (housekeeping waits).
//!
//! A pod's full name (namespace and name) belongs to one source at a time: the first to declare
//! it. A pod of another source with that name is withheld, with upstream's duplicate-name
//! warning (an event and a log line, once), and runs once the owner lets the name go — as the
//! file source treats two files declaring one pod (upstream merges each source alone, and two
//! sources' pods of one name collide in its pod manager).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use api::keys;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Op, PodUpdate, Source, SourceSet};
use crate::events::{ObjectRef, Recorder};

/// Annotations the kubelet itself sets; a change in them is not a change of the pod.
const LOCAL_ANNOTATIONS: [&str; 3] = [keys::CONFIG_SOURCE, keys::CONFIG_SEEN, keys::CONFIG_MIRROR];

/// Which sources have delivered their first set (marked by the mux, after it has queued the
/// set's updates), and whether the sync loop has since handled those updates. Until it has, the
/// kubelet must not treat runtime pods or mirror pods that no source has claimed as orphans.
#[derive(Debug)]
pub struct SourcesReady {
    expected: HashSet<Source>,
    seen: Mutex<HashSet<Source>>,
    handled: AtomicBool,
}

impl SourcesReady {
    pub fn new(expected: impl IntoIterator<Item = Source>) -> Self {
        Self {
            expected: expected.into_iter().collect(),
            seen: Mutex::default(),
            handled: AtomicBool::new(false),
        }
    }

    pub(crate) fn mark(&self, source: Source) {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).insert(source);
    }

    /// Every source has delivered its first set to the mux.
    pub fn all_ready(&self) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        self.expected.iter().all(|s| seen.contains(s))
    }

    /// Called by the sync loop once it has handled every source's first pods.
    pub(crate) fn mark_handled(&self) {
        self.handled.store(true, Ordering::Release);
    }

    /// Every source's first pods have been handled by the sync loop: a pod no source wants is
    /// now known to be an orphan.
    pub fn pods_handled(&self) -> bool {
        self.handled.load(Ordering::Acquire)
    }
}

/// The merged desired pods of every source, by UID.
#[derive(Debug, Default)]
pub struct PodConfig {
    sources: BTreeMap<Source, BTreeMap<String, Arc<Pod>>>,
    /// Each source's last complete set, withheld pods included.
    wanted: BTreeMap<Source, Vec<Pod>>,
    /// Which source holds each full name.
    owners: HashMap<(String, String), Source>,
    /// The pods withheld now, by source and UID, so each is reported once.
    withheld: HashSet<(Source, String)>,
}

/// A pod left out because another source declared its name first.
#[derive(Debug, Clone, PartialEq)]
pub struct Withheld {
    pub source: Source,
    pub pod: Pod,
    pub owner: Source,
}

impl Withheld {
    /// Upstream's duplicate-name warning (`format.Pod`: `name_namespace(uid)`).
    pub fn message(&self) -> String {
        let m = &self.pod.metadata;
        let name = m.name.as_deref().unwrap_or_default();
        format!(
            "Error validating pod {name}_{}({}) from {} due to duplicate pod name {name:?}, ignoring (the {} source declares it)",
            m.namespace.as_deref().unwrap_or_default(),
            m.uid.as_deref().unwrap_or_default(),
            self.source.as_str(),
            self.owner.as_str(),
        )
    }
}

fn full_name(pod: &Pod) -> (String, String) {
    let m = &pod.metadata;
    (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default())
}

fn semantic_annotations(pod: &Pod) -> BTreeMap<&str, &str> {
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !LOCAL_ANNOTATIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Upstream's `podsDifferSemantically`: spec, labels, non-local annotations, deletion and owners.
fn differs(a: &Pod, b: &Pod) -> bool {
    let (ma, mb) = (&a.metadata, &b.metadata);
    a.spec != b.spec
        || ma.labels != mb.labels
        || semantic_annotations(a) != semantic_annotations(b)
        || ma.deletion_timestamp != mb.deletion_timestamp
        || ma.deletion_grace_period_seconds != mb.deletion_grace_period_seconds
        || ma.owner_references != mb.owner_references
}

/// `2006-01-02T15:04:05.000000000Z`, the layout of `kubernetes.io/config.seen`.
pub fn seen_timestamp(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

impl PodConfig {
    /// Merges a source's complete set; returns the updates in upstream's order: removes, adds,
    /// updates, deletes, reconciles.
    pub fn merge(&mut self, set: SourceSet, now: SystemTime) -> Vec<PodUpdate> {
        self.merge_reporting(set, now).0
    }

    /// [`PodConfig::merge`], and the pods newly withheld because another source holds their
    /// name. A name let go passes to a withheld pod: its source gets the updates too.
    pub fn merge_reporting(
        &mut self,
        set: SourceSet,
        now: SystemTime,
    ) -> (Vec<PodUpdate>, Vec<Withheld>) {
        let merged = set.source;
        self.wanted.insert(merged, set.pods);
        let wanted = &self.wanted;
        self.owners.retain(|key, owner| {
            wanted.get(owner).is_some_and(|pods| pods.iter().any(|p| full_name(p) == *key))
        });
        // Names nobody holds: the other sources' withheld pods were there first.
        let order: Vec<Source> =
            wanted.keys().copied().filter(|s| *s != merged).chain([merged]).collect();
        for source in &order {
            for pod in &wanted[source] {
                self.owners.entry(full_name(pod)).or_insert(*source);
            }
        }
        let mut updates = Vec::new();
        let mut newly_withheld = Vec::new();
        let mut withheld_now = HashSet::new();
        let sources: Vec<Source> = self.wanted.keys().copied().collect();
        for source in sources {
            let (mut keep, mut out) = (Vec::new(), Vec::new());
            for pod in &self.wanted[&source] {
                match self.owners.get(&full_name(pod)) {
                    Some(owner) if *owner != source => out.push((pod.clone(), *owner)),
                    _ => keep.push(pod.clone()),
                }
            }
            for (pod, owner) in out {
                let key = (source, pod.metadata.uid.clone().unwrap_or_default());
                if !self.withheld.contains(&key) {
                    newly_withheld.push(Withheld { source, pod, owner });
                }
                withheld_now.insert(key);
            }
            updates.extend(self.merge_one(SourceSet { source, pods: keep }, now));
        }
        self.withheld = withheld_now;
        (updates, newly_withheld)
    }

    fn merge_one(&mut self, set: SourceSet, now: SystemTime) -> Vec<PodUpdate> {
        let source = set.source;
        let old = self.sources.remove(&source).unwrap_or_default();
        let mut current = BTreeMap::new();
        let (mut adds, mut updates, mut deletes, mut reconciles) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for mut pod in set.pods {
            let Some(uid) = pod.metadata.uid.clone().filter(|u| !u.is_empty()) else {
                tracing::warn!(pod = ?pod.metadata.name, source = source.as_str(), "pod without a UID ignored");
                continue;
            };
            if current.contains_key(&uid) {
                continue;
            }
            let annotations = pod.metadata.annotations.get_or_insert_with(Default::default);
            annotations.insert(keys::CONFIG_SOURCE.into(), source.as_str().into());
            match old.get(&uid) {
                Some(prev) => {
                    let seen = prev
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(keys::CONFIG_SEEN))
                        .cloned();
                    annotations.insert(
                        keys::CONFIG_SEEN.into(),
                        seen.unwrap_or_else(|| seen_timestamp(now)),
                    );
                    if differs(prev, &pod) {
                        let pod = Arc::new(pod);
                        if pod.metadata.deletion_timestamp.is_some()
                            && prev.metadata.deletion_timestamp.is_none()
                        {
                            deletes.push(pod.clone());
                        } else {
                            updates.push(pod.clone());
                        }
                        current.insert(uid, pod);
                    } else if prev.status != pod.status {
                        let pod = Arc::new(pod);
                        reconciles.push(pod.clone());
                        current.insert(uid, pod);
                    } else {
                        current.insert(uid, prev.clone());
                    }
                }
                None => {
                    annotations.insert(keys::CONFIG_SEEN.into(), seen_timestamp(now));
                    let pod = Arc::new(pod);
                    adds.push(pod.clone());
                    current.insert(uid, pod);
                }
            }
        }
        let removes: Vec<Arc<Pod>> =
            old.into_iter().filter(|(uid, _)| !current.contains_key(uid)).map(|(_, p)| p).collect();
        self.sources.insert(source, current);
        [
            (Op::Remove, removes),
            (Op::Add, adds),
            (Op::Update, updates),
            (Op::Delete, deletes),
            (Op::Reconcile, reconciles),
        ]
        .into_iter()
        .filter(|(_, pods)| !pods.is_empty())
        .map(|(op, pods)| PodUpdate { op, source, pods })
        .collect()
    }
}

/// Runs the mux until every source has hung up or `stop` fires; a withheld pod is a Warning
/// event (upstream's `FailedValidation`) and a log line.
pub async fn run(
    mut sets: mpsc::Receiver<SourceSet>,
    updates: mpsc::Sender<PodUpdate>,
    ready: Arc<SourcesReady>,
    recorder: Recorder,
    stop: CancellationToken,
) {
    let mut config = PodConfig::default();
    loop {
        let set = tokio::select! {
            () = stop.cancelled() => return,
            set = sets.recv() => match set { Some(s) => s, None => return },
        };
        let source = set.source;
        let (merged, withheld) = config.merge_reporting(set, SystemTime::now());
        for w in withheld {
            let message = w.message();
            tracing::warn!(source = w.source.as_str(), "{message}");
            recorder.warning(&ObjectRef::pod(&w.pod), "FailedValidation", message);
        }
        for update in merged {
            if updates.send(update).await.is_err() {
                return;
            }
        }
        ready.mark(source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, image: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }))
        .unwrap()
    }

    fn ops(updates: &[PodUpdate]) -> Vec<(Op, Vec<String>)> {
        updates
            .iter()
            .map(|u| (u.op, u.pods.iter().map(|p| p.metadata.uid.clone().unwrap()).collect()))
            .collect()
    }

    fn set(pods: Vec<Pod>) -> SourceSet {
        SourceSet { source: Source::File, pods }
    }

    #[test]
    fn merges_sets_into_adds_updates_removes_and_reconciles() {
        let mut c = PodConfig::default();
        let t0 = SystemTime::UNIX_EPOCH;
        let first = c.merge(set(vec![pod("a", "x:1"), pod("b", "x:1")]), t0);
        assert_eq!(ops(&first), [(Op::Add, vec!["a".to_string(), "b".to_string()])]);
        let seen =
            first[0].pods[0].metadata.annotations.as_ref().unwrap()[keys::CONFIG_SEEN].clone();
        assert_eq!(seen, "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            first[0].pods[0].metadata.annotations.as_ref().unwrap()[keys::CONFIG_SOURCE],
            "file"
        );

        // The same set again: nothing.
        assert!(c.merge(set(vec![pod("a", "x:1"), pod("b", "x:1")]), t0).is_empty());

        // b changes spec, a goes, c arrives, and a status-only change on b afterwards.
        let later = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(5);
        let u = c.merge(set(vec![pod("b", "x:2"), pod("c", "x:1")]), later);
        assert_eq!(
            ops(&u),
            [
                (Op::Remove, vec!["a".to_string()]),
                (Op::Add, vec!["c".to_string()]),
                (Op::Update, vec!["b".to_string()])
            ]
        );
        let b = &u[2].pods[0];
        assert_eq!(
            b.metadata.annotations.as_ref().unwrap()[keys::CONFIG_SEEN],
            seen,
            "config.seen is kept on updates"
        );

        let mut b2 = pod("b", "x:2");
        b2.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        let u = c.merge(set(vec![b2, pod("c", "x:1")]), later);
        assert_eq!(ops(&u), [(Op::Reconcile, vec!["b".to_string()])]);
    }

    #[test]
    fn local_annotations_do_not_make_an_update_and_deletion_is_a_delete() {
        let mut c = PodConfig::default();
        c.merge(set(vec![pod("a", "x:1")]), SystemTime::now());
        let mut a = pod("a", "x:1");
        a.metadata.annotations =
            Some([(keys::CONFIG_MIRROR.to_string(), "h".to_string())].into_iter().collect());
        assert!(c.merge(set(vec![a.clone()]), SystemTime::now()).is_empty());
        a.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert_eq!(
            ops(&c.merge(set(vec![a]), SystemTime::now())),
            [(Op::Delete, vec!["a".to_string()])]
        );
    }

    #[test]
    fn a_name_belongs_to_the_first_source_and_passes_on_when_let_go() {
        let named = |uid: &str, name: &str| {
            let mut p = pod(uid, "x:1");
            p.metadata.name = Some(name.into());
            p
        };
        let from = |source, pods| SourceSet { source, pods };
        let t = SystemTime::UNIX_EPOCH;
        let mut c = PodConfig::default();
        let (u, withheld) = c.merge_reporting(from(Source::File, vec![named("f", "web-n")]), t);
        assert_eq!(ops(&u), [(Op::Add, vec!["f".to_string()])]);
        assert!(withheld.is_empty());

        // The URL declares the same name, and another: only the other runs.
        let http = vec![named("h", "web-n"), named("h2", "other-n")];
        let (u, withheld) = c.merge_reporting(from(Source::Http, http.clone()), t);
        assert_eq!(ops(&u), [(Op::Add, vec!["h2".to_string()])]);
        assert_eq!(u[0].source, Source::Http);
        assert_eq!(withheld.len(), 1);
        assert_eq!(
            withheld[0].message(),
            "Error validating pod web-n_default(h) from http due to duplicate pod name \"web-n\", ignoring (the file source declares it)"
        );
        // Reported once, not at every fetch.
        let (u, withheld) = c.merge_reporting(from(Source::Http, http.clone()), t);
        assert!(u.is_empty() && withheld.is_empty());

        // The file goes: the URL's pod takes the name.
        let (u, _) = c.merge_reporting(from(Source::File, Vec::new()), t);
        let by_source: Vec<(Source, Op, Vec<String>)> = u
            .iter()
            .map(|u| {
                (u.source, u.op, u.pods.iter().filter_map(|p| p.metadata.uid.clone()).collect())
            })
            .collect();
        assert_eq!(
            by_source,
            [
                (Source::File, Op::Remove, vec!["f".to_string()]),
                (Source::Http, Op::Add, vec!["h".to_string()])
            ]
        );
        // Now the file comes back: the URL holds the name.
        let (u, withheld) = c.merge_reporting(from(Source::File, vec![named("f", "web-n")]), t);
        assert!(u.is_empty());
        assert_eq!((withheld[0].source, withheld[0].owner), (Source::File, Source::Http));
    }

    #[test]
    fn sources_are_ready_once_each_has_delivered() {
        let r = SourcesReady::new([Source::File, Source::Api]);
        assert!(!r.all_ready());
        r.mark(Source::File);
        assert!(!r.all_ready());
        r.mark(Source::Api);
        assert!(r.all_ready());
    }
}
