//! `NodePorts`: a pod's host ports must be free on the node (same protocol and port on an
//! overlapping address is taken).

use super::{FilterResult, Rejection};
use crate::cache::{NodeInfo, PodInfo};

pub const NAME: &str = "NodePorts";
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

pub fn filter(pod: &PodInfo, node: &NodeInfo) -> FilterResult {
    let taken =
        pod.host_ports.iter().any(|want| node.used_ports.keys().any(|used| used.conflicts(want)));
    if taken { Err(Rejection::new(NAME, ERR_REASON)) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::tests::{node, pod, with_host_port};

    #[test]
    fn a_host_port_in_use_rejects_the_node() {
        let cases = [
            ("no ports anywhere", None, None, true),
            ("free port", Some((81, None)), Some((80, None)), true),
            ("same port, wildcard", Some((80, None)), Some((80, None)), false),
            (
                "same port, wildcard vs address",
                Some((80, Some("10.0.0.1"))),
                Some((80, None)),
                false,
            ),
            (
                "same port, other addresses",
                Some((80, Some("10.0.0.1"))),
                Some((80, Some("10.0.0.2"))),
                true,
            ),
            ("pod wants none", None, Some((80, None)), true),
        ];
        for (what, want, used, fits) in cases {
            let mut info = NodeInfo::with_node(Arc::new(node("n", "1", "1Gi", "10")));
            if let Some((port, ip)) = used {
                info.add_pod(PodInfo::new(Arc::new(with_host_port(pod("old", "", ""), port, ip))));
            }
            let p = match want {
                Some((port, ip)) => with_host_port(pod("p", "", ""), port, ip),
                None => pod("p", "", ""),
            };
            let got = filter(&PodInfo::new(Arc::new(p)), &info);
            assert_eq!(got.is_ok(), fits, "{what}");
        }
    }
}
