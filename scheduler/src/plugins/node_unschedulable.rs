//! `NodeUnschedulable`: a cordoned node (`spec.unschedulable`) takes only pods that tolerate the
//! `node.kubernetes.io/unschedulable:NoSchedule` taint.

use k8s_openapi::api::core::v1::{Node, Taint};

use super::{FilterResult, Rejection, taint_toleration};
use crate::cache::PodInfo;

pub const NAME: &str = "NodeUnschedulable";
pub const ERR_REASON: &str = "node(s) were unschedulable";
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

pub fn filter(pod: &PodInfo, node: &Node) -> FilterResult {
    if !node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        return Ok(());
    }
    let taint = Taint {
        key: TAINT_NODE_UNSCHEDULABLE.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    let tolerations = pod.spec().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    if tolerations.iter().any(|t| taint_toleration::tolerates(t, &taint)) {
        return Ok(());
    }
    Err(Rejection::new(NAME, ERR_REASON))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Toleration;

    use super::*;
    use crate::cache::tests::{node, pod};

    #[test]
    fn cordoned_nodes_take_only_pods_tolerating_the_unschedulable_taint() {
        let tolerating = |key: &str, effect: Option<&str>| {
            let mut p = pod("p", "", "");
            if let Some(s) = p.spec.as_mut() {
                s.tolerations = Some(vec![Toleration {
                    key: Some(key.into()),
                    operator: Some("Exists".into()),
                    effect: effect.map(String::from),
                    ..Default::default()
                }]);
            }
            p
        };
        let cases = [
            ("schedulable node", false, pod("p", "", ""), true),
            ("cordoned node", true, pod("p", "", ""), false),
            (
                "cordoned, tolerated",
                true,
                tolerating(TAINT_NODE_UNSCHEDULABLE, Some("NoSchedule")),
                true,
            ),
            (
                "cordoned, tolerated any effect",
                true,
                tolerating(TAINT_NODE_UNSCHEDULABLE, None),
                true,
            ),
            ("cordoned, other toleration", true, tolerating("other", None), false),
        ];
        for (what, cordoned, p, fits) in cases {
            let mut n = node("n", "1", "1Gi", "10");
            n.spec.get_or_insert_default().unschedulable = Some(cordoned);
            let got = filter(&PodInfo::new(Arc::new(p)), &n);
            assert_eq!(got.is_ok(), fits, "{what}: {got:?}");
            if let Err(r) = got {
                assert_eq!(r.reasons, vec![ERR_REASON]);
            }
        }
    }
}
