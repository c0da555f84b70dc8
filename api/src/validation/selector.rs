//! Label selectors (`metav1.LabelSelector`): upstream's `ValidateLabelSelector` with its paths
//! and messages, matching a label set (`LabelSelectorAsSelector` then `Matches`), and the text
//! form kubectl prints and `Scale` carries (`app=web,tier in (a,b)`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::names;
use super::pod::validate_labels;
use super::{ErrorList, FieldError, Path};

/// One requirement of a selector, as upstream's `labels.Requirement`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    fn key(&self) -> &str {
        match self {
            Requirement::Equals(k, _)
            | Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k) => k,
        }
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        }
    }

    fn text(&self) -> String {
        let set = |vs: &Vec<String>| {
            let mut vs = vs.clone();
            vs.sort();
            vs.dedup();
            vs.join(",")
        };
        match self {
            Requirement::Equals(k, v) => format!("{k}={v}"),
            Requirement::In(k, vs) => format!("{k} in ({})", set(vs)),
            Requirement::NotIn(k, vs) => format!("{k} notin ({})", set(vs)),
            Requirement::Exists(k) => k.clone(),
            Requirement::DoesNotExist(k) => format!("!{k}"),
        }
    }
}

/// A selector converted for matching. `None` (a missing selector) matches nothing; an empty
/// one matches everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector(Option<Vec<Requirement>>);

/// Why a selector cannot be used (upstream then reports `invalid label selector`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector: {0}")]
pub struct InvalidSelector(String);

impl Selector {
    /// `LabelSelectorAsSelector`.
    pub fn from_label_selector(s: Option<&LabelSelector>) -> Result<Self, InvalidSelector> {
        let Some(s) = s else { return Ok(Selector(None)) };
        let mut reqs = Vec::new();
        let valid_key = |k: &str| {
            if names::qualified_name(k).is_empty() {
                Ok(())
            } else {
                Err(InvalidSelector(format!("invalid label key {k:?}")))
            }
        };
        let valid_values =
            |vs: &[String]| match vs.iter().find(|v| !names::label_value(v).is_empty()) {
                Some(v) => Err(InvalidSelector(format!("invalid label value: {v:?}"))),
                None => Ok(()),
            };
        for (k, v) in s.match_labels.iter().flatten() {
            valid_key(k)?;
            valid_values(std::slice::from_ref(v))?;
            reqs.push(Requirement::Equals(k.clone(), v.clone()));
        }
        for e in s.match_expressions.iter().flatten() {
            valid_key(&e.key)?;
            let values = e.values.clone().unwrap_or_default();
            let req = match e.operator.as_str() {
                "In" | "NotIn" => {
                    if values.is_empty() {
                        return Err(InvalidSelector(format!(
                            "for 'in', 'notin' operators, values set can't be empty ({})",
                            e.key
                        )));
                    }
                    valid_values(&values)?;
                    if e.operator == "In" {
                        Requirement::In(e.key.clone(), values)
                    } else {
                        Requirement::NotIn(e.key.clone(), values)
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !values.is_empty() {
                        return Err(InvalidSelector(
                            "values set must be empty for exists and does not exist".into(),
                        ));
                    }
                    if e.operator == "Exists" {
                        Requirement::Exists(e.key.clone())
                    } else {
                        Requirement::DoesNotExist(e.key.clone())
                    }
                }
                other => {
                    return Err(InvalidSelector(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            reqs.push(req);
        }
        reqs.sort_by(|a, b| a.key().cmp(b.key()));
        Ok(Selector(Some(reqs)))
    }

    /// Whether it selects everything (an empty selector).
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_some_and(Vec::is_empty)
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.0 {
            None => false,
            Some(reqs) => reqs.iter().all(|r| r.matches(labels)),
        }
    }

    /// The selector's text, as upstream's `Selector.String()`; empty for none or everything.
    pub fn text(&self) -> String {
        self.0.iter().flatten().map(Requirement::text).collect::<Vec<_>>().join(",")
    }
}

/// kubectl's `FormatLabelSelector`: the text, `<none>` when empty, `<error>` when invalid.
pub fn format_label_selector(s: Option<&LabelSelector>) -> String {
    match Selector::from_label_selector(s) {
        Err(_) => "<error>".into(),
        Ok(sel) => {
            let t = sel.text();
            if t.is_empty() { "<none>".into() } else { t }
        }
    }
}

/// `ValidateLabelSelector` (label values in expressions checked too).
pub fn validate_label_selector(s: Option<&LabelSelector>, path: &Path) -> ErrorList {
    let mut errs = ErrorList::default();
    let Some(s) = s else { return errs };
    validate_labels(s.match_labels.as_ref(), &path.child("matchLabels"), &mut errs);
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        &p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        &p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                &p.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        for m in names::qualified_name(&e.key) {
            errs.push(FieldError::invalid(&p.child("key"), e.key.as_str(), m));
        }
        for (j, v) in values.iter().enumerate() {
            for m in names::label_value(v) {
                errs.push(FieldError::invalid(&p.child("values").index(j), v, m));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn selectors_match_print_and_validate_as_upstreams() {
        let s = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                expr("tier", "In", &["b", "a"]),
                expr("legacy", "DoesNotExist", &[]),
            ]),
        };
        let sel = Selector::from_label_selector(Some(&s)).unwrap();
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "a")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "a"), ("legacy", "")])));
        assert!(!sel.matches(&labels(&[("app", "web")])));
        assert_eq!(sel.text(), "app=web,!legacy,tier in (a,b)");
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&LabelSelector::default())), "<none>");
        assert!(Selector::from_label_selector(None).unwrap().matches(&labels(&[])).eq(&false));
        assert!(Selector::from_label_selector(Some(&LabelSelector::default())).unwrap().is_empty());

        let bad = LabelSelector {
            match_labels: Some(labels(&[("bad key!", "v")])),
            match_expressions: Some(vec![expr("k", "Has", &[]), expr("k", "In", &[])]),
        };
        assert!(Selector::from_label_selector(Some(&bad)).is_err());
        let errs = validate_label_selector(Some(&bad), &Path::root("spec").child("selector"));
        let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.selector.matchLabels",
                "spec.selector.matchExpressions[0].operator",
                "spec.selector.matchExpressions[1].values"
            ]
        );
        assert_eq!(
            errs.0[1].to_string(),
            "spec.selector.matchExpressions[0].operator: Invalid value: \"Has\": not a valid selector operator"
        );
    }
}
