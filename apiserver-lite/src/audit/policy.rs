//! `--audit-policy-file`: upstream's `audit.k8s.io/v1` Policy, read strictly (an unknown field
//! or a bad level stops the server with the file and the line), and the level a request is
//! logged at: the first rule that matches decides; no match, no event.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// How much of a request is logged (upstream's levels, in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupResources {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyRule {
    pub level: Level,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("--audit-policy-file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("--audit-policy-file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("--audit-policy-file {path}: {field}: {message}")]
    Invalid { path: PathBuf, field: String, message: String },
}

/// What a request is, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
    pub verb: &'a str,
    pub target: Target<'a>,
}

#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Resource {
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    },
    Path(&'a str),
}

/// The decision for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: [bool; 4],
    pub omit_managed_fields: bool,
}

impl Decision {
    pub fn logs(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages[stage as usize]
    }
}

impl Policy {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PolicyError::Read { path: path.into(), source })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Policy, PolicyError> {
        let policy: Policy = serde_yaml_ng::from_str(text)
            .map_err(|e| PolicyError::Parse { path: path.into(), message: e.to_string() })?;
        let invalid = |field: String, message: &str| PolicyError::Invalid {
            path: path.into(),
            field,
            message: message.to_string(),
        };
        if policy.api_version != "audit.k8s.io/v1" || policy.kind != "Policy" {
            return Err(invalid(
                "apiVersion/kind".into(),
                &format!(
                    "must be audit.k8s.io/v1 Policy, not {}/{}",
                    policy.api_version, policy.kind
                ),
            ));
        }
        for (i, rule) in policy.rules.iter().enumerate() {
            let at = |f: &str| format!("rules[{i}].{f}");
            if !rule.non_resource_urls.is_empty()
                && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
            {
                return Err(invalid(
                    at("nonResourceURLs"),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            for (j, url) in rule.non_resource_urls.iter().enumerate() {
                let star = url.find('*');
                if !url.starts_with('/') && url != "*" || star.is_some_and(|s| s != url.len() - 1) {
                    return Err(invalid(
                        at(&format!("nonResourceURLs[{j}]")),
                        "non-resource URLs must begin with '/', with '*' only at the end",
                    ));
                }
            }
            for (j, gr) in rule.resources.iter().enumerate() {
                for (k, r) in gr.resources.iter().enumerate() {
                    let shape_ok = match r.split_once('/') {
                        None => !r.is_empty(),
                        Some((res, sub)) => {
                            !res.is_empty() && !sub.is_empty() && !sub.contains('/')
                        }
                    };
                    if !shape_ok {
                        return Err(invalid(
                            at(&format!("resources[{j}].resources[{k}]")),
                            "must be a resource, resource/subresource, */subresource or resource/*",
                        ));
                    }
                    if !gr.resource_names.is_empty() && r.contains('*') {
                        return Err(invalid(
                            at(&format!("resources[{j}].resourceNames")),
                            "cannot be used with a wildcard resource",
                        ));
                    }
                }
            }
        }
        Ok(policy)
    }

    /// The level and stages for a request (upstream's `policyRuleEvaluator`).
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        let mut omit = [false; 4];
        for s in &self.omit_stages {
            omit[*s as usize] = true;
        }
        let Some(rule) = self.rules.iter().find(|r| r.matches(a)) else {
            return Decision { level: Level::None, omit_stages: omit, omit_managed_fields: false };
        };
        for s in &rule.omit_stages {
            omit[*s as usize] = true;
        }
        Decision {
            level: rule.level,
            omit_stages: omit,
            omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
        }
    }
}

impl PolicyRule {
    fn matches(&self, a: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !self.users.iter().any(|u| u == a.user) {
            return false;
        }
        if !self.user_groups.is_empty() && !a.groups.iter().any(|g| self.user_groups.contains(g)) {
            return false;
        }
        if !self.verbs.is_empty() && !self.verbs.iter().any(|v| v == a.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(a);
        }
        if !self.non_resource_urls.is_empty() {
            let Target::Path(path) = a.target else { return false };
            return self.non_resource_urls.iter().any(|u| match u.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => u == path,
            });
        }
        true
    }

    fn matches_resource(&self, a: &Attributes<'_>) -> bool {
        let Target::Resource { group, resource, subresource, namespace, name } = a.target else {
            return false;
        };
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if subresource.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        self.resources.iter().filter(|gr| gr.group == group).any(|gr| {
            if gr.resources.is_empty() {
                return true;
            }
            if !gr.resource_names.is_empty() && !gr.resource_names.iter().any(|n| n == name) {
                return false;
            }
            gr.resources.iter().any(|r| {
                r == "*"
                    || *r == combined
                    || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
                    || r.strip_suffix("/*") == Some(resource)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: [system:kube-proxy]
- level: Metadata
  resources:
  - group: \"\"
    resources: [secrets, configmaps]
- level: RequestResponse
  verbs: [create]
  resources:
  - group: apps
    resources: [deployments/scale, \"*/status\"]
- level: Request
  namespaces: [team-a]
  omitStages: [ResponseComplete]
- level: Metadata
  nonResourceURLs: [/healthz*, /version]
- level: Request
  userGroups: [system:nodes]
";

    fn policy() -> Policy {
        Policy::parse(Path::new("p.yaml"), POLICY).unwrap()
    }

    fn res<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        ns: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user: "alice",
            groups: &[],
            verb,
            target: Target::Resource {
                group,
                resource,
                subresource: sub,
                namespace: ns,
                name: "x",
            },
        }
    }

    #[test]
    fn the_first_matching_rule_decides_and_no_match_logs_nothing() {
        let p = policy();
        let d = p.decide(&res("get", "", "secrets", "", "default"));
        assert_eq!(d.level, Level::Metadata);
        assert!(!d.logs(Stage::RequestReceived) && d.logs(Stage::ResponseComplete));
        assert_eq!(
            p.decide(&res("create", "apps", "deployments", "scale", "d")).level,
            Level::RequestResponse
        );
        assert_eq!(
            p.decide(&res("create", "apps", "daemonsets", "status", "d")).level,
            Level::RequestResponse
        );
        assert_eq!(
            p.decide(&res("update", "apps", "deployments", "scale", "d")).level,
            Level::None
        );
        let ns = p.decide(&res("get", "", "pods", "", "team-a"));
        assert_eq!(ns.level, Level::Request);
        assert!(!ns.logs(Stage::ResponseComplete));
        assert_eq!(p.decide(&res("get", "", "pods", "", "team-b")).level, Level::None);
        let path = |p: &'static str| Attributes {
            user: "alice",
            groups: &[],
            verb: "get",
            target: Target::Path(p),
        };
        assert_eq!(p.decide(&path("/healthz/ready")).level, Level::Metadata);
        assert_eq!(p.decide(&path("/version")).level, Level::Metadata);
        assert_eq!(p.decide(&path("/versions")).level, Level::None);
        let proxy = Attributes { user: "system:kube-proxy", ..res("get", "", "secrets", "", "") };
        assert_eq!(p.decide(&proxy).level, Level::None);
        let groups = ["system:nodes".to_string()];
        let node = Attributes { groups: &groups, ..res("get", "", "nodes", "", "") };
        assert_eq!(p.decide(&node).level, Level::Request);
    }

    #[test]
    fn a_policy_that_does_not_parse_names_the_file_and_line() {
        let bad = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n";
        let e = Policy::parse(Path::new("/etc/audit.yaml"), bad).unwrap_err().to_string();
        assert!(e.contains("/etc/audit.yaml") && e.contains("line 4"), "{e}");
        let unknown =
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  verb: [get]\n";
        let e = Policy::parse(Path::new("p"), unknown).unwrap_err().to_string();
        assert!(e.contains("unknown field `verb`") && e.contains("line 5"), "{e}");
        let kind = "apiVersion: v1\nkind: ConfigMap\n";
        let e = Policy::parse(Path::new("p"), kind).unwrap_err().to_string();
        assert!(e.contains("audit.k8s.io/v1 Policy"), "{e}");
        let both = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [/x]\n  namespaces: [a]\n";
        let e = Policy::parse(Path::new("p"), both).unwrap_err().to_string();
        assert!(e.contains("rules[0].nonResourceURLs"), "{e}");
        let url = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: [/a*b]\n";
        assert!(Policy::parse(Path::new("p"), url).is_err());
    }
}
