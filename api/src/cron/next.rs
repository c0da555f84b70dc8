//! The next activation of a schedule, as upstream's parser computes it: start at the next whole
//! second, then find the first allowed month, day, hour, minute (second 0), wrapping to the
//! next year as needed and giving up after five years. Days match when both the day of month
//! and the day of week match if either field was a wildcard, and when either matches
//! otherwise. Hours, minutes and seconds advance in absolute time, so an activation inside a
//! daylight-saving gap is skipped and one inside a repeated hour runs in both of its instants;
//! days and months advance on the calendar of the schedule's zone.

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan, Zoned};

use super::{Fields, Kind, STAR, Schedule};

impl Schedule {
    /// The first activation strictly after `after`, in `after`'s zone; `None` if there is none
    /// within five years. Without a `TZ=` prefix the schedule runs on `after`'s zone's clock.
    pub fn next(&self, after: &Zoned) -> Option<Zoned> {
        match &self.kind {
            Kind::Every(delay) => {
                let whole = after.timestamp().as_second();
                let t = Timestamp::from_second(whole).ok()?.checked_add(*delay).ok()?;
                Some(t.to_zoned(after.time_zone().clone()))
            }
            Kind::Fields(f) => {
                let zone = self.zone.clone().unwrap_or_else(|| after.time_zone().clone());
                let t = f.next(&after.with_time_zone(zone))?;
                Some(t.with_time_zone(after.time_zone().clone()))
            }
        }
    }
}

fn has(bits: u64, v: i8) -> bool {
    bits & (1u64 << v) != 0
}

/// The zoned time of a civil time (the earlier instant in a repeated hour, the later one
/// across a gap).
fn at(dt: DateTime, tz: &TimeZone) -> Option<Zoned> {
    dt.to_zoned(tz.clone()).ok()
}

fn plus(t: &Zoned, d: SignedDuration) -> Option<Zoned> {
    t.checked_add(d).ok()
}

/// `t` cut down to a multiple of `unit` seconds since the epoch.
fn truncate(t: &Zoned, unit: i64) -> Option<Zoned> {
    let s = t.timestamp().as_second();
    let ts = Timestamp::from_second(s - s.rem_euclid(unit)).ok()?;
    Some(ts.to_zoned(t.time_zone().clone()))
}

impl Fields {
    fn day_matches(&self, t: &Zoned) -> bool {
        let dom = has(self.dom, t.day());
        let dow = has(self.dow, t.weekday().to_sunday_zero_offset());
        if self.dom & STAR != 0 || self.dow & STAR != 0 { dom && dow } else { dom || dow }
    }

    fn next(&self, after: &Zoned) -> Option<Zoned> {
        let tz = after.time_zone().clone();
        // The upcoming whole second.
        let mut t = truncate(after, 1).and_then(|t| plus(&t, SignedDuration::from_secs(1)))?;
        let year_limit = t.year() + 5;
        let mut added = false;
        'wrap: loop {
            if t.year() > year_limit {
                return None;
            }
            while !has(self.month, t.month()) {
                if !added {
                    added = true;
                    t = at(
                        Date::new(t.year(), t.month(), 1)
                            .ok()?
                            .to_datetime(jiff::civil::Time::midnight()),
                        &tz,
                    )?;
                }
                t = at(t.datetime().checked_add(1.month()).ok()?, &tz)?;
                if t.month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(&t) {
                if !added {
                    added = true;
                    t = at(t.date().to_datetime(jiff::civil::Time::midnight()), &tz)?;
                }
                t = at(t.datetime().checked_add(1.day()).ok()?, &tz)?;
                // A day that starts off midnight because of a clock change: move to midnight.
                let h = i64::from(t.hour());
                if h != 0 {
                    let shift = if h > 12 { 24 - h } else { -h };
                    t = plus(&t, SignedDuration::from_hours(shift))?;
                }
                if t.day() == 1 {
                    continue 'wrap;
                }
            }
            while !has(self.hour, t.hour()) {
                if !added {
                    added = true;
                    t = at(
                        t.date().to_datetime(jiff::civil::Time::new(t.hour(), 0, 0, 0).ok()?),
                        &tz,
                    )?;
                }
                t = plus(&t, SignedDuration::from_hours(1))?;
                if t.hour() == 0 {
                    continue 'wrap;
                }
            }
            while !has(self.minute, t.minute()) {
                if !added {
                    added = true;
                    t = truncate(&t, 60)?;
                }
                t = plus(&t, SignedDuration::from_mins(1))?;
                if t.minute() == 0 {
                    continue 'wrap;
                }
            }
            // The second field is always 0.
            while t.second() != 0 {
                if !added {
                    added = true;
                    t = truncate(&t, 1)?;
                }
                t = plus(&t, SignedDuration::from_secs(1))?;
                if t.second() == 0 {
                    continue 'wrap;
                }
            }
            return Some(t);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// New York's rules written out (no tz database needed): EST/EDT, second Sunday of March
    /// to first Sunday of November at 02:00.
    fn new_york() -> TimeZone {
        TimeZone::posix("EST5EDT,M3.2.0,M11.1.0").unwrap()
    }

    fn z(s: &str, tz: &TimeZone) -> Zoned {
        s.parse::<DateTime>().unwrap().to_zoned(tz.clone()).unwrap()
    }

    fn next_n(spec: &str, from: Zoned, n: usize) -> Vec<String> {
        let s = Schedule::parse(spec).unwrap();
        let mut out = Vec::new();
        let mut t = from;
        for _ in 0..n {
            t = s.next(&t).unwrap();
            out.push(t.strftime("%Y-%m-%d %H:%M:%S %Z").to_string());
        }
        out
    }

    #[test]
    fn next_steps_through_minutes_hours_and_month_ends() {
        let utc = TimeZone::UTC;
        assert_eq!(
            next_n("*/1 * * * *", z("2024-01-01T10:00:30", &utc), 2),
            ["2024-01-01 10:01:00 UTC", "2024-01-01 10:02:00 UTC"]
        );
        assert_eq!(
            next_n("0 * * * *", z("2024-01-01T10:00:00", &utc), 1),
            ["2024-01-01 11:00:00 UTC"],
            "strictly after"
        );
        assert_eq!(
            next_n("30 23 31 * *", z("2024-01-31T23:30:00", &utc), 2),
            ["2024-03-31 23:30:00 UTC", "2024-05-31 23:30:00 UTC"],
            "months without a 31st are skipped"
        );
        assert_eq!(
            next_n("0 0 29 2 *", z("2024-03-01T00:00:00", &utc), 1),
            ["2028-02-29 00:00:00 UTC"]
        );
        assert!(
            Schedule::parse("0 0 30 2 *").unwrap().next(&z("2024-01-01T00:00:00", &utc)).is_none()
        );
        assert_eq!(
            next_n("@yearly", z("2024-06-01T00:00:00", &utc), 1),
            ["2025-01-01 00:00:00 UTC"]
        );
    }

    #[test]
    fn day_of_month_or_day_of_week_unless_one_is_a_wildcard() {
        let utc = TimeZone::UTC;
        // 2024-01-01 is a Monday. "1st of the month or any Friday".
        assert_eq!(
            next_n("0 0 1 * fri", z("2023-12-31T12:00:00", &utc), 3),
            ["2024-01-01 00:00:00 UTC", "2024-01-05 00:00:00 UTC", "2024-01-12 00:00:00 UTC"]
        );
        // With the day of month a wildcard, only Fridays.
        assert_eq!(
            next_n("0 0 * * fri", z("2023-12-31T12:00:00", &utc), 1),
            ["2024-01-05 00:00:00 UTC"]
        );
        // `?` is a wildcard too; a stepped wildcard is not.
        assert_eq!(
            next_n("0 0 ? * fri", z("2023-12-31T12:00:00", &utc), 1),
            ["2024-01-05 00:00:00 UTC"]
        );
        assert_eq!(
            next_n("0 0 */2 * fri", z("2024-01-01T12:00:00", &utc), 2),
            ["2024-01-03 00:00:00 UTC", "2024-01-05 00:00:00 UTC"]
        );
    }

    #[test]
    fn daylight_saving_skips_the_gap_and_repeats_the_fold() {
        let ny = new_york();
        // 2024-03-10: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
        assert_eq!(
            next_n("30 2 * * *", z("2024-03-09T12:00:00", &ny), 2),
            ["2024-03-11 02:30:00 EDT", "2024-03-12 02:30:00 EDT"]
        );
        // Hourly across the gap: 01:00 EST, then 03:00 EDT.
        assert_eq!(
            next_n("0 * * * *", z("2024-03-10T00:30:00", &ny), 2),
            ["2024-03-10 01:00:00 EST", "2024-03-10 03:00:00 EDT"]
        );
        // 2024-11-03: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice and runs twice.
        assert_eq!(
            next_n("30 1 * * *", z("2024-11-03T00:00:00", &ny), 3),
            ["2024-11-03 01:30:00 EDT", "2024-11-03 01:30:00 EST", "2024-11-04 01:30:00 EST"]
        );
        // Daily at midnight keeps midnight on both sides of a change.
        assert_eq!(
            next_n("@daily", z("2024-03-09T12:00:00", &ny), 2),
            ["2024-03-10 00:00:00 EST", "2024-03-11 00:00:00 EDT"]
        );
    }

    #[test]
    fn a_zone_prefix_runs_on_its_clock_and_answers_in_the_callers_zone() {
        let ny = new_york();
        let s = Schedule::parse_with_zones("TZ=America/New_York 0 9 * * *", |_| Some(ny.clone()))
            .unwrap();
        let t = s.next(&z("2024-07-01T00:00:00", &TimeZone::UTC)).unwrap();
        assert_eq!(t.strftime("%Y-%m-%d %H:%M %Z").to_string(), "2024-07-01 13:00 UTC");
    }

    #[test]
    fn every_adds_whole_seconds() {
        let s = Schedule::parse("@every 90s").unwrap();
        let from = "2024-01-01T00:00:00.700Z".parse::<Timestamp>().unwrap().to_zoned(TimeZone::UTC);
        assert_eq!(s.next(&from).unwrap().timestamp().to_string(), "2024-01-01T00:01:30Z");
    }
}
