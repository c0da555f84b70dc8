//! A controller's label selector: upstream's `LabelSelectorAsSelector`
//! (`api::validation::selector`, the one the apiserver validates with), read with the
//! controllers' rule that an empty selector matches nothing: apps/v1 rejects empty selectors,
//! so a controller must never read one as "every pod in the namespace".

use std::collections::BTreeMap;

use api::validation::selector::{InvalidSelector, Selector as LabelSelectorMatcher};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(LabelSelectorMatcher);

impl Selector {
    pub fn new(s: &LabelSelector) -> Result<Self, InvalidSelector> {
        LabelSelectorMatcher::from_label_selector(Some(s)).map(Self)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether an object with these labels is selected; never, for an empty selector.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        const NONE: &BTreeMap<String, String> = &BTreeMap::new();
        !self.is_empty() && self.0.matches(labels.unwrap_or(NONE))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    #[test]
    fn labels_and_expressions_must_all_match() {
        let s = Selector::new(&LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into(), "b".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(s.matches(Some(&labels(&[("app", "web"), ("tier", "a")]))));
        assert!(!s.matches(Some(&labels(&[("app", "web"), ("tier", "c")]))));
        assert!(!s.matches(Some(&labels(&[("app", "web"), ("tier", "a"), ("canary", "1")]))));
        assert!(!s.matches(None));
    }

    #[test]
    fn empty_selectors_match_nothing_and_bad_operators_are_errors() {
        let empty = Selector::new(&LabelSelector::default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!empty.matches(Some(&labels(&[("app", "web")]))));
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        assert!(
            Selector::new(&bad).is_err_and(|e| e.to_string().contains("\"Near\" is not a valid"))
        );
    }
}
