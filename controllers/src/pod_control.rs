//! Upstream's `PodControl` for controllers that keep expectations: the pod writes they share,
//! with the events and expectation bookkeeping that go with each.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::ResourceExt;

use crate::client::{ApiError, Client};
use crate::events::{EventType, Recorder};
use crate::expectations::Expectations;
use crate::key::Key;
use crate::pods::pod_key;

/// Deletes `pod` of the owner `key` (`about` in events): `SuccessfulDelete`, or `FailedDelete`
/// and the deletion no longer expected; a pod already gone counts as deleted.
pub async fn delete_pod<C: Client<Pod> + ?Sized>(
    client: &C,
    recorder: &dyn Recorder,
    expectations: &Expectations,
    key: &Key,
    pod: &Pod,
    about: ObjectReference,
) -> Result<(), ApiError> {
    let name = pod.name_any();
    match client.delete(&key.namespace, &name, None).await {
        Ok(()) => {
            let message = format!("Deleted pod: {name}");
            recorder.record(about, EventType::Normal, "SuccessfulDelete", message);
            Ok(())
        }
        Err(e) => {
            expectations.deletion_observed(key, &pod_key(pod));
            if e.is_not_found() {
                return Ok(());
            }
            let message = format!("Error deleting: {e}");
            recorder.record(about, EventType::Warning, "FailedDelete", message);
            Err(e)
        }
    }
}
