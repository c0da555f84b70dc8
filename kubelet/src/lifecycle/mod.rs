//! Pod admission, as upstream's `pkg/kubelet/lifecycle`: before a new pod gets a worker, the
//! kubelet checks it against its node and the pods already admitted. A pod that does not fit is
//! rejected for good: phase `Failed`, the reason (`OutOfcpu`, `OutOfmemory`, `OutOfpods`,
//! `NodeAffinity`, …) and `Pod was rejected: <message>`, and a Warning event with both.
//!
//! - [`predicate`]: upstream's `predicateAdmitHandler`, pure: the OS checks, then the
//!   scheduler's admission filters (resources, node affinity, node name, host ports; the `api`
//!   crate's `resources` and `scheduling`, the rules the scheduler filters with) and untolerated
//!   `NoExecute` taints.
//! - [`preemption`]: a critical pod short of resources alone preempts the fewest lower pods that
//!   free them (`Preempting`), or is rejected with `UnexpectedAdmissionError`.
//! - shutdown: while the node shuts down, no pod gets in (`NodeShutdown`), last, as upstream.
//! - [`eviction`]: the eviction manager's check, first: under node pressure only critical pods
//!   (and, under memory pressure alone, pods that are not BestEffort) get in, as upstream's.

pub mod eviction;
pub mod predicate;
pub mod preemption;

use k8s_openapi::api::core::v1::{Node, Pod};
pub use predicate::Rejection;

use crate::eviction::Pressure;

/// Upstream's admit handlers in its order: the eviction manager's (the node's `pressures`),
/// the predicates' (with critical pod preemption), then the shutdown manager's (no pod while the
/// node is `shutting_down`). The first to refuse decides; admitted, the pods (indexes into
/// `admitted`) to preempt for this one.
pub fn admit(
    pod: &Pod,
    admitted: &[&Pod],
    node: &Node,
    pressures: &[Pressure],
    shutting_down: bool,
) -> Result<Vec<usize>, Rejection> {
    eviction::admit(pod, pressures)?;
    let preempt = predicate::admit(pod, admitted, node)?;
    if shutting_down {
        return Err(Rejection {
            reason: crate::nodeshutdown::NOT_ADMITTED_REASON.to_string(),
            message: crate::nodeshutdown::NOT_ADMITTED_MESSAGE.to_string(),
        });
    }
    Ok(preempt)
}
