//! [`FakeSink`]: an in-memory apiserver for events, for tests (this crate's and those of the
//! components that record events). It stores what is created, applies patches, answers 409 and
//! 404 as the apiserver does, fails the calls it is told to, and can hang every call to stand
//! for an apiserver that never answers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Event;
use serde_json::Value;

use crate::sink::{EventSink, SinkError};

/// A call the sink received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Create { namespace: String, name: String },
    Patch { namespace: String, name: String },
}

#[derive(Debug, Default)]
struct State {
    events: BTreeMap<(String, String), Event>,
    calls: Vec<Call>,
    failures: VecDeque<SinkError>,
    hang: bool,
    revision: u64,
}

#[derive(Debug, Clone, Default)]
pub struct FakeSink {
    state: Arc<Mutex<State>>,
}

fn rejected(namespace: &str, name: &str, code: u16, reason: &str) -> SinkError {
    SinkError::Rejected {
        namespace: namespace.into(),
        name: name.into(),
        code,
        reason: reason.into(),
        message: format!("events \"{name}\" {reason}"),
    }
}

impl FakeSink {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stored events, by namespace and name.
    pub fn events(&self) -> Vec<Event> {
        self.lock().events.values().cloned().collect()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The next call fails with `error` (calls queue up their failures in order).
    pub fn fail_next(&self, error: SinkError) {
        self.lock().failures.push_back(error);
    }

    /// Every call from now on never returns.
    pub fn hang(&self) {
        self.lock().hang = true;
    }

    /// Deletes a stored event, as its TTL or a user would.
    pub fn delete(&self, namespace: &str, name: &str) {
        self.lock().events.remove(&(namespace.to_string(), name.to_string()));
    }

    /// Records the call and decides its answer; `None` means hang.
    fn answer(
        &self,
        call: Call,
        apply: impl FnOnce(&mut State) -> Result<Event, SinkError>,
    ) -> Option<Result<Event, SinkError>> {
        let mut s = self.lock();
        s.calls.push(call);
        if s.hang {
            return None;
        }
        if let Some(e) = s.failures.pop_front() {
            return Some(Err(e));
        }
        s.revision += 1;
        Some(apply(&mut s))
    }
}

async fn settle(answer: Option<Result<Event, SinkError>>) -> Result<Event, SinkError> {
    match answer {
        Some(r) => r,
        None => std::future::pending().await,
    }
}

impl EventSink for FakeSink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let call = Call::Create { namespace: namespace.clone(), name: name.clone() };
        let answer = self.answer(call, |s| {
            let key = (namespace.clone(), name.clone());
            if s.events.contains_key(&key) {
                return Err(rejected(&namespace, &name, 409, "AlreadyExists"));
            }
            let mut stored = event.clone();
            stored.metadata.resource_version = Some(s.revision.to_string());
            s.events.insert(key, stored.clone());
            Ok(stored)
        });
        settle(answer).await
    }

    async fn patch(&self, namespace: &str, name: &str, patch: &Value) -> Result<Event, SinkError> {
        let call = Call::Patch { namespace: namespace.into(), name: name.into() };
        let answer = self.answer(call, |s| {
            let revision = s.revision.to_string();
            let Some(stored) = s.events.get_mut(&(namespace.to_string(), name.to_string())) else {
                return Err(rejected(namespace, name, 404, "NotFound"));
            };
            let mut value = serde_json::to_value(&*stored).unwrap_or_default();
            if let (Some(v), Some(p)) = (value.as_object_mut(), patch.as_object()) {
                for (k, x) in p {
                    v.insert(k.clone(), x.clone());
                }
            }
            *stored = serde_json::from_value(value)
                .map_err(|_| rejected(namespace, name, 422, "Invalid"))?;
            stored.metadata.resource_version = Some(revision);
            Ok(stored.clone())
        });
        settle(answer).await
    }
}
