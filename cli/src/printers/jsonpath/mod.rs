//! `-o jsonpath=TEMPLATE`: client-go's JSONPath templates ([`parse`]: the grammar, into
//! [`Node`]s; [`eval`]: executing them over an object; [`fmt`]: values written as Go writes
//! them). One expression's results are joined by a space; strings print bare, maps and lists
//! as compact JSON.

pub mod eval;
pub mod fmt;
pub mod parse;

use serde_json::Value;

pub use parse::Node;

/// A template that failed, worded as kubectl words it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TemplateError {
    #[error("template format specified but no template given")]
    Empty,
    #[error("error reading --template {path}, {reason}")]
    Read { path: String, reason: String },
    #[error("error parsing jsonpath {template}, {reason}")]
    Parse { template: String, reason: String },
    /// Executing failed; kubectl prints the template and the object it was given.
    #[error(
        "error executing jsonpath {template:?}: Error executing template: {reason}. Printing more information for debugging the template:\n\ttemplate was:\n\t\t{template}\n\tobject given to jsonpath engine was:\n\t\t{object}\n\n"
    )]
    Execute { template: String, reason: String, object: String },
}

/// A parsed `-o jsonpath` template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub raw: String,
    pub nodes: Vec<Node>,
}

impl Template {
    pub fn parse(raw: &str) -> Result<Template, TemplateError> {
        if raw.is_empty() {
            return Err(TemplateError::Empty);
        }
        let nodes = parse::parse(raw)
            .map_err(|reason| TemplateError::Parse { template: raw.to_string(), reason })?;
        Ok(Template { raw: raw.to_string(), nodes })
    }

    /// The groups of values each top-level node yields over `data`.
    pub fn find<'v>(
        &self,
        data: &'v Value,
        allow_missing: bool,
    ) -> Result<Vec<Vec<eval::V<'v>>>, String> {
        eval::Exec::new(allow_missing).find(&self.nodes, 0, eval::V::J(data))
    }

    /// What kubectl prints for `data`: each group's values joined by a space.
    pub fn execute(&self, data: &Value, allow_missing: bool) -> Result<String, TemplateError> {
        let groups = self.find(data, allow_missing).map_err(|reason| TemplateError::Execute {
            template: self.raw.clone(),
            reason,
            object: fmt::go_sharp_v(data),
        })?;
        let mut out = String::new();
        for group in groups {
            out.push_str(&group.iter().map(fmt::text).collect::<Vec<_>>().join(" "));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> Value {
        json!({"kind": "List", "items": [
            {"metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}},
             "spec": {"containers": [{"name": "c1", "image": "nginx"}, {"name": "c2", "image": "busybox"}]},
             "status": {"restarts": 3}},
            {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c3", "image": "nginx"}]},
             "status": {"restarts": 0}}]})
    }

    fn run(t: &str) -> Result<String, TemplateError> {
        Template::parse(t)?.execute(&pods(), true)
    }

    #[test]
    fn several_results_are_joined_by_a_space() {
        assert_eq!(run("{.items[*].metadata.name}").unwrap(), "a b");
        assert_eq!(
            run("names: {.items[0].metadata.name},{.items[-1].metadata.name}").unwrap(),
            "names: a,b"
        );
    }

    #[test]
    fn escaped_dots_reach_a_label_key() {
        assert_eq!(run(r"{.items[0].metadata.labels.app\.kubernetes\.io/name}").unwrap(), "web");
    }

    #[test]
    fn maps_and_lists_print_as_compact_json() {
        assert_eq!(
            run("{.items[1].spec.containers}").unwrap(),
            r#"[{"image":"nginx","name":"c3"}]"#
        );
        assert_eq!(run("{.items[0].status}").unwrap(), r#"{"restarts":3}"#);
    }

    #[test]
    fn range_runs_its_body_per_item_then_resumes_after_end() {
        assert_eq!(
            run(r#"{range .items[*]}{.metadata.name}:{range .spec.containers[*]}{.name} {end};{end}|{.kind}"#).unwrap(),
            "a:c1 c2 ;b:c3 ;|List"
        );
        assert_eq!(run(r#"{range .nope[*]}x{end}after"#).unwrap(), "after");
        // Without `end`, the body runs once more over the outer object (upstream's quirk).
        assert_eq!(run(r#"{range .items[*]}{.metadata.name},"#).unwrap(), "a,b,,");
    }

    #[test]
    fn filters_compare_with_every_operator() {
        assert_eq!(
            run(r#"{.items[*].spec.containers[?(@.image=="nginx")].name}"#).unwrap(),
            "c1 c3"
        );
        assert_eq!(run(r#"{.items[*].spec.containers[?(@.image!="nginx")].name}"#).unwrap(), "c2");
        assert_eq!(run("{.items[?(@.status.restarts>0)].metadata.name}").unwrap(), "a");
        assert_eq!(run("{.items[?(@.status.restarts<=0)].metadata.name}").unwrap(), "b");
        assert_eq!(run("{.items[?(@.status.restarts>=0)].metadata.name}").unwrap(), "a b");
        assert_eq!(run("{.items[?(@.status.restarts<3)].metadata.name}").unwrap(), "b");
        assert_eq!(run("{.items[?(@.metadata.labels)].metadata.name}").unwrap(), "a");
    }

    #[test]
    fn recursive_descent_finds_every_depth() {
        assert_eq!(run("{..image}").unwrap(), "nginx busybox nginx");
    }

    #[test]
    fn slices_steps_and_unions_select_items() {
        assert_eq!(run("{.items[0].spec.containers[0:2:1].name}").unwrap(), "c1 c2");
        assert_eq!(run("{.items[0].spec.containers[1:].name}").unwrap(), "c2");
        assert_eq!(run("{.items[0].spec.containers[0,1].name}").unwrap(), "c1 c2");
        assert_eq!(run("{.items[0].spec.containers[0:0]}").unwrap(), "");
        assert_eq!(run(r#"{@.kind}{"\t"}{$.kind}"#).unwrap(), "List\tList");
    }

    #[test]
    fn a_missing_key_prints_nothing_unless_missing_keys_are_refused() {
        assert_eq!(run("{.nope}x").unwrap(), "x");
        let t = Template::parse("{.nope}").unwrap();
        let e = t.execute(&json!({"a": 1}), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error executing jsonpath \"{.nope}\": Error executing template: nope is not found. Printing more information for debugging the template:\n\ttemplate was:\n\t\t{.nope}\n\tobject given to jsonpath engine was:\n\t\tmap[string]interface {}{\"a\":1}\n\n"
        );
    }

    #[test]
    fn execution_errors_are_upstreams() {
        let reason = |t: &str| match run(t).unwrap_err() {
            TemplateError::Execute { reason, .. } => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(reason("{.items[5]}"), "array index out of bounds: index 5, length 2");
        assert_eq!(reason("{.items[-3]}"), "array index out of bounds: index -1, length 2");
        assert_eq!(reason("{.items[0:2:0]}"), "step must be > 0");
        assert_eq!(reason("{.kind[0]}"), "string is not array or slice");
        assert_eq!(reason("{.kind[?(@.x)]}"), "List is not array or slice and cannot be filtered");
        assert_eq!(reason("{end}"), "not in range, nothing to end");
        assert_eq!(reason("{.a b}"), "unrecognized identifier b");
        assert_eq!(
            reason(r#"{.items[?(@.metadata.name>1)]}"#),
            "incompatible types for comparison"
        );
    }

    #[test]
    fn an_empty_or_malformed_template_is_refused() {
        assert_eq!(Template::parse("").unwrap_err(), TemplateError::Empty);
        assert_eq!(
            Template::parse("{.x").unwrap_err().to_string(),
            "error parsing jsonpath {.x, unclosed action"
        );
    }
}
