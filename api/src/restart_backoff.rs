//! A pod's own crash back-off, from our annotations ([`keys::CRASH_BACKOFF_INITIAL`],
//! [`keys::CRASH_BACKOFF_MAX`]): node agents and control-plane pods that must come back within
//! seconds, which upstream's node-wide 10s → 300s cannot say (kubernetes/kubernetes#57291).
//! Validated with the pod, so a bad value is refused naming the annotation.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::duration::GoDuration;
use crate::keys;
use crate::validation::{FieldError, Path};

/// The least and the most either annotation may say.
pub const FLOOR: Duration = Duration::from_secs(1);
pub const CEILING: Duration = Duration::from_secs(300);

/// What a pod's annotations ask for; `None` where they say nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodBackoff {
    pub initial: Option<Duration>,
    pub max: Option<Duration>,
}

fn path(key: &str) -> Path {
    Path::root("metadata").child("annotations").key(key)
}

fn one(annotations: &BTreeMap<String, String>, key: &str) -> Result<Option<Duration>, FieldError> {
    let Some(v) = annotations.get(key) else { return Ok(None) };
    let d = v
        .parse::<GoDuration>()
        .map_err(|e| FieldError::invalid(&path(key), v.as_str(), e.to_string()))?;
    if d.0 < FLOOR || d.0 > CEILING {
        return Err(FieldError::invalid(&path(key), v.as_str(), "must be between 1s and 5m0s"));
    }
    Ok(Some(d.0))
}

/// The pod's back-off, or the errors of its annotations.
pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Result<PodBackoff, Vec<FieldError>> {
    let Some(a) = annotations else { return Ok(PodBackoff::default()) };
    let (initial, max) = (one(a, keys::CRASH_BACKOFF_INITIAL), one(a, keys::CRASH_BACKOFF_MAX));
    match (initial, max) {
        (Ok(initial), Ok(max)) => {
            if let (Some(i), Some(m)) = (initial, max)
                && i > m
            {
                let v = a[keys::CRASH_BACKOFF_INITIAL].as_str();
                let detail = format!(
                    "must not be more than {} ({})",
                    keys::CRASH_BACKOFF_MAX,
                    a[keys::CRASH_BACKOFF_MAX]
                );
                return Err(vec![FieldError::invalid(
                    &path(keys::CRASH_BACKOFF_INITIAL),
                    v,
                    detail,
                )]);
            }
            Ok(PodBackoff { initial, max })
        }
        (initial, max) => Err(initial.err().into_iter().chain(max.err()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_pod_may_ask_for_its_own_back_off_within_bounds() {
        assert_eq!(of(None), Ok(PodBackoff::default()));
        let ok = a(&[(keys::CRASH_BACKOFF_INITIAL, "1s"), (keys::CRASH_BACKOFF_MAX, "5s")]);
        let want = PodBackoff { initial: Some(FLOOR), max: Some(Duration::from_secs(5)) };
        assert_eq!(of(Some(&ok)), Ok(want));
        let max_only = a(&[(keys::CRASH_BACKOFF_MAX, "1m")]);
        assert_eq!(of(Some(&max_only)).unwrap().max, Some(Duration::from_secs(60)));
    }

    #[test]
    fn bad_values_name_the_annotation() {
        let cases = [
            (a(&[(keys::CRASH_BACKOFF_INITIAL, "soon")]), "invalid duration \"soon\""),
            (a(&[(keys::CRASH_BACKOFF_INITIAL, "500ms")]), "must be between 1s and 5m0s"),
            (a(&[(keys::CRASH_BACKOFF_MAX, "10m")]), "must be between 1s and 5m0s"),
            (
                a(&[(keys::CRASH_BACKOFF_INITIAL, "10s"), (keys::CRASH_BACKOFF_MAX, "5s")]),
                "must not be more than kubelet-rs.io/crash-loop-backoff-max (5s)",
            ),
        ];
        for (annotations, want) in cases {
            let errs = of(Some(&annotations)).unwrap_err();
            let text = errs.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            assert!(
                text.contains("metadata.annotations[kubelet-rs.io/crash-loop-backoff-"),
                "{text}"
            );
            assert!(text.contains(want), "{text}");
        }
        let both = a(&[(keys::CRASH_BACKOFF_INITIAL, "x"), (keys::CRASH_BACKOFF_MAX, "y")]);
        assert_eq!(of(Some(&both)).unwrap_err().len(), 2);
    }
}
