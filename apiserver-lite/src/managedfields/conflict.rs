//! Apply conflicts, worded as upstream's `NewConflictError`: `Apply failed with 1 conflict:
//! conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas`, or for several the
//! managers in order, each with its fields on `- ` lines; a `409 Conflict` whose causes name
//! each manager and field.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

use super::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager identifier (see [`super::entries::ManagerId`]).
    pub manager: String,
    pub path: Path,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Conflicts(pub Vec<Conflict>);

/// A manager as upstream's `printManager` names it.
pub fn print_manager(id: &str) -> String {
    let Ok(entry) = serde_json::from_str::<Value>(id) else { return format!("{id:?}") };
    let mut out = format!("{:?}", entry["manager"].as_str().unwrap_or_default());
    if let Some(sub) = entry["subresource"].as_str().filter(|s| !s.is_empty()) {
        out = format!("{out} with subresource {sub:?}");
    }
    if entry["operation"] == "Update" {
        out = format!("{out} using {}", entry["apiVersion"].as_str().unwrap_or_default());
    }
    out
}

impl Conflicts {
    /// The causes of the 409.
    pub fn causes(&self) -> Vec<Value> {
        self.0
            .iter()
            .map(|c| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with {}", print_manager(&c.manager)),
                    "field": c.path.to_string(),
                })
            })
            .collect()
    }

    /// Without the conflicts on fields in `allowed`.
    pub fn without(&self, allowed: &super::set::FieldSet) -> Conflicts {
        Conflicts(self.0.iter().filter(|c| !allowed.has(&c.path.0)).cloned().collect())
    }
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.0.as_slice() {
            return write!(
                f,
                "Apply failed with 1 conflict: conflict with {}: {}",
                print_manager(&only.manager),
                only.path
            );
        }
        let mut by_manager: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
        for c in &self.0 {
            by_manager.entry(&c.manager).or_default().push(&c.path);
        }
        let mut lines = Vec::new();
        for (manager, paths) in by_manager {
            lines.push(format!("conflicts with {}:", print_manager(manager)));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        write!(f, "Apply failed with {} conflicts: {}", self.0.len(), lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update_id(m: &str) -> String {
        format!(r#"{{"manager":"{m}","operation":"Update","apiVersion":"apps/v1"}}"#)
    }

    #[test]
    fn one_conflict_reads_as_upstreams() {
        let c = Conflicts(vec![Conflict {
            manager: update_id("kubectl-client-side-apply"),
            path: Path::fields(&["spec", "replicas"]),
        }]);
        assert_eq!(
            c.to_string(),
            r#"Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas"#
        );
        assert_eq!(c.causes()[0]["field"], ".spec.replicas");
        assert_eq!(c.causes()[0]["reason"], "FieldManagerConflict");
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager_in_order() {
        let apply = r#"{"manager":"a","operation":"Apply"}"#.to_string();
        let status =
            r#"{"manager":"k","operation":"Update","apiVersion":"v1","subresource":"status"}"#;
        let c = Conflicts(vec![
            Conflict { manager: status.into(), path: Path::fields(&["status", "phase"]) },
            Conflict { manager: apply.clone(), path: Path::fields(&["data", "x"]) },
            Conflict { manager: apply, path: Path::fields(&["data", "y"]) },
        ]);
        assert_eq!(
            c.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .data.x\n- .data.y\nconflicts with \"k\" with subresource \"status\" using v1:\n- .status.phase"
        );
    }
}
