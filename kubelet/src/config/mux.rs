//! The pod config mux: merges each source's full pod set into per-source updates, as upstream's
//! `podStorage.Merge`, and tracks which sources have been seen and handled (housekeeping waits).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use api::keys;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Op, PodUpdate, Source, SourceSet};

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

/// Runs the mux until every source has hung up or `stop` fires.
pub async fn run(
    mut sets: mpsc::Receiver<SourceSet>,
    updates: mpsc::Sender<PodUpdate>,
    ready: Arc<SourcesReady>,
    stop: CancellationToken,
) {
    let mut config = PodConfig::default();
    loop {
        let set = tokio::select! {
            () = stop.cancelled() => return,
            set = sets.recv() => match set { Some(s) => s, None => return },
        };
        let source = set.source;
        for update in config.merge(set, SystemTime::now()) {
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
    fn sources_are_ready_once_each_has_delivered() {
        let r = SourcesReady::new([Source::File, Source::Api]);
        assert!(!r.all_ready());
        r.mark(Source::File);
        assert!(!r.all_ready());
        r.mark(Source::Api);
        assert!(r.all_ready());
    }
}
