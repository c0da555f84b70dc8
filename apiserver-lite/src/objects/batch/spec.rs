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
            errs.push(FieldError::too_long(&path.child("managedBy"), MAX_MANAGED_BY_LENGTH));
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

/// Upstream's `validateIndexesFormat`: `1,3-5,7`, ordered, below `completions`; the count.
fn count_indexes(text: &str, completions: i32) -> Result<i32, String> {
    let mut total = 0i32;
    let mut last: i64 = -1;
    for interval in text.split(',').filter(|s| !s.is_empty()) {
        let (a, b) = match interval.split_once('-') {
            Some((a, b)) => (a, b),
            None => (interval, interval),
        };
        let parse = |s: &str| {
            s.parse::<i64>()
                .map_err(|_| format!("cannot convert string to integer for index: {s:?}"))
        };
        let (x, y) = (parse(a)?, parse(b)?);
        if x > y {
            return Err(format!("non-increasing order, previous: {x}, current: {y}"));
        }
        if x <= last {
            return Err(format!("non-increasing order, previous: {last}, current: {x}"));
        }
        if y >= i64::from(completions) {
            return Err(format!("too large index: {y}"));
        }
        if x < 0 {
            return Err(format!("too small index: {x}"));
        }
        last = y;
        total = total.saturating_add(i32::try_from(y - x + 1).unwrap_or(i32::MAX));
    }
    Ok(total)
}
