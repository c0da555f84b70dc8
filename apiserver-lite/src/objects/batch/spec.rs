//! `validateJobSpec`: the rules a Job and a CronJob's job template share.

use api::validation::pod::validate_pod_template_spec;
use api::validation::{ErrorList, FieldError, Path, names, validate_nonnegative};
use k8s_openapi::api::batch::v1::JobSpec;

const MAX_PARALLELISM_INDEXED: i32 = 100_000;
const MAX_FAILED_INDEXES: i32 = 100_000;
const COMPLETIONS_SOFT_LIMIT: i32 = 100_000;
const PARALLELISM_LIMIT_HIGH_COMPLETIONS: i32 = 10_000;
const MAX_FAILED_INDEXES_HIGH_COMPLETIONS: i32 = 10_000;
const MAX_POD_FAILURE_POLICY_RULES: usize = 20;
const MAX_EXIT_CODE_VALUES: usize = 255;
const MAX_POD_CONDITION_PATTERNS: usize = 20;
const MAX_MANAGED_BY_LENGTH: usize = 63;
const MAX_SUCCESS_POLICY_RULES: usize = 20;

/// Upstream's `validateJobSpec`: the rules a Job and a CronJob's job template share.
pub(super) fn validate_job_spec(spec: &JobSpec, path: &Path, errs: &mut ErrorList) {
    for (field, v) in [
        ("parallelism", spec.parallelism),
        ("completions", spec.completions),
        ("backoffLimit", spec.backoff_limit),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished),
        ("backoffLimitPerIndex", spec.backoff_limit_per_index),
        ("maxFailedIndexes", spec.max_failed_indexes),
    ] {
        if let Some(v) = v {
            validate_nonnegative(i64::from(v), &path.child(field), errs);
        }
    }
    if let Some(d) = spec.active_deadline_seconds {
        validate_nonnegative(d, &path.child("activeDeadlineSeconds"), errs);
    }
    if spec.max_failed_indexes.is_some() && spec.backoff_limit_per_index.is_none() {
        errs.push(FieldError::required(
            &path.child("backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    if let Some(m) = &spec.managed_by {
        validate_domain_prefixed_path(m, &path.child("managedBy"), errs);
        if m.len() > MAX_MANAGED_BY_LENGTH {
            errs.push(FieldError::too_long_max_length(
                &path.child("managedBy"),
                MAX_MANAGED_BY_LENGTH,
            ));
        }
    }
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    if let Some(mode) = spec.completion_mode.as_deref()
        && !matches!(mode, "NonIndexed" | "Indexed")
    {
        errs.push(FieldError::not_supported(
            &path.child("completionMode"),
            mode,
            &["NonIndexed", "Indexed"],
        ));
    }
    if indexed {
        validate_indexed(spec, path, errs);
    } else {
        for (field, v) in [
            ("backoffLimitPerIndex", spec.backoff_limit_per_index),
            ("maxFailedIndexes", spec.max_failed_indexes),
        ] {
            if let Some(v) = v {
                errs.push(FieldError::invalid(
                    &path.child(field),
                    v,
                    "requires indexed completion mode",
                ));
            }
        }
    }
    if spec.pod_failure_policy.is_some() {
        validate_pod_failure_policy(spec, &path.child("podFailurePolicy"), errs);
    }
    if let Some(sp) = &spec.success_policy {
        let p = path.child("successPolicy");
        if !indexed {
            let rendered = serde_json::to_value(sp).unwrap_or_default();
            errs.push(FieldError::invalid(&p, &rendered, "requires indexed completion mode"));
        } else {
            validate_success_policy(spec, &p, errs);
        }
    }
    if let Some(policy) = spec.pod_replacement_policy.as_deref() {
        let p = path.child("podReplacementPolicy");
        if spec.pod_failure_policy.is_some() {
            if policy != "Failed" {
                errs.push(FieldError::not_supported(&p, policy, &["Failed"]));
            }
        } else if !matches!(policy, "Failed" | "TerminatingOrFailed") {
            errs.push(FieldError::not_supported(&p, policy, &["Failed", "TerminatingOrFailed"]));
        }
    }
    errs.extend(validate_pod_template_spec(&spec.template, &path.child("template")));
    let restart_path = path.child("template").child("spec").child("restartPolicy");
    let restart =
        spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or_default();
    match restart {
        "" | "Always" => {
            errs.push(FieldError::required(&restart_path, "valid values: \"OnFailure\", \"Never\""))
        }
        "OnFailure" | "Never" => {
            if spec.pod_failure_policy.is_some() && restart != "Never" {
                errs.push(FieldError::invalid(
                    &restart_path,
                    restart,
                    "only \"Never\" is supported when podFailurePolicy is specified",
                ));
            }
        }
        other => {
            errs.push(FieldError::not_supported(&restart_path, other, &["OnFailure", "Never"]))
        }
    }
}

fn validate_indexed(spec: &JobSpec, path: &Path, errs: &mut ErrorList) {
    if spec.completions.is_none() {
        errs.push(FieldError::required(
            &path.child("completions"),
            "when completion mode is Indexed",
        ));
    }
    if let Some(p) = spec.parallelism.filter(|p| *p > MAX_PARALLELISM_INDEXED) {
        errs.push(FieldError::invalid(
            &path.child("parallelism"),
            p,
            format!("must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed"),
        ));
    }
    if let (Some(c), Some(m)) = (spec.completions, spec.max_failed_indexes)
        && m > c
    {
        errs.push(FieldError::invalid(
            &path.child("maxFailedIndexes"),
            m,
            "must be less than or equal to completions",
        ));
    }
    if let Some(m) = spec.max_failed_indexes.filter(|m| *m > MAX_FAILED_INDEXES) {
        errs.push(FieldError::invalid(
            &path.child("maxFailedIndexes"),
            m,
            format!("must be less than or equal to {MAX_FAILED_INDEXES}"),
        ));
    }
    if spec.completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT)
        && spec.backoff_limit_per_index.is_some()
    {
        if spec.max_failed_indexes.is_none() {
            errs.push(FieldError::required(
                &path.child("maxFailedIndexes"),
                format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
            ));
        }
        let high = format!(
            "when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
        );
        if let Some(p) = spec.parallelism.filter(|p| *p > PARALLELISM_LIMIT_HIGH_COMPLETIONS) {
            errs.push(FieldError::invalid(
                &path.child("parallelism"),
                p,
                format!(
                    "must be less than or equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} {high}"
                ),
            ));
        }
        if let Some(m) =
            spec.max_failed_indexes.filter(|m| *m > MAX_FAILED_INDEXES_HIGH_COMPLETIONS)
        {
            errs.push(FieldError::invalid(
                &path.child("maxFailedIndexes"),
                m,
                format!(
                    "must be less than or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {high}"
                ),
            ));
        }
    }
}

/// `IsDomainPrefixedPath`.
fn validate_domain_prefixed_path(v: &str, path: &Path, errs: &mut ErrorList) {
    if v.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let Some((host, rest)) = v.split_once('/').filter(|(h, r)| !h.is_empty() && !r.is_empty())
    else {
        errs.push(FieldError::invalid(
            path,
            v,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        ));
        return;
    };
    for m in names::dns1123_subdomain_all(host) {
        errs.push(FieldError::invalid(path, host, m));
    }
    let ok = rest.bytes().all(|c| c.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&c));
    if !ok {
        errs.push(FieldError::invalid(
            path,
            rest,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        ));
    }
}

fn validate_pod_failure_policy(spec: &JobSpec, path: &Path, errs: &mut ErrorList) {
    let Some(policy) = &spec.pod_failure_policy else { return };
    let rules_path = path.child("rules");
    if policy.rules.len() > MAX_POD_FAILURE_POLICY_RULES {
        errs.push(FieldError::too_many(
            &rules_path,
            policy.rules.len(),
            MAX_POD_FAILURE_POLICY_RULES,
        ));
    }
    let pod = spec.template.spec.clone().unwrap_or_default();
    let containers: Vec<&str> = pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    for (i, rule) in policy.rules.iter().enumerate() {
        let p = rules_path.index(i);
        let actions = ["Count", "FailIndex", "FailJob", "Ignore"];
        match rule.action.as_str() {
            "" => errs.push(FieldError::required(
                &p.child("action"),
                "valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]",
            )),
            "FailIndex" if spec.backoff_limit_per_index.is_none() => {
                errs.push(FieldError::invalid(
                    &p.child("action"),
                    "FailIndex",
                    "requires the backoffLimitPerIndex to be set",
                ))
            }
            a if actions.contains(&a) => {}
            other => errs.push(FieldError::not_supported(&p.child("action"), other, &actions)),
        }
        if let Some(codes) = &rule.on_exit_codes {
            let cp = p.child("onExitCodes");
            match codes.operator.as_str() {
                "In" | "NotIn" => {}
                "" => errs.push(FieldError::required(
                    &cp.child("operator"),
                    "valid values: [\"In\" \"NotIn\"]",
                )),
                other => errs.push(FieldError::not_supported(
                    &cp.child("operator"),
                    other,
                    &["In", "NotIn"],
                )),
            }
            if let Some(c) = &codes.container_name
                && !containers.contains(&c.as_str())
            {
                errs.push(FieldError::invalid(
                    &cp.child("containerName"),
                    c,
                    "must be one of the container or initContainer names in the pod template",
                ));
            }
            let vp = cp.child("values");
            let rendered = serde_json::to_value(&codes.values).unwrap_or_default();
            if codes.values.is_empty() {
                errs.push(FieldError::invalid(&vp, &rendered, "at least one value is required"));
            } else if codes.values.len() > MAX_EXIT_CODE_VALUES {
                errs.push(FieldError::too_many(&vp, codes.values.len(), MAX_EXIT_CODE_VALUES));
            }
            let mut seen = Vec::new();
            for (j, v) in codes.values.iter().enumerate() {
                if codes.operator == "In" && *v == 0 {
                    errs.push(FieldError::invalid(
                        &vp.index(j),
                        *v,
                        "must not be 0 for the In operator",
                    ));
                }
                if seen.contains(v) {
                    errs.push(FieldError::duplicate(&vp.index(j), *v));
                } else {
                    seen.push(*v);
                }
            }
            if codes.values.windows(2).any(|w| w[0] > w[1]) {
                errs.push(FieldError::invalid(&vp, &rendered, "must be ordered"));
            }
        }
        let patterns = rule.on_pod_conditions.as_deref().unwrap_or_default();
        if !patterns.is_empty() {
            let pp = p.child("onPodConditions");
            if patterns.len() > MAX_POD_CONDITION_PATTERNS {
                errs.push(FieldError::too_many(&pp, patterns.len(), MAX_POD_CONDITION_PATTERNS));
            }
            for (j, pattern) in patterns.iter().enumerate() {
                for m in names::qualified_name(&pattern.type_) {
                    errs.push(FieldError::invalid(&pp.index(j).child("type"), &pattern.type_, m));
                }
                match pattern.status.as_deref().unwrap_or_default() {
                    "True" | "False" | "Unknown" => {}
                    "" => errs.push(FieldError::required(
                        &pp.index(j).child("status"),
                        "valid values: [\"False\" \"True\" \"Unknown\"]",
                    )),
                    other => errs.push(FieldError::not_supported(
                        &pp.index(j).child("status"),
                        other,
                        &["False", "True", "Unknown"],
                    )),
                }
            }
        }
        match (rule.on_exit_codes.is_some(), !patterns.is_empty()) {
            (true, true) => errs.push(FieldError::invalid_omitted(
                &p,
                "specifying both OnExitCodes and OnPodConditions is not supported",
            )),
            (false, false) => errs.push(FieldError::invalid_omitted(
                &p,
                "specifying one of OnExitCodes and OnPodConditions is required",
            )),
            _ => {}
        }
    }
}

fn validate_success_policy(spec: &JobSpec, path: &Path, errs: &mut ErrorList) {
    let Some(policy) = &spec.success_policy else { return };
    let rules_path = path.child("rules");
    if policy.rules.is_empty() {
        errs.push(FieldError::required(
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        ));
    }
    if policy.rules.len() > MAX_SUCCESS_POLICY_RULES {
        errs.push(FieldError::too_many(&rules_path, policy.rules.len(), MAX_SUCCESS_POLICY_RULES));
    }
    let completions = spec.completions.unwrap_or(0);
    for (i, rule) in policy.rules.iter().enumerate() {
        let p = rules_path.index(i);
        if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
            errs.push(FieldError::required(
                &p,
                "at least one of succeededCount or succeededIndexes must be specified",
            ));
        }
        let mut total = 0;
        if let Some(indexes) = &rule.succeeded_indexes {
            match count_indexes(indexes, completions) {
                Ok(n) => total = n,
                Err(e) => errs.push(FieldError::invalid(
                    &p.child("succeededIndexes"),
                    indexes,
                    format!("error parsing succeededIndexes: {e}"),
                )),
            }
        }
        if let Some(count) = rule.succeeded_count {
            let cp = p.child("succeededCount");
            validate_nonnegative(i64::from(count), &cp, errs);
            if count > completions {
                errs.push(FieldError::invalid(
                    &cp,
                    count,
                    format!("must be less than or equal to {completions} (the number of specified completions)"),
                ));
            }
            if rule.succeeded_indexes.is_some() && count > total {
                errs.push(FieldError::invalid(
                    &cp,
                    count,
                    format!("must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"),
                ));
            }
        }
    }
}

/// Upstream's `validateIndexesFormat`: `1,3-5,7`, increasing, below `completions`; the count.
fn count_indexes(text: &str, completions: i32) -> Result<i32, String> {
    if text.is_empty() {
        return Ok(0);
    }
    let mut last: Option<i64> = None;
    let mut total = 0i32;
    let number = |s: &str| {
        s.parse::<i64>().map_err(|_| format!("cannot convert string to integer for index: {s:?}"))
    };
    for interval in text.split(',') {
        let limits: Vec<&str> = interval.split('-').collect();
        if limits.len() > 2 {
            return Err(format!(
                "the fragment {interval:?} violates the requirement that an index interval can have at most two parts separated by '-'"
            ));
        }
        let x = number(limits[0])?;
        if x >= i64::from(completions) {
            return Err(format!("too large index: {:?}", limits[0]));
        }
        if let Some(l) = last.filter(|l| *l >= x) {
            return Err(format!("non-increasing order, previous: {l}, current: {x}"));
        }
        total = total.saturating_add(1);
        last = Some(x);
        if let Some(high) = limits.get(1) {
            let y = number(high)?;
            if y >= i64::from(completions) {
                return Err(format!("too large index: {high:?}"));
            }
            if x >= y {
                return Err(format!("non-increasing order, previous: {x}, current: {y}"));
            }
            total = total.saturating_add(i32::try_from(y - x).unwrap_or(i32::MAX));
            last = Some(y);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn errors(spec: serde_json::Value) -> Vec<String> {
        let mut spec: JobSpec = serde_json::from_value(spec).unwrap();
        let mut pod = k8s_openapi::api::core::v1::Pod {
            spec: spec.template.spec.take(),
            ..Default::default()
        };
        api::defaults::default_pod(&mut pod);
        spec.template.spec = pod.spec;
        let mut errs = ErrorList::default();
        validate_job_spec(&spec, &Path::root("spec"), &mut errs);
        errs.0.iter().map(ToString::to_string).collect()
    }

    fn template(restart: &str) -> serde_json::Value {
        json!({"spec": {"restartPolicy": restart, "containers": [{"name": "main", "image": "x:1"}]}})
    }

    #[test]
    fn indexed_jobs_need_completions_and_per_index_limits_need_indexes() {
        assert!(errors(json!({"template": template("Never")})).is_empty());
        assert_eq!(
            errors(json!({"completionMode": "Indexed", "template": template("Never")})),
            ["spec.completions: Required value: when completion mode is Indexed"]
        );
        assert_eq!(
            errors(json!({"backoffLimitPerIndex": 1, "template": template("Never")})),
            ["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]
        );
        assert_eq!(
            errors(json!({"completionMode": "Sometimes", "template": template("Never")})),
            [
                "spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
            ]
        );
        assert_eq!(
            errors(
                json!({"parallelism": -1, "backoffLimit": -2, "template": template("OnFailure")})
            ),
            [
                "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
                "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0"
            ]
        );
    }

    #[test]
    fn pod_failure_policies_and_success_policies_as_upstream() {
        let policy = json!({"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "nope", "operator": "In", "values": [0, 3, 2, 2]}},
            {"action": "Explode", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Ignore"},
        ]});
        let got = errors(json!({"podFailurePolicy": policy, "template": template("OnFailure")}));
        for want in [
            "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"nope\": must be one of the container or initContainer names in the pod template",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[3]: Duplicate value: 2",
            "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: [0,3,2,2]: must be ordered",
            "spec.podFailurePolicy.rules[1].action: Unsupported value: \"Explode\": supported values: \"Count\", \"FailIndex\", \"FailJob\", \"Ignore\"",
            "spec.podFailurePolicy.rules[2]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
            "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
        ] {
            assert!(got.contains(&want.to_string()), "{want}\nnot in {got:#?}");
        }
        let success = json!({"rules": [{"succeededIndexes": "0-2,1", "succeededCount": 5}]});
        let got = errors(
            json!({"completionMode": "Indexed", "completions": 3, "successPolicy": success, "template": template("Never")}),
        );
        assert_eq!(
            got,
            [
                "spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"0-2,1\": error parsing succeededIndexes: non-increasing order, previous: 2, current: 1",
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 5: must be less than or equal to 3 (the number of specified completions)",
                "spec.successPolicy.rules[0].succeededCount: Invalid value: 5: must be less than or equal to 0 (the number of indexes in the specified succeededIndexes field)",
            ]
        );
    }
}
