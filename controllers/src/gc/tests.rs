//! The garbage collector against an in-memory apiserver that deletes as apiserver-lite does
//! (Background removes, Foreground/Orphan mark and add their finalizer, removing the last
//! finalizer of a deleted object removes it) and whose "watch" the tests pump into the graph.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::metrics::QueueMetrics;

type Objects = BTreeMap<(String, String, String), (ObjRef, ObjectMeta)>;

#[derive(Default)]
struct Fake {
    objects: Mutex<Objects>,
    events: Mutex<Vec<Event>>,
    log: Mutex<Vec<String>>,
    rv: Mutex<u64>,
}

fn id(r: &ObjRef) -> (String, String, String) {
    (r.kind.clone(), r.namespace.clone(), r.name.clone())
}

impl Fake {
    fn store(&self, r: &ObjRef, mut meta: ObjectMeta) {
        let mut rv = self.rv.lock().unwrap();
        *rv += 1;
        meta.resource_version = Some(rv.to_string());
        if meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty) {
            self.objects.lock().unwrap().remove(&id(r));
            self.events.lock().unwrap().push(Event::Delete { identity: r.clone() });
            self.log.lock().unwrap().push(format!("gone {} {}", r.kind, r.name));
            return;
        }
        self.objects.lock().unwrap().insert(id(r), (r.clone(), meta.clone()));
        self.events
            .lock()
            .unwrap()
            .push(Event::Upsert { identity: r.clone(), meta: Box::new(meta) });
    }

    fn meta(&self, kind: &str, name: &str) -> Option<ObjectMeta> {
        self.objects
            .lock()
            .unwrap()
            .values()
            .find(|(r, _)| r.kind == kind && r.name == name)
            .map(|(_, m)| m.clone())
    }

    /// A user's delete (what apiserver-lite's registry does).
    fn user_delete(&self, kind: &str, name: &str, policy: Propagation) {
        let (r, _) = self
            .objects
            .lock()
            .unwrap()
            .values()
            .find(|(r, _)| r.kind == kind && r.name == name)
            .cloned()
            .unwrap();
        self.apply_delete(&r, policy);
    }

    fn apply_delete(&self, r: &ObjRef, policy: Propagation) {
        let Some((_, mut meta)) = self.objects.lock().unwrap().get(&id(r)).cloned() else { return };
        let fin = match policy {
            Propagation::Background => None,
            Propagation::Foreground => Some(FOREGROUND),
            Propagation::Orphan => Some(ORPHAN),
        };
        if let Some(f) = fin {
            let list = meta.finalizers.get_or_insert_default();
            if !list.iter().any(|x| x == f) {
                list.push(f.to_string());
            }
        }
        meta.deletion_timestamp.get_or_insert(Time(jiff::Timestamp::UNIX_EPOCH));
        self.store(r, meta);
    }
}

impl GcClient for Fake {
    fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        match (api_version, kind) {
            ("apps/v1", "Deployment" | "ReplicaSet") | ("v1", "Pod" | "ConfigMap") => Some(true),
            ("v1", "Node") => Some(false),
            _ => None,
        }
    }

    async fn get(&self, r: &ObjRef) -> Result<Option<ObjectMeta>, GcError> {
        Ok(self.objects.lock().unwrap().get(&id(r)).map(|(_, m)| m.clone()))
    }

    async fn delete(&self, r: &ObjRef, policy: Propagation) -> Result<(), GcError> {
        self.log.lock().unwrap().push(format!("delete {} {} {policy:?}", r.kind, r.name));
        self.apply_delete(r, policy);
        Ok(())
    }

    async fn patch_meta(&self, r: &ObjRef, patch: serde_json::Value) -> Result<(), GcError> {
        let Some((_, meta)) = self.objects.lock().unwrap().get(&id(r)).cloned() else {
            return Ok(());
        };
        if patch["resourceVersion"].as_str() != meta.resource_version.as_deref() {
            return Err(GcError::Conflict { verb: "patch", object: r.to_string() });
        }
        let mut v = serde_json::to_value(&meta).unwrap();
        for key in ["ownerReferences", "finalizers"] {
            if let Some(x) = patch.get(key) {
                v[key] = x.clone();
                self.log.lock().unwrap().push(format!("patch {} {} {key}", r.kind, r.name));
            }
        }
        self.store(r, serde_json::from_value(v).unwrap());
        Ok(())
    }
}

struct Harness {
    fake: Arc<Fake>,
    gc: Arc<GarbageCollector<Fake>>,
}

fn obj(api_version: &str, kind: &str, name: &str) -> ObjRef {
    ObjRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: if kind == "Node" { String::new() } else { "ns".into() },
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

fn owner(kind: &str, name: &str, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: if matches!(kind, "Deployment" | "ReplicaSet") { "apps/v1" } else { "v1" }
            .into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(true),
        block_owner_deletion: Some(block),
    }
}

impl Harness {
    fn new() -> Self {
        let fake = Arc::new(Fake::default());
        let gc = Arc::new(GarbageCollector::new(
            fake.clone(),
            WorkQueue::new(DELETE_QUEUE, QueueMetrics::default()),
            WorkQueue::new(ORPHAN_QUEUE, QueueMetrics::default()),
        ));
        Self { fake, gc }
    }

    fn create(&self, r: ObjRef, owners: Vec<OwnerReference>) {
        let meta = ObjectMeta {
            name: Some(r.name.clone()),
            namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
            uid: Some(r.uid.clone()),
            owner_references: (!owners.is_empty()).then_some(owners),
            ..Default::default()
        };
        self.fake.store(&r, meta);
    }

    /// A Deployment `web` → ReplicaSet `web-1` → pods `web-1-a`, `web-1-b`.
    fn deployment(&self) {
        self.create(obj("apps/v1", "Deployment", "web"), vec![]);
        self.create(obj("apps/v1", "ReplicaSet", "web-1"), vec![owner("Deployment", "web", true)]);
        for p in ["web-1-a", "web-1-b"] {
            self.create(obj("v1", "Pod", p), vec![owner("ReplicaSet", "web-1", true)]);
        }
    }

    /// Delivers watch events and runs both queues until nothing is left (bounded); the errors.
    async fn pump(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for _ in 0..1000 {
            let events: Vec<Event> = std::mem::take(&mut *self.fake.events.lock().unwrap());
            let had_events = !events.is_empty();
            for e in events {
                self.gc.observe(e);
            }
            if !self.gc.delete_queue.is_empty() {
                let k = self.gc.delete_queue.get().await.unwrap();
                if let Err(e) = self.gc.attempt_to_delete(&k.name).await {
                    errors.push(e.to_string());
                }
                self.gc.delete_queue.done(&k);
            } else if !self.gc.orphan_queue.is_empty() {
                let k = self.gc.orphan_queue.get().await.unwrap();
                if let Err(e) = self.gc.attempt_to_orphan(&k.name).await {
                    errors.push(e.to_string());
                }
                self.gc.orphan_queue.done(&k);
            } else if !had_events {
                return errors;
            }
        }
        panic!("the collector did not settle");
    }

    fn exists(&self, kind: &str, name: &str) -> bool {
        self.fake.meta(kind, name).is_some()
    }

    fn log(&self) -> Vec<String> {
        self.fake.log.lock().unwrap().clone()
    }
}

fn position(log: &[String], entry: &str) -> usize {
    log.iter().position(|l| l == entry).unwrap_or_else(|| panic!("{entry} not in {log:?}"))
}

#[tokio::test]
async fn background_deletion_removes_the_owner_then_its_dependents() {
    let h = Harness::new();
    h.deployment();
    assert!(h.pump().await.is_empty());
    assert!(h.exists("ReplicaSet", "web-1"), "live owners: nothing is collected");
    h.fake.user_delete("Deployment", "web", Propagation::Background);
    assert!(!h.exists("Deployment", "web"), "the owner goes at once");
    assert!(h.pump().await.is_empty());
    assert!(!h.exists("ReplicaSet", "web-1"));
    assert!(!h.exists("Pod", "web-1-a") && !h.exists("Pod", "web-1-b"));
    let log = h.log();
    assert!(log.contains(&"delete ReplicaSet web-1 Background".to_string()), "{log:?}");
}

#[tokio::test]
async fn foreground_deletion_removes_blocking_dependents_first_then_the_owner() {
    let h = Harness::new();
    h.deployment();
    h.pump().await;
    h.fake.user_delete("Deployment", "web", Propagation::Foreground);
    assert!(h.exists("Deployment", "web"), "held by its foregroundDeletion finalizer");
    assert!(h.pump().await.is_empty());
    assert!(!h.exists("Deployment", "web") && !h.exists("ReplicaSet", "web-1"));
    assert!(!h.exists("Pod", "web-1-a"));
    let log = h.log();
    let rs_fg = position(&log, "delete ReplicaSet web-1 Foreground");
    let pods_gone = position(&log, "gone Pod web-1-a").max(position(&log, "gone Pod web-1-b"));
    let rs_gone = position(&log, "gone ReplicaSet web-1");
    let d_gone = position(&log, "gone Deployment web");
    assert!(rs_fg < pods_gone && pods_gone < rs_gone && rs_gone < d_gone, "{log:?}");
}

#[tokio::test]
async fn a_dependent_that_does_not_block_its_owner_does_not_hold_a_foreground_deletion() {
    let h = Harness::new();
    h.create(obj("apps/v1", "ReplicaSet", "rs"), vec![]);
    h.create(obj("v1", "Pod", "loose"), vec![owner("ReplicaSet", "rs", false)]);
    // A second, live owner keeps the pod; the pod stops blocking nothing.
    h.create(obj("v1", "ConfigMap", "keeper"), vec![]);
    h.create(
        obj("v1", "Pod", "shared"),
        vec![
            owner("ReplicaSet", "rs", true),
            OwnerReference { controller: None, ..owner("ConfigMap", "keeper", true) },
        ],
    );
    h.pump().await;
    h.fake.user_delete("ReplicaSet", "rs", Propagation::Foreground);
    assert!(h.pump().await.is_empty());
    assert!(!h.exists("ReplicaSet", "rs"));
    assert!(!h.exists("Pod", "loose"), "its owner is gone");
    let shared = h.fake.meta("Pod", "shared").expect("kept by its live owner");
    let refs = shared.owner_references.unwrap();
    assert_eq!(refs.len(), 1, "the reference to the deleted owner went as dangling: {refs:?}");
    assert_eq!(refs[0].name, "keeper");
}

#[tokio::test]
async fn orphan_deletion_leaves_dependents_without_the_owner_reference() {
    let h = Harness::new();
    h.deployment();
    h.pump().await;
    h.fake.user_delete("Deployment", "web", Propagation::Orphan);
    assert!(h.pump().await.is_empty());
    assert!(!h.exists("Deployment", "web"), "the orphan finalizer was removed");
    let rs = h.fake.meta("ReplicaSet", "web-1").expect("the ReplicaSet is left");
    assert_eq!(rs.owner_references, None);
    let pod = h.fake.meta("Pod", "web-1-a").expect("its pods are left");
    assert_eq!(pod.owner_references.unwrap()[0].name, "web-1", "pods keep their own owner");
}

#[tokio::test]
async fn a_dangling_reference_whose_uid_does_not_match_is_collected() {
    let h = Harness::new();
    h.create(obj("apps/v1", "ReplicaSet", "web"), vec![]);
    h.create(
        obj("v1", "Pod", "stale"),
        vec![OwnerReference {
            uid: "uid-of-an-older-web".into(),
            ..owner("ReplicaSet", "web", true)
        }],
    );
    h.create(obj("v1", "Pod", "fine"), vec![owner("ReplicaSet", "web", true)]);
    assert!(h.pump().await.is_empty());
    assert!(!h.exists("Pod", "stale"), "same name, other UID: the owner is gone");
    assert!(h.exists("Pod", "fine"));
}

#[tokio::test]
async fn an_owner_of_a_kind_that_is_not_served_is_an_error_not_a_deletion() {
    let h = Harness::new();
    h.create(
        obj("v1", "Pod", "p"),
        vec![OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            ..owner("Pod", "w", true)
        }],
    );
    let errors = h.pump().await;
    assert_eq!(errors.len(), 1, "tried once; the real queue retries with back-off: {errors:?}");
    assert!(errors[0].contains("Widget in example.com/v1 is not served"), "{}", errors[0]);
    assert!(h.exists("Pod", "p"));
}

#[tokio::test]
async fn a_cycle_of_owners_deleted_in_the_foreground_does_not_hang() {
    let h = Harness::new();
    h.create(obj("v1", "ConfigMap", "a"), vec![owner("ConfigMap", "b", true)]);
    h.create(obj("v1", "ConfigMap", "b"), vec![owner("ConfigMap", "a", true)]);
    h.pump().await;
    assert!(h.exists("ConfigMap", "a") && h.exists("ConfigMap", "b"), "each owner is live");
    h.fake.user_delete("ConfigMap", "a", Propagation::Foreground);
    assert!(h.pump().await.is_empty());
    assert!(!h.exists("ConfigMap", "a") && !h.exists("ConfigMap", "b"));
}

#[test]
fn the_graph_queues_dependents_of_a_deleted_owner_and_forgets_edges() {
    let mut g = Graph::default();
    let rs = obj("apps/v1", "ReplicaSet", "rs");
    let pod = obj("v1", "Pod", "p");
    let meta = |owners: Vec<OwnerReference>| ObjectMeta {
        owner_references: Some(owners),
        ..Default::default()
    };
    assert!(
        g.observe(Event::Upsert { identity: rs.clone(), meta: Box::default() }).delete.is_empty()
    );
    let w = g.observe(Event::Upsert {
        identity: pod.clone(),
        meta: Box::new(meta(vec![owner("ReplicaSet", "rs", true)])),
    });
    assert!(w.delete.is_empty(), "the owner is known and live");
    assert_eq!(g.dependents("uid-rs").len(), 1);
    let w = g.observe(Event::Delete { identity: rs });
    assert_eq!(w.delete.into_iter().collect::<Vec<_>>(), ["uid-p"]);
    g.observe(Event::Delete { identity: pod });
    assert!(g.is_empty() && g.dependents("uid-rs").is_empty());
}
