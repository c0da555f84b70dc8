//! One policy rule against one request, and one set of rules against another, as upstream's
//! `rbac/v1` evaluation helpers and `component-helpers/auth/rbac/validation` do: verbs, API
//! groups and resources match exactly or by `*`; `pods/log` by `pods/log`, `*/log` or `*`;
//! resource names, when a rule lists any, must include the request's; non-resource URLs match
//! exactly, by `*`, or by a prefix ending in `*`.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::auth::authorizer::{Attributes, Target};

/// `*`: any verb, group, resource or URL.
pub const ALL: &str = "*";

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn has(set: &[String], v: &str) -> bool {
    set.iter().any(|s| s == v)
}

fn matches_or_all(set: &[String], v: &str) -> bool {
    set.iter().any(|s| s == ALL || s == v)
}

/// Whether `rule` allows the request `a`.
pub fn allows(rule: &PolicyRule, a: &Attributes<'_>) -> bool {
    if !matches_or_all(&rule.verbs, a.verb) {
        return false;
    }
    match &a.target {
        Target::Resource(r) => {
            matches_or_all(list(&rule.api_groups), r.group)
                && resource_matches(list(&rule.resources), r.resource, r.subresource)
                && name_matches(list(&rule.resource_names), r.name)
        }
        Target::Path(path) => url_matches(list(&rule.non_resource_urls), path),
    }
}

/// `pods` (no subresource) or `pods/log`: by name, by `*/log`, or by `*`.
fn resource_matches(rules: &[String], resource: &str, sub: &str) -> bool {
    rules.iter().any(|r| {
        if r == ALL {
            return true;
        }
        if sub.is_empty() {
            return r == resource;
        }
        r.strip_prefix(resource).and_then(|rest| rest.strip_prefix('/')) == Some(sub)
            || r.strip_prefix("*/") == Some(sub)
    })
}

fn name_matches(names: &[String], name: &str) -> bool {
    names.is_empty() || has(names, name)
}

fn url_matches(urls: &[String], path: &str) -> bool {
    urls.iter().any(|u| {
        u == ALL || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
    })
}

fn rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    names: &[&str],
    urls: &[&str],
) -> PolicyRule {
    let some = |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| s.to_string()).collect());
    PolicyRule {
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        api_groups: some(groups),
        resources: some(resources),
        resource_names: some(names),
        non_resource_urls: some(urls),
    }
}

/// A resource rule.
pub fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    rule(verbs, groups, resources, &[], &[])
}

/// A resource rule limited to some names.
pub fn named_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    names: &[&str],
) -> PolicyRule {
    rule(verbs, groups, resources, names, &[])
}

/// A non-resource rule.
pub fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    rule(verbs, &[], &[], &[], urls)
}

/// Upstream's `BreakdownRule`: one rule per group, resource, name and verb (or per URL and
/// verb), so that coverage is checked one permission at a time.
pub fn breakdown(r: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in list(&r.api_groups) {
        for resource in list(&r.resources) {
            for verb in &r.verbs {
                if list(&r.resource_names).is_empty() {
                    out.push(rule(&[verb], &[group], &[resource], &[], &[]));
                }
                for name in list(&r.resource_names) {
                    out.push(rule(&[verb], &[group], &[resource], &[name], &[]));
                }
            }
        }
    }
    for url in list(&r.non_resource_urls) {
        for verb in &r.verbs {
            out.push(rule(&[verb], &[], &[], &[], &[url]));
        }
    }
    out
}

/// Whether `owner` holds everything `sub` (a broken-down rule) grants.
fn covers_one(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let all_in =
        |set: &[String], wanted: &[String]| has(set, ALL) || wanted.iter().all(|w| has(set, w));
    let resources_covered = || {
        let set = list(&owner.resources);
        has(set, ALL)
            || list(&sub.resources).iter().all(|path| {
                has(set, path)
                    || path.split_once('/').is_some_and(|(_, s)| has(set, &format!("*/{s}")))
            })
    };
    let urls_covered = || {
        let set = list(&owner.non_resource_urls);
        list(&sub.non_resource_urls).iter().all(|u| url_matches(set, u))
    };
    let names_covered = || {
        let owned = list(&owner.resource_names);
        owned.is_empty()
            || (!list(&sub.resource_names).is_empty()
                && list(&sub.resource_names).iter().all(|n| has(owned, n)))
    };
    all_in(&owner.verbs, &sub.verbs)
        && all_in(list(&owner.api_groups), list(&sub.api_groups))
        && resources_covered()
        && urls_covered()
        && names_covered()
}

/// Upstream's `Covers`: whether `owner` grants everything `servant` grants, and what it lacks,
/// one broken-down rule at a time.
pub fn covers(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| covers_one(o, sub)))
        .collect()
}

/// Upstream's `CompactRules`: simple resource rules (one group, one resource, no names) that
/// differ only in their verbs are merged, in order, their verbs appended as they come.
pub fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let simple = |r: &PolicyRule| {
            list(&r.api_groups).len() == 1
                && list(&r.resources).len() == 1
                && list(&r.resource_names).is_empty()
                && list(&r.non_resource_urls).is_empty()
        };
        if simple(&r)
            && let Some(same) = out
                .iter_mut()
                .find(|o| simple(o) && o.api_groups == r.api_groups && o.resources == r.resources)
        {
            // Upstream appends, repeats included.
            same.verbs.extend(r.verbs);
            continue;
        }
        out.push(r);
    }
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn go_quoted(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// Upstream's `CompactString`: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
pub fn compact_string(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, v) in [
        ("APIGroups", list(&r.api_groups)),
        ("Resources", list(&r.resources)),
        ("NonResourceURLs", list(&r.non_resource_urls)),
        ("ResourceNames", list(&r.resource_names)),
        ("Verbs", &r.verbs[..]),
    ] {
        if !v.is_empty() {
            parts.push(format!("{label}:{}", go_quoted(v)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests;
