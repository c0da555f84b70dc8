//! `NodeName`: a pod that names a node (`spec.nodeName`) fits only that node.

use k8s_openapi::api::core::v1::Node;

use super::{FilterResult, Rejection};
use crate::cache::PodInfo;

pub const NAME: &str = "NodeName";
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

pub fn filter(pod: &PodInfo, node: &Node) -> FilterResult {
    match pod.spec().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
        Some(wanted) if Some(wanted) != node.metadata.name.as_deref() => {
            Err(Rejection::new(NAME, ERR_REASON))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::tests::{node, pod};

    #[test]
    fn a_named_node_is_the_only_fit() {
        for (wanted, node_name, fits) in [
            (None, "n1", true),
            (Some(""), "n1", true),
            (Some("n1"), "n1", true),
            (Some("n1"), "n2", false),
        ] {
            let mut p = pod("p", "", "");
            p.spec.get_or_insert_default().node_name = wanted.map(String::from);
            let got = filter(&PodInfo::new(Arc::new(p)), &node(node_name, "1", "1Gi", "10"));
            assert_eq!(got.is_ok(), fits, "{wanted:?} on {node_name}");
        }
    }
}
