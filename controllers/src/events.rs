//! Events controllers post about the objects they act on (`SuccessfulCreate`,
//! `ScalingReplicaSet`, ...), behind the [`Recorder`] trait: in the manager it is the shared
//! `record` crate's [`record::EventRecorder`] (one per controller, its `source.component` the
//! controller's name, upstream's naming, correlation and spam filter, a bounded queue so
//! recording never waits); in the hermetic tests, [`MemoryRecorder`].

use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Resource, ResourceExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// Records an event about an object; never waits.
pub trait Recorder: Send + Sync + 'static {
    fn record(&self, about: ObjectReference, kind: EventType, reason: &str, message: String);
}

impl Recorder for record::EventRecorder {
    fn record(&self, about: ObjectReference, kind: EventType, reason: &str, message: String) {
        let kind = match kind {
            EventType::Normal => record::EventType::Normal,
            EventType::Warning => record::EventType::Warning,
        };
        tracing::debug!(object = ?about.name, reason, %message, "event");
        self.event(&about, kind, reason, &message);
    }
}

/// The reference an event names.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        ..Default::default()
    }
}

/// Collects events in memory (hermetic tests).
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    pub events: Mutex<Vec<(String, String, String)>>,
}

impl MemoryRecorder {
    /// `(object name, reason, message)` of each event so far.
    pub fn take(&self) -> Vec<(String, String, String)> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl Recorder for MemoryRecorder {
    fn record(&self, about: ObjectReference, _: EventType, reason: &str, message: String) {
        self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((
            about.name.unwrap_or_default(),
            reason.to_string(),
            message,
        ));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn references_name_the_kind_version_and_object() {
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let r = reference(&rs);
        assert_eq!(r.kind.as_deref(), Some("ReplicaSet"));
        assert_eq!(r.api_version.as_deref(), Some("apps/v1"));
        assert_eq!((r.name.as_deref(), r.uid.as_deref()), (Some("web"), Some("u")));
    }
}
