//! `NodeAffinity`: the pod's `nodeSelector` and its required node affinity
//! (`requiredDuringSchedulingIgnoredDuringExecution`) must both match the node. Terms are ORed,
//! a term's expressions and fields ANDed, and an empty term matches nothing, as upstream's
//! `nodeaffinity.NodeSelector`.

use k8s_openapi::api::core::v1::{Node, PodSpec};

use super::{FilterResult, Rejection};
use crate::cache::PodInfo;

pub const NAME: &str = "NodeAffinity";
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";

/// The pod's node selector and required affinity match the node.
pub fn matches(spec: &PodSpec, node: &Node) -> bool {
    api::scheduling::node_affinity_matches(spec, node)
}

pub fn filter(pod: &PodInfo, node: &Node) -> FilterResult {
    match pod.spec() {
        Some(spec) if !matches(spec, node) => Err(Rejection::new(NAME, ERR_REASON_POD)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };

    use super::*;
    use crate::cache::tests::{node, pod};

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_string()).collect()),
        }
    }

    fn term(
        exprs: Vec<NodeSelectorRequirement>,
        fields: Vec<NodeSelectorRequirement>,
    ) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        }
    }

    fn with(selector: &[(&str, &str)], terms: Option<Vec<NodeSelectorTerm>>) -> PodInfo {
        let mut p = pod("p", "", "");
        let spec = p.spec.get_or_insert_default();
        if !selector.is_empty() {
            spec.node_selector =
                Some(selector.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect());
        }
        spec.affinity = terms.map(|node_selector_terms| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        PodInfo::new(Arc::new(p))
    }

    #[test]
    fn node_selector_and_required_affinity_both_must_match() {
        let mut n = node("n1", "1", "1Gi", "10");
        n.metadata.labels = Some(
            [("disk", "ssd"), ("zone", "a"), ("cores", "8")]
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        );
        let cases = [
            ("nothing asked", with(&[], None), true),
            ("selector matches", with(&[("disk", "ssd")], None), true),
            ("selector value differs", with(&[("disk", "hdd")], None), false),
            ("selector key missing", with(&[("gpu", "yes")], None), false),
            ("In", with(&[], Some(vec![term(vec![req("zone", "In", &["a", "b"])], vec![])])), true),
            (
                "In misses",
                with(&[], Some(vec![term(vec![req("zone", "In", &["b"])], vec![])])),
                false,
            ),
            (
                "NotIn, label absent",
                with(&[], Some(vec![term(vec![req("gpu", "NotIn", &["x"])], vec![])])),
                true,
            ),
            ("Exists", with(&[], Some(vec![term(vec![req("disk", "Exists", &[])], vec![])])), true),
            (
                "DoesNotExist",
                with(&[], Some(vec![term(vec![req("disk", "DoesNotExist", &[])], vec![])])),
                false,
            ),
            ("Gt", with(&[], Some(vec![term(vec![req("cores", "Gt", &["4"])], vec![])])), true),
            ("Lt", with(&[], Some(vec![term(vec![req("cores", "Lt", &["4"])], vec![])])), false),
            (
                "Gt on a non-integer",
                with(&[], Some(vec![term(vec![req("zone", "Gt", &["4"])], vec![])])),
                false,
            ),
            (
                "terms are ORed",
                with(
                    &[],
                    Some(vec![
                        term(vec![req("zone", "In", &["b"])], vec![]),
                        term(vec![req("disk", "Exists", &[])], vec![]),
                    ]),
                ),
                true,
            ),
            (
                "expressions are ANDed",
                with(
                    &[],
                    Some(vec![term(
                        vec![req("zone", "In", &["a"]), req("disk", "In", &["hdd"])],
                        vec![],
                    )]),
                ),
                false,
            ),
            ("an empty term matches nothing", with(&[], Some(vec![term(vec![], vec![])])), false),
            ("no terms match nothing", with(&[], Some(vec![])), false),
            (
                "matchFields on the name",
                with(&[], Some(vec![term(vec![], vec![req("metadata.name", "In", &["n1"])])])),
                true,
            ),
            (
                "matchFields on another name",
                with(&[], Some(vec![term(vec![], vec![req("metadata.name", "In", &["n2"])])])),
                false,
            ),
            (
                "selector and affinity both apply",
                with(&[("disk", "hdd")], Some(vec![term(vec![req("zone", "In", &["a"])], vec![])])),
                false,
            ),
        ];
        for (what, p, fits) in cases {
            let got = filter(&p, &n);
            assert_eq!(got.is_ok(), fits, "{what}");
            if let Err(r) = got {
                assert_eq!(r.reasons, vec![ERR_REASON_POD], "{what}");
            }
        }
    }
}
