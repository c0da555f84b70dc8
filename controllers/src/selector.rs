//! Label selectors (`metav1.LabelSelector`) as upstream's `LabelSelectorAsSelector`:
//! `matchLabels` and `matchExpressions` (`In`, `NotIn`, `Exists`, `DoesNotExist`), all required.
//! An empty selector matches nothing here: apps/v1 rejects empty selectors, so a controller must
//! never read one as "every pod in the namespace".

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectorError {
    #[error("{operator:?} is not a valid label selector operator (key {key})")]
    Operator { key: String, operator: String },
    #[error("values for key {key} with operator {operator} must be {what}")]
    Values { key: String, operator: String, what: &'static str },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    pub fn new(s: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement> = s
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::Equals(k.clone(), v.clone()))
            .collect();
        for e in s.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let (key, op) = (e.key.clone(), e.operator.clone());
            let needs = |ok: bool, what| {
                if ok {
                    Ok(())
                } else {
                    Err(SelectorError::Values { key: key.clone(), operator: op.clone(), what })
                }
            };
            requirements.push(match e.operator.as_str() {
                "In" => {
                    needs(!values.is_empty(), "non-empty")?;
                    Requirement::In(key.clone(), values)
                }
                "NotIn" => {
                    needs(!values.is_empty(), "non-empty")?;
                    Requirement::NotIn(key.clone(), values)
                }
                "Exists" => {
                    needs(values.is_empty(), "empty")?;
                    Requirement::Exists(key.clone())
                }
                "DoesNotExist" => {
                    needs(values.is_empty(), "empty")?;
                    Requirement::DoesNotExist(key.clone())
                }
                _ => return Err(SelectorError::Operator { key, operator: op }),
            });
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.requirements.is_empty() {
            return false;
        }
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
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
        assert_eq!(
            Selector::new(&bad),
            Err(SelectorError::Operator { key: "k".into(), operator: "Near".into() })
        );
    }
}
