//! Go's durations (`300ms`, `1.5h`, `2h45m`; the `api` crate's parser), as kubectl's flags take
//! them, and kubectl's way of
//! printing an age (`4m22s`, `3d4h`, `2y`: two significant units, as apimachinery's
//! `duration.HumanDuration`).

use std::time::Duration;

/// A Go duration (`api::duration`'s syntax); negative durations are refused.
pub fn parse(s: &str) -> Option<Duration> {
    s.parse::<api::duration::GoDuration>().ok().map(|d| d.0)
}

/// An age as kubectl prints it (`HumanDuration`, shared with the API server's tables).
pub fn human(d: Duration) -> String {
    api::table::human_duration(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse("10"), None);
        assert_eq!(parse("-1s"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn ages_print_with_two_units_as_kubectl() {
        assert_eq!(human(Duration::from_secs(5)), "5s");
        assert_eq!(human(Duration::from_secs(119)), "119s");
        assert_eq!(human(Duration::from_secs(262)), "4m22s");
        assert_eq!(human(Duration::from_secs(600)), "10m");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 120)), "3h2m");
        assert_eq!(human(Duration::from_secs(30 * 3600)), "30h");
        assert_eq!(human(Duration::from_secs(3 * 86_400 + 4 * 3600)), "3d4h");
        assert_eq!(human(Duration::from_secs(30 * 86_400)), "30d");
    }
}
