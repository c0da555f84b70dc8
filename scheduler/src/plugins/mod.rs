//! The filter and score plugins of upstream's default profile that this scheduler runs, each a
//! pure function of the pod (with its requests computed once, [`PodInfo`]) and one node
//! ([`NodeInfo`]), so each is table-tested on its own.
//!
//! Filters run in upstream's order and a node is rejected by the first that fails, as upstream's
//! `RunFilterPlugins`; the reasons are upstream's exact words, which `FailedScheduling` events
//! count per node. Scores are 0–100 per plugin, weighted as upstream's defaults (1 each) and
//! summed.

use std::borrow::Cow;

use crate::cache::{NodeInfo, PodInfo};

pub mod balanced_allocation;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod taint_toleration;

/// Upstream's `MaxNodeScore`.
pub const MAX_NODE_SCORE: i64 = 100;

/// Why one node cannot take the pod: the plugin and its reasons (several for
/// `NodeResourcesFit`, one for the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub plugin: &'static str,
    pub reasons: Vec<Cow<'static, str>>,
}

impl Rejection {
    pub fn new(plugin: &'static str, reason: &'static str) -> Self {
        Self { plugin, reasons: vec![Cow::Borrowed(reason)] }
    }
}

/// A filter's verdict on one node.
pub type FilterResult = Result<(), Rejection>;

/// Runs the filters in upstream's order and stops at the first rejection.
pub fn filter(pod: &PodInfo, info: &NodeInfo) -> FilterResult {
    let Some(node) = info.node.as_deref() else {
        return Err(Rejection::new("NodeInfo", "node(s) not found"));
    };
    node_unschedulable::filter(pod, node)?;
    node_name::filter(pod, node)?;
    taint_toleration::filter(pod, node)?;
    node_affinity::filter(pod, node)?;
    node_ports::filter(pod, info)?;
    node_resources_fit::filter(pod, info)?;
    Ok(())
}

/// The node's total score for the pod: `NodeResourcesFit` (LeastAllocated) plus
/// `NodeResourcesBalancedAllocation`, weight 1 each as upstream's defaults.
pub fn score(pod: &PodInfo, info: &NodeInfo) -> i64 {
    node_resources_fit::least_allocated_score(pod, info) + balanced_allocation::score(pod, info)
}
