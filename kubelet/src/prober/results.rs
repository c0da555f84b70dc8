//! Probe results by container, as upstream's `prober/results` managers: the latest verdict of
//! each (probe kind, container ID), read by the sync (liveness kills, readiness in the
//! status), and the changes, coalesced per container and probe, for the sync loop.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, RwLock};

use tokio::sync::Notify;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 3] = [ProbeKind::Liveness, ProbeKind::Readiness, ProbeKind::Startup];

    /// As events and logs name it: `Liveness`.
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Startup => "Startup",
        }
    }

    /// As messages name it: `liveness`.
    pub fn lower(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "liveness",
            ProbeKind::Readiness => "readiness",
            ProbeKind::Startup => "startup",
        }
    }

    /// The verdict before the first probe: not ready, alive, not started (upstream's initial
    /// values).
    pub fn initial(self) -> ProbeResult {
        match self {
            ProbeKind::Liveness => ProbeResult::Success,
            ProbeKind::Readiness => ProbeResult::Failure,
            ProbeKind::Startup => ProbeResult::Unknown,
        }
    }
}

/// A probe's standing verdict (after thresholds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure,
    Unknown,
}

/// A verdict that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeUpdate {
    pub uid: String,
    pub container: String,
    pub container_id: String,
    pub kind: ProbeKind,
    pub result: ProbeResult,
}

type Key = (ProbeKind, String);

/// The verdicts, and the changes not yet taken by the sync loop.
#[derive(Debug, Default)]
pub struct ProbeResults {
    verdicts: RwLock<HashMap<Key, ProbeResult>>,
    /// At most one pending change per (pod, container, kind): bounded by the number of probes.
    pending: Mutex<HashMap<(String, String, ProbeKind), ProbeUpdate>>,
    notify: Notify,
}

impl ProbeResults {
    /// The verdict for a container (by runtime ID), if a probe of that kind has given one.
    pub fn get(&self, kind: ProbeKind, container_id: &str) -> Option<ProbeResult> {
        self.verdicts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(kind, container_id.to_string()))
            .copied()
    }

    /// Records a verdict; a change is queued for the sync loop.
    pub fn set(&self, update: ProbeUpdate) {
        let key = (update.kind, update.container_id.clone());
        let previous = self
            .verdicts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, update.result);
        if previous == Some(update.result) {
            return;
        }
        let slot = (update.uid.clone(), update.container.clone(), update.kind);
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(slot, update);
        self.notify.notify_one();
    }

    /// Forgets a container's verdicts (it was replaced or its pod went).
    pub fn remove(&self, kind: ProbeKind, container_id: &str) {
        self.verdicts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(kind, container_id.to_string()));
    }

    /// Waits for changes and takes them all.
    pub async fn changes(&self) -> Vec<ProbeUpdate> {
        loop {
            let taken: Vec<ProbeUpdate> = self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drain()
                .map(|(_, u)| u)
                .collect();
            if !taken.is_empty() {
                return taken;
            }
            self.notify.notified().await;
        }
    }

    pub fn len(&self) -> usize {
        self.verdicts.read().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(id: &str, result: ProbeResult) -> ProbeUpdate {
        ProbeUpdate {
            uid: "u".into(),
            container: "c".into(),
            container_id: id.into(),
            kind: ProbeKind::Readiness,
            result,
        }
    }

    #[tokio::test]
    async fn only_changes_reach_the_sync_loop_and_they_coalesce() {
        let r = ProbeResults::default();
        r.set(update("c1", ProbeResult::Failure));
        r.set(update("c1", ProbeResult::Failure));
        r.set(update("c1", ProbeResult::Success));
        let changes = r.changes().await;
        assert_eq!(changes, [update("c1", ProbeResult::Success)], "the newest change per probe");
        assert_eq!(r.get(ProbeKind::Readiness, "c1"), Some(ProbeResult::Success));
        r.set(update("c1", ProbeResult::Success));
        assert!(r.pending.lock().unwrap().is_empty(), "no change, nothing queued");
        r.remove(ProbeKind::Readiness, "c1");
        assert_eq!(r.get(ProbeKind::Readiness, "c1"), None);
    }
}
