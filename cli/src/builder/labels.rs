//! A `-l` selector's text (`app=x,tier!=db,env in (a,b),!legacy,ready`) read as kubectl's
//! `labels.Parse`, for the objects of files: kubectl's builder applies `-l` to them on this side
//! (`apply -f dir -l app=x` acts only on the file's objects the selector matches).

use std::collections::BTreeMap;

use api::validation::selector::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use serde_json::Value;

/// Why a selector's text cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0:?}")]
    Requirement(String),
    #[error("{0}")]
    Invalid(#[from] api::validation::selector::InvalidSelector),
}

/// The selector a `-l` text names (every requirement as a match expression, so a key named
/// twice keeps both).
pub fn parse(text: &str) -> Result<Selector, SelectorError> {
    let mut expressions = Vec::new();
    for part in split_top(text).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        expressions.push(requirement(part)?);
    }
    let s = LabelSelector { match_expressions: Some(expressions), match_labels: None };
    Ok(Selector::from_label_selector(Some(&s))?)
}

/// One requirement: `!k`, `k in (..)`, `k notin (..)`, `k!=v`, `k==v`, `k=v` or `k`.
fn requirement(part: &str) -> Result<LabelSelectorRequirement, SelectorError> {
    let bad = || SelectorError::Requirement(part.to_string());
    let req = |key: &str, operator: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
        key: key.trim().to_string(),
        operator: operator.to_string(),
        values,
    };
    if let Some(key) = part.strip_prefix('!') {
        return Ok(req(key, "DoesNotExist", None));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(req(k, "NotIn", Some(vec![v.trim().to_string()])));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(req(k, "In", Some(vec![v.trim().to_string()])));
    }
    for (word, operator) in [(" notin ", "NotIn"), (" in ", "In")] {
        if let Some((k, rest)) = part.split_once(word) {
            let inner = rest.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')'));
            let values = inner.ok_or_else(bad)?;
            let values: Vec<String> =
                values.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
            return Ok(req(k, operator, Some(values)));
        }
    }
    if part.contains(char::is_whitespace) || part.contains(['(', ')']) {
        return Err(bad());
    }
    Ok(req(part, "Exists", None))
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Whether an object's labels satisfy the selector.
pub fn matches(selector: &Selector, object: &Value) -> bool {
    let labels: BTreeMap<String, String> = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string()))).collect()
        })
        .unwrap_or_default();
    selector.matches(&labels)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(labels: Value) -> Value {
        json!({"metadata": {"name": "o", "labels": labels}})
    }

    #[test]
    fn each_operator_matches_as_kubectl_matches_it() {
        let web = object(json!({"app": "x", "tier": "web"}));
        let bare = json!({"metadata": {"name": "o"}});
        for (text, on_web, on_bare) in [
            ("app=x", true, false),
            ("app==x", true, false),
            ("app!=x", false, true),
            ("app=y", false, false),
            ("tier in (web, db)", true, false),
            ("tier notin (web)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app=x,tier=web", true, false),
            ("app=x,tier in (db,api)", false, false),
            ("", true, true),
        ] {
            let s = parse(text).unwrap();
            assert_eq!(matches(&s, &web), on_web, "{text} on web");
            assert_eq!(matches(&s, &bare), on_bare, "{text} on bare");
        }
    }

    #[test]
    fn a_key_named_twice_keeps_both_requirements() {
        let s = parse("app=x,app=y").unwrap();
        assert!(!matches(&s, &object(json!({"app": "x"}))));
    }

    #[test]
    fn bad_text_is_refused() {
        for text in ["a b", "a in b", "a in ()", "a=b c", "bad key!=1", "a=(x)"] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
