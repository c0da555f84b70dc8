//! Pod admission, as upstream's `pkg/kubelet/lifecycle`: before a new pod gets a worker, the
//! kubelet checks it against its node and the pods already admitted. A pod that does not fit is
//! rejected for good: phase `Failed`, the reason (`OutOfcpu`, `OutOfmemory`, `OutOfpods`,
//! `NodeAffinity`, …) and `Pod was rejected: <message>`, and a Warning event with both.
//!
//! - [`predicate`]: upstream's `predicateAdmitHandler`, pure: the OS checks, then the
//!   scheduler's admission filters (resources, node affinity, node name, host ports; the `api`
//!   crate's `resources` and `scheduling`, the rules the scheduler filters with) and untolerated
//!   `NoExecute` taints.

pub mod predicate;

pub use predicate::{Rejection, admit};
