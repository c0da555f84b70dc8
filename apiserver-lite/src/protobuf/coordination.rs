//! `coordination.k8s.io/v1` Lease, as node heartbeats and leader election write it.

use k8s_pb::api::coordination::v1 as coordination;

use super::meta::{micro_time, object_meta};
use super::{R, done, nested, obj, ptr};

pub(super) fn lease(mut l: coordination::Lease) -> R {
    let spec = nested(l.spec.take(), |mut s| {
        let v = obj([
            ("holderIdentity", ptr(s.holder_identity.take())),
            ("leaseDurationSeconds", ptr(s.lease_duration_seconds.take())),
            ("acquireTime", micro_time(s.acquire_time.take())),
            ("renewTime", micro_time(s.renew_time.take())),
            ("leaseTransitions", ptr(s.lease_transitions.take())),
            ("strategy", ptr(s.strategy.take())),
            ("preferredHolder", ptr(s.preferred_holder.take())),
        ]);
        done(&s, "LeaseSpec")?;
        Ok(v)
    })?;
    let v = obj([("metadata", object_meta(l.metadata.take())?), ("spec", spec)]);
    done(&l, "Lease")?;
    Ok(v)
}
