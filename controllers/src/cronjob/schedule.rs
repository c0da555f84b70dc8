//! When a CronJob is due, as upstream's `mostRecentScheduleTime` and `nextScheduleTime`: the
//! latest activation after the last scheduled time (or the creation time) that is not after
//! now, how many were missed on the way, and the next one; in the CronJob's `timeZone` (or the
//! controller's local zone), with the shared parser (`api::cron`).

use api::cron::Schedule;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

/// Upstream logs a warning (event `TooManyMissedTimes`) beyond this many missed activations.
pub const TOO_MANY_MISSED: u32 = 100;
/// Counting stops here: the count only has to show "more than 100".
const COUNT_CAP: u32 = TOO_MANY_MISSED + 1;

/// What is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The latest activation at or before now, if any since `earliest`.
    pub most_recent: Option<Timestamp>,
    /// Activations since `earliest` up to now (capped at 101).
    pub missed: u32,
    /// The first activation after now.
    pub next: Option<Timestamp>,
}

/// Parses `schedule`; `TZ=`/`CRON_TZ=` prefixes resolve through the time zone database.
pub fn parse(schedule: &str) -> Result<Schedule, api::cron::CronError> {
    Schedule::parse_with_zones(schedule, |name| jiff::tz::db().get(name).ok())
}

/// The zone a CronJob runs in: its `timeZone`, else the system's.
pub fn zone(time_zone: Option<&str>) -> Option<TimeZone> {
    match time_zone {
        Some(name) => jiff::tz::db().get(name).ok(),
        None => Some(TimeZone::system()),
    }
}

/// Activations in `(earliest, now]`.
pub fn due(schedule: &Schedule, zone: &TimeZone, earliest: Timestamp, now: Timestamp) -> Due {
    let mut at: Zoned = earliest.to_zoned(zone.clone());
    let (mut most_recent, mut missed) = (None, 0u32);
    loop {
        let Some(t) = schedule.next(&at) else {
            return Due { most_recent, missed, next: None };
        };
        if t.timestamp() > now {
            return Due { most_recent, missed, next: Some(t.timestamp()) };
        }
        missed = (missed + 1).min(COUNT_CAP);
        most_recent = Some(t.timestamp());
        if missed >= COUNT_CAP {
            // Skip ahead: the most recent activation is the last one before now.
            let last = last_before(schedule, zone, t.timestamp(), now);
            let next = schedule.next(&now.to_zoned(zone.clone())).map(|z| z.timestamp());
            return Due { most_recent: Some(last), missed, next };
        }
        at = t;
    }
}

/// The latest activation in `[from, now]`, found by stepping back from `now` in growing windows.
fn last_before(schedule: &Schedule, zone: &TimeZone, from: Timestamp, now: Timestamp) -> Timestamp {
    let mut window = jiff::SignedDuration::from_hours(1);
    loop {
        let start = now.checked_sub(window).unwrap_or(from).max(from);
        let mut at = start.to_zoned(zone.clone());
        let mut found = None;
        while let Some(t) = schedule.next(&at) {
            if t.timestamp() > now {
                break;
            }
            found = Some(t.timestamp());
            at = t;
        }
        if let Some(t) = found {
            return t;
        }
        if start == from {
            return from;
        }
        window = window.checked_mul(4).unwrap_or(window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap_or_default()
    }

    #[test]
    fn every_minute_is_due_once_a_minute_and_counts_missed_runs() {
        let s = parse("* * * * *").unwrap_or_else(|e| panic!("{e}"));
        let utc = TimeZone::UTC;
        let d = due(&s, &utc, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:30Z"));
        assert_eq!(d, Due { most_recent: None, missed: 0, next: Some(at("2026-01-01T00:01:00Z")) });
        let d = due(&s, &utc, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:03:10Z"));
        assert_eq!(d.most_recent, Some(at("2026-01-01T00:03:00Z")));
        assert_eq!(d.missed, 3);
        let d = due(&s, &utc, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:10Z"));
        assert_eq!((d.most_recent, d.missed), (Some(at("2026-01-02T00:00:00Z")), 101));
        assert_eq!(d.next, Some(at("2026-01-02T00:01:00Z")));
    }

    #[test]
    fn hourly_in_a_time_zone_and_bad_schedules() {
        let s = parse("@hourly").unwrap_or_else(|e| panic!("{e}"));
        let d = due(&s, &TimeZone::UTC, at("2026-01-01T00:10:00Z"), at("2026-01-01T01:00:00Z"));
        assert_eq!(d.most_recent, Some(at("2026-01-01T01:00:00Z")));
        let nine = parse("0 9 * * *").unwrap_or_else(|e| panic!("{e}"));
        let tokyo = zone(Some("Asia/Tokyo")).unwrap_or(TimeZone::UTC);
        let d = due(&nine, &tokyo, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:30:00Z"));
        assert_eq!(d.most_recent, None, "09:00 Tokyo exactly is not after itself");
        assert_eq!(d.next, Some(at("2026-01-02T00:00:00Z")), "09:00 in Tokyo is 00:00 UTC");
        assert!(parse("61 * * * *").is_err());
        assert!(zone(Some("Mars/Olympus")).is_none());
    }
}
