//! `TaintToleration`: a node's `NoSchedule` and `NoExecute` taints keep off every pod that does
//! not tolerate them (`PreferNoSchedule` only affects upstream's score, which this scheduler
//! does not run). The reason is upstream's current wording, which names no taint so that events
//! stay aggregatable; the taint itself is logged at debug level.

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use super::{FilterResult, Rejection};
use crate::cache::PodInfo;

pub const NAME: &str = "TaintToleration";
pub const ERR_REASON: &str = "node(s) had untolerated taint(s)";

pub use api::scheduling::tolerates;

/// The first `NoSchedule`/`NoExecute` taint no toleration tolerates.
pub fn untolerated<'n>(tolerations: &[Toleration], node: &'n Node) -> Option<&'n Taint> {
    api::scheduling::untolerated_taint(node, tolerations, &["NoSchedule", "NoExecute"])
}

pub fn filter(pod: &PodInfo, node: &Node) -> FilterResult {
    let tolerations = pod.spec().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    match untolerated(tolerations, node) {
        None => Ok(()),
        Some(taint) => {
            tracing::debug!(pod = %pod.key, node = node.metadata.name.as_deref().unwrap_or_default(),
                taint = %format!("{{{}: {}}}", taint.key, taint.value.as_deref().unwrap_or_default()),
                "untolerated taint");
            Err(Rejection::new(NAME, ERR_REASON))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::tests::{node, pod};

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            ..Default::default()
        }
    }

    #[test]
    fn only_no_schedule_and_no_execute_taints_keep_pods_off() {
        let cases = [
            (vec![], vec![], true),
            (vec![taint("k", "v", "PreferNoSchedule")], vec![], true),
            (vec![taint("k", "v", "NoSchedule")], vec![], false),
            (vec![taint("k", "v", "NoExecute")], vec![], false),
            (vec![taint("k", "v", "NoSchedule")], vec![tol("k", "Equal", "v", "NoSchedule")], true),
            (
                vec![taint("k", "v", "NoSchedule"), taint("k2", "", "NoExecute")],
                vec![tol("k", "Exists", "", "")],
                false,
            ),
        ];
        for (taints, tolerations, fits) in cases {
            let mut n = node("n", "1", "1Gi", "10");
            n.spec.get_or_insert_default().taints = Some(taints.clone());
            let mut p = pod("p", "", "");
            p.spec.get_or_insert_default().tolerations = Some(tolerations.clone());
            let got = filter(&PodInfo::new(Arc::new(p)), &n);
            assert_eq!(got.is_ok(), fits, "{taints:?} / {tolerations:?}");
            if let Err(r) = got {
                assert_eq!(r.reasons, vec![ERR_REASON]);
            }
        }
    }
}
