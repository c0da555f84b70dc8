//! Who owns what, as upstream's `ControllerRefManager`: an owner claims the objects (pods of a
//! ReplicaSet, ReplicaSets of a Deployment) that either carry its controller reference or are
//! orphans its selector matches.
//!
//! - Controlled by someone else: never touched (one `controller: true` owner, so two
//!   controllers never fight over an object).
//! - Controlled by the owner and matching: kept. Not matching any more: released (the
//!   reference removed), unless the owner is being deleted.
//! - An orphan that matches, not being deleted, while the owner is not being deleted: adopted
//!   (the owner's controller reference added), but only after a fresh uncached read shows the
//!   owner still exists with the same UID and is not being deleted (upstream's
//!   `RecheckDeletionTimestamp`), done once per claim.

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::client::{ApiError, Client, OwnerPatch};
use crate::pods::controller_of;
use crate::selector::Selector;

/// What a claim does with one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    Keep,
    Adopt,
    Release,
    Ignore,
}

/// The pure decision for one object's metadata.
pub fn classify(meta: &ObjectMeta, matches: bool, owner_uid: &str, owner_deleting: bool) -> Claim {
    match controller_of(meta) {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if matches => Claim::Keep,
        Some(_) if owner_deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if owner_deleting || !matches || meta.deletion_timestamp.is_some() => Claim::Ignore,
        None => Claim::Adopt,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("{kind} {owner} cannot adopt: {reason}")]
    CannotAdopt { kind: String, owner: String, reason: String },
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// The owner of a claim.
#[derive(Debug)]
pub struct Owner<'a> {
    pub meta: &'a ObjectMeta,
    pub reference: OwnerReference,
    pub selector: &'a Selector,
}

/// Claims `objects` for `owner`, adopting and releasing through `client`. `recheck` is the
/// fresh read of the owner, awaited before the first adoption.
pub async fn claim<K, C, F>(
    client: &C,
    owner: &Owner<'_>,
    objects: Vec<Arc<K>>,
    recheck: F,
) -> Result<Vec<Arc<K>>, ClaimError>
where
    K: Resource + Send + Sync,
    C: Client<K>,
    F: Future<Output = Result<(), ClaimError>>,
{
    let uid = owner.meta.uid.as_deref().unwrap_or_default();
    let deleting = owner.meta.deletion_timestamp.is_some();
    let mut recheck = Some(recheck);
    let mut claimed = Vec::new();
    let mut first_error = None;
    for obj in objects {
        let matches = owner.selector.matches(obj.meta().labels.as_ref());
        let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
        let obj_uid = obj.meta().uid.clone().unwrap_or_default();
        match classify(obj.meta(), matches, uid, deleting) {
            Claim::Keep => claimed.push(obj),
            Claim::Ignore => {}
            Claim::Release => {
                let patch = OwnerPatch::Release { owner_uid: uid.to_string(), uid: obj_uid };
                match client.patch_owner(&ns, &name, &patch).await {
                    Ok(_) => tracing::debug!(object = %name, "released"),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => {
                        first_error.get_or_insert(ClaimError::Api(e));
                    }
                }
            }
            Claim::Adopt => {
                if let Some(check) = recheck.take()
                    && let Err(e) = check.await
                {
                    return Err(e);
                }
                let patch = OwnerPatch::Adopt { owner: owner.reference.clone(), uid: obj_uid };
                match client.patch_owner(&ns, &name, &patch).await {
                    Ok(adopted) => {
                        tracing::debug!(object = %name, "adopted");
                        claimed.push(Arc::new(adopted));
                    }
                    Err(e) if e.is_not_found() => {}
                    Err(e) => {
                        first_error.get_or_insert(ClaimError::Api(e));
                    }
                }
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(claimed),
    }
}

/// Upstream's `RecheckDeletionTimestamp` on a fresh read of the owner.
pub fn recheck(
    fresh: &ObjectMeta,
    want_uid: &str,
    kind: &str,
    key: &str,
) -> Result<(), ClaimError> {
    let err =
        |reason: String| ClaimError::CannotAdopt { kind: kind.into(), owner: key.into(), reason };
    if fresh.uid.as_deref() != Some(want_uid) {
        return Err(err(format!(
            "original {kind} {key} is gone: got uid {}, wanted {want_uid}",
            fresh.uid.as_deref().unwrap_or_default()
        )));
    }
    if let Some(t) = &fresh.deletion_timestamp {
        return Err(err(format!("{key} has just been deleted at {}", t.0)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(owner: Option<&str>, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            deletion_timestamp: deleting.then_some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn objects_controlled_by_another_owner_are_never_touched() {
        for (matches, deleting) in [(true, false), (false, false), (true, true)] {
            assert_eq!(
                classify(&meta(Some("other"), false), matches, "me", deleting),
                Claim::Ignore
            );
        }
    }

    #[test]
    fn own_objects_are_kept_or_released_and_matching_orphans_adopted() {
        assert_eq!(classify(&meta(Some("me"), false), true, "me", false), Claim::Keep);
        assert_eq!(classify(&meta(Some("me"), false), false, "me", false), Claim::Release);
        assert_eq!(classify(&meta(Some("me"), false), false, "me", true), Claim::Ignore);
        assert_eq!(classify(&meta(None, false), true, "me", false), Claim::Adopt);
        assert_eq!(classify(&meta(None, false), false, "me", false), Claim::Ignore);
        assert_eq!(
            classify(&meta(None, true), true, "me", false),
            Claim::Ignore,
            "terminating orphans stay"
        );
        assert_eq!(
            classify(&meta(None, false), true, "me", true),
            Claim::Ignore,
            "a deleting owner adopts nothing"
        );
    }

    #[test]
    fn an_owner_recreated_under_the_same_name_cannot_adopt() {
        let fresh = ObjectMeta { uid: Some("new".into()), ..Default::default() };
        let err = recheck(&fresh, "old", "ReplicaSet", "ns/web").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "ReplicaSet ns/web cannot adopt: original ReplicaSet ns/web is gone: got uid new, wanted old"
            )
        );
    }
}
