//! Go's durations (`300ms`, `1.5h`, `2h45m`; the `api` crate's parser), as kubectl's flags take
//! them, and kubectl's way of
//! printing an age (`4m22s`, `3d4h`, `2y`: two significant units, as apimachinery's
//! `duration.HumanDuration`).

use std::time::Duration;

/// A Go duration (`api::duration`'s syntax); negative durations are refused.
pub fn parse(s: &str) -> Option<Duration> {
    s.parse::<api::duration::GoDuration>().ok().map(|d| d.0)
}

/// An age as kubectl prints it (`HumanDuration`).
pub fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 1 {
        return "0s".into();
    }
    let (s, m, h, days) = (secs, secs / 60, secs / 3600, secs / 86_400);
    if s < 60 * 2 {
        return format!("{s}s");
    }
    if m < 10 {
        let rs = s % 60;
        return if rs == 0 { format!("{m}m") } else { format!("{m}m{rs}s") };
    }
    if m < 60 * 3 {
        return format!("{m}m");
    }
    if h < 8 {
        let rm = m % 60;
        return if rm == 0 { format!("{h}h") } else { format!("{h}h{rm}m") };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        let rh = h % 24;
        return if rh == 0 { format!("{days}d") } else { format!("{days}d{rh}h") };
    }
    if h < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if h < 24 * 365 * 8 {
        let dy = days % 365;
        return if dy == 0 { format!("{years}y") } else { format!("{years}y{dy}d") };
    }
    format!("{years}y")
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
