//! `policy/v1` (and `policy/v1beta1`) Eviction, as `kubectl drain`'s typed client posts it to
//! `pods/<name>/eviction`, and the `DeleteOptions` it carries (also a delete's body).

use k8s_pb::api::policy::{v1, v1beta1};
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;

use super::meta::object_meta;
use super::{R, done, nested, obj, ptr, strings};

use std::mem::take;

pub(super) fn eviction(mut e: v1::Eviction) -> R {
    let v = obj([
        ("metadata", object_meta(e.metadata.take())?),
        ("deleteOptions", nested(e.delete_options.take(), delete_options)?),
    ]);
    done(&e, "Eviction")?;
    Ok(v)
}

/// The same message in the older group version.
pub(super) fn eviction_v1beta1(mut e: v1beta1::Eviction) -> R {
    eviction(v1::Eviction { metadata: e.metadata.take(), delete_options: e.delete_options.take() })
}

/// `metav1.DeleteOptions`: every field a pointer but `dryRun`.
pub(super) fn delete_options(mut d: meta::DeleteOptions) -> R {
    let preconditions = nested(d.preconditions.take(), |mut p| {
        let v =
            obj([("uid", ptr(p.uid.take())), ("resourceVersion", ptr(p.resource_version.take()))]);
        done(&p, "Preconditions")?;
        Ok(v)
    })?;
    let v = obj([
        ("gracePeriodSeconds", ptr(d.grace_period_seconds.take())),
        ("preconditions", preconditions),
        ("orphanDependents", ptr(d.orphan_dependents.take())),
        ("propagationPolicy", ptr(d.propagation_policy.take())),
        ("dryRun", strings(take(&mut d.dry_run))),
        (
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            ptr(d.ignore_store_read_error_with_cluster_breaking_potential.take()),
        ),
    ]);
    done(&d, "DeleteOptions")?;
    Ok(v)
}
