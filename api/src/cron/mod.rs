//! CronJob schedules as upstream reads them (the `robfig/cron` v3 standard parser that
//! kube-apiserver validates with and the CronJob controller schedules with): five fields
//! (minute, hour, day of month, month, day of week) with `*`, `?`, ranges, steps, lists and
//! names (`jan`, `mon`), the `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`,
//! `@hourly` and `@every <duration>` descriptors, and a `TZ=`/`CRON_TZ=` prefix. Parse errors carry
//! the parser's own words, which upstream puts in its 422 answers.
//!
//! - this file: parsing into a [`Schedule`];
//! - [`next`](Schedule::next) (in `next.rs`): the first activation after a time, with the
//!   parser's day-of-month/day-of-week OR rule and its daylight-saving behaviour.
//!
//! No IO: time zones named in a schedule are resolved by a function the caller passes.

mod next;

use jiff::SignedDuration;
use jiff::tz::TimeZone;

/// A field's bit for "the field was `*` or `?`" (the day rule looks at it).
const STAR: u64 = 1 << 63;

/// The bounds and names of one field.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DOM: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[("sun", 0), ("mon", 1), ("tue", 2), ("wed", 3), ("thu", 4), ("fri", 5), ("sat", 6)],
};

/// Why a schedule does not parse, worded as the parser upstream uses words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error("empty spec string")]
    Empty,
    #[error("provided bad location {zone}: unknown time zone {zone}")]
    BadLocation { zone: String },
    #[error("expected exactly 5 fields, found {found}: [{}]", fields.join(" "))]
    FieldCount { found: usize, fields: Vec<String> },
    #[error("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: {reason}")]
    NotANumber { expr: String, reason: &'static str },
    #[error("negative number ({value}) not allowed: {expr}")]
    Negative { value: i64, expr: String },
    #[error("too many hyphens: {expr}")]
    TooManyHyphens { expr: String },
    #[error("too many slashes: {expr}")]
    TooManySlashes { expr: String },
    #[error("beginning of range ({start}) below minimum ({min}): {expr}")]
    BelowMinimum { start: u64, min: u64, expr: String },
    #[error("end of range ({end}) above maximum ({max}): {expr}")]
    AboveMaximum { end: u64, max: u64, expr: String },
    #[error("beginning of range ({start}) beyond end of range ({end}): {expr}")]
    StartAfterEnd { start: u64, end: u64, expr: String },
    #[error("step of range should be a positive number: {expr}")]
    ZeroStep { expr: String },
    #[error("failed to parse duration {descriptor}: time: {reason}")]
    BadDuration { descriptor: String, reason: String },
    #[error("unrecognized descriptor: {descriptor}")]
    UnknownDescriptor { descriptor: String },
}

/// The fields of a five-field schedule as bit sets (bit n set: value n allowed; [`STAR`] set:
/// the field was a wildcard).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Fields(Fields),
    /// `@every <duration>`: a constant delay, whole seconds, at least one.
    Every(SignedDuration),
}

/// A parsed schedule. Without a `TZ=` prefix it runs in the zone of the time it is asked
/// about (the controller passes the CronJob's `timeZone`, or its own local zone).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    kind: Kind,
    zone: Option<TimeZone>,
}

impl Schedule {
    /// Parses a schedule with no time zone prefix allowed to resolve (a `TZ=` prefix is then
    /// an unknown location).
    pub fn parse(spec: &str) -> Result<Self, CronError> {
        Self::parse_with_zones(spec, |_| None)
    }

    /// Parses a schedule; `zone` resolves the name of a `TZ=`/`CRON_TZ=` prefix.
    pub fn parse_with_zones(
        spec: &str,
        zone: impl Fn(&str) -> Option<TimeZone>,
    ) -> Result<Self, CronError> {
        if spec.is_empty() {
            return Err(CronError::Empty);
        }
        let mut spec = spec;
        let mut location = None;
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let (prefix, rest) = spec.split_once(' ').unwrap_or((spec, ""));
            let name = prefix.split_once('=').map_or("", |(_, n)| n);
            let tz = zone(name).ok_or_else(|| CronError::BadLocation { zone: name.into() })?;
            location = Some(tz);
            spec = rest.trim();
        }
        let kind = if spec.starts_with('@') { descriptor(spec)? } else { five_fields(spec)? };
        Ok(Self { kind, zone: location })
    }

    /// The time zone a `TZ=` prefix named, if any.
    pub fn zone(&self) -> Option<&TimeZone> {
        self.zone.as_ref()
    }
}

fn five_fields(spec: &str) -> Result<Kind, CronError> {
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(CronError::FieldCount {
            found: fields.len(),
            fields: fields.iter().map(|f| (*f).to_string()).collect(),
        });
    }
    Ok(Kind::Fields(Fields {
        minute: field(fields[0], MINUTES)?,
        hour: field(fields[1], HOURS)?,
        dom: field(fields[2], DOM)?,
        month: field(fields[3], MONTHS)?,
        dow: field(fields[4], DOW)?,
    }))
}

/// Every value of a field, marked as a wildcard.
fn all(b: Bounds) -> u64 {
    bits(b.min, b.max, 1) | STAR
}

fn descriptor(spec: &str) -> Result<Kind, CronError> {
    let one = |v: u64| 1u64 << v;
    let fields = match spec {
        "@yearly" | "@annually" => {
            Fields { minute: one(0), hour: one(0), dom: one(1), month: one(1), dow: all(DOW) }
        }
        "@monthly" => {
            Fields { minute: one(0), hour: one(0), dom: one(1), month: all(MONTHS), dow: all(DOW) }
        }
        "@weekly" => {
            Fields { minute: one(0), hour: one(0), dom: all(DOM), month: all(MONTHS), dow: one(0) }
        }
        "@daily" | "@midnight" => Fields {
            minute: one(0),
            hour: one(0),
            dom: all(DOM),
            month: all(MONTHS),
            dow: all(DOW),
        },
        "@hourly" => Fields {
            minute: one(0),
            hour: all(HOURS),
            dom: all(DOM),
            month: all(MONTHS),
            dow: all(DOW),
        },
        _ => {
            let Some(text) = spec.strip_prefix("@every ") else {
                return Err(CronError::UnknownDescriptor { descriptor: spec.into() });
            };
            let d = go_duration(text)
                .map_err(|reason| CronError::BadDuration { descriptor: spec.into(), reason })?;
            // Whole seconds, at least one, as the parser's constant-delay schedule keeps it.
            let secs = d.as_secs().max(1);
            return Ok(Kind::Every(SignedDuration::from_secs(secs)));
        }
    };
    Ok(Kind::Fields(fields))
}

/// A comma-separated list of ranges (empty items skipped, as the parser does).
fn field(text: &str, b: Bounds) -> Result<u64, CronError> {
    let mut out = 0;
    for expr in text.split(',').filter(|e| !e.is_empty()) {
        out |= range(expr, b)?;
    }
    Ok(out)
}

/// `*`, `?`, `n`, `a-b`, each optionally `/step`; `n/step` means `n-max/step`.
fn range(expr: &str, b: Bounds) -> Result<u64, CronError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra) = if matches!(low_and_high[0], "*" | "?") {
        (b.min, b.max, STAR)
    } else {
        let start = int_or_name(low_and_high[0], b)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], b)?,
            _ => return Err(CronError::TooManyHyphens { expr: expr.into() }),
        };
        (start, end, 0)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = number(range_and_step[1])?;
            if single {
                end = b.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(CronError::TooManySlashes { expr: expr.into() }),
    };
    if start < b.min {
        return Err(CronError::BelowMinimum { start, min: b.min, expr: expr.into() });
    }
    if end > b.max {
        return Err(CronError::AboveMaximum { end, max: b.max, expr: expr.into() });
    }
    if start > end {
        return Err(CronError::StartAfterEnd { start, end, expr: expr.into() });
    }
    if step == 0 {
        return Err(CronError::ZeroStep { expr: expr.into() });
    }
    Ok(bits(start, end, step) | extra)
}

/// The bits `start, start+step, … ≤ end` (all within 0..=59).
fn bits(start: u64, end: u64, step: u64) -> u64 {
    let mut out = 0;
    let mut v = start;
    while v <= end {
        out |= 1 << v;
        v += step;
    }
    out
}

fn int_or_name(expr: &str, b: Bounds) -> Result<u64, CronError> {
    let lower = expr.to_ascii_lowercase();
    match b.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => number(expr),
    }
}

/// Go's `strconv.Atoi`, then the parser's refusal of negatives.
fn number(expr: &str) -> Result<u64, CronError> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(CronError::NotANumber { expr: expr.into(), reason: "invalid syntax" });
    }
    let value: i64 = expr
        .parse()
        .map_err(|_| CronError::NotANumber { expr: expr.into(), reason: "value out of range" })?;
    u64::try_from(value).map_err(|_| CronError::Negative { value, expr: expr.into() })
}

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units (`ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`), optionally signed. The error is Go's, without its `time: ` prefix.
fn go_duration(text: &str) -> Result<SignedDuration, String> {
    let invalid = || format!("invalid duration {}", go_quote(text));
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len =
            rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "" => return Err(format!("missing unit in duration {}", go_quote(text))),
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            other => {
                return Err(format!(
                    "unknown unit {} in duration {}",
                    go_quote(other),
                    go_quote(text)
                ));
            }
        };
        nanos += value * scale;
        if nanos > i64::MAX as f64 {
            return Err(invalid());
        }
    }
    // Sub-nanosecond precision does not matter here: the schedule keeps whole seconds.
    let nanos = nanos as i64;
    Ok(SignedDuration::from_nanos(if negative { -nanos } else { nanos }))
}

fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn fields(spec: &str) -> Fields {
        match Schedule::parse(spec).unwrap().kind {
            Kind::Fields(f) => f,
            Kind::Every(_) => panic!("{spec} is a constant delay"),
        }
    }

    fn values(bits: u64) -> Vec<u64> {
        (0..63).filter(|b| bits & (1 << b) != 0).collect()
    }

    #[test]
    fn ranges_steps_lists_and_names() {
        let f = fields("*/15 9-17 1,15 jan-MAR mon-fri");
        assert_eq!(values(f.minute), [0, 15, 30, 45]);
        assert_eq!(values(f.hour), (9..=17).collect::<Vec<_>>());
        assert_eq!(values(f.dom), [1, 15]);
        assert_eq!(values(f.month), [1, 2, 3]);
        assert_eq!(values(f.dow), [1, 2, 3, 4, 5]);
        assert_eq!(f.minute & STAR, 0, "a stepped wildcard is no wildcard");
        let g = fields("5/20 */1 ? * SUN");
        assert_eq!(values(g.minute), [5, 25, 45], "n/step runs to the maximum");
        assert_ne!(g.hour & STAR, 0, "*/1 is still a wildcard");
        assert_ne!(g.dom & STAR, 0, "? is a wildcard");
        assert_eq!(values(g.dow), [0]);
        assert_eq!(values(fields("1-10/3 0 1 1 0").minute), [1, 4, 7, 10]);
        assert_eq!(values(fields("+5 0 1 1 0").minute), [5], "Go's Atoi takes a sign");
        assert_eq!(values(fields("1,,2 0 1 1 0").minute), [1, 2], "empty list items are skipped");
    }

    #[test]
    fn descriptors() {
        let hourly = fields("@hourly");
        assert_eq!((values(hourly.minute), hourly.hour & STAR != 0), (vec![0], true));
        let weekly = fields("@weekly");
        assert_eq!((values(weekly.dow), weekly.dom & STAR != 0), (vec![0], true));
        assert_eq!(fields("@annually"), fields("@yearly"));
        assert_eq!(fields("@midnight"), fields("@daily"));
        let every = Schedule::parse("@every 1h30m").unwrap();
        assert_eq!(every.kind, Kind::Every(SignedDuration::from_mins(90)));
        let tiny = Schedule::parse("@every 10ms").unwrap();
        assert_eq!(tiny.kind, Kind::Every(SignedDuration::from_secs(1)), "at least a second");
    }

    #[test]
    fn errors_read_as_upstreams_parser_words_them() {
        let cases = [
            ("", "empty spec string"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            ("0 0 * * * *", "expected exactly 5 fields, found 6: [0 0 * * * *]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("1/2/3 * * * *", "too many slashes: 1/2/3"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("-1 * * * *", "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            (
                "* * * foo *",
                "failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax",
            ),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            (
                "@every 1d",
                "failed to parse duration @every 1d: time: unknown unit \"d\" in duration \"1d\"",
            ),
            ("@every 5", "failed to parse duration @every 5: time: missing unit in duration \"5\""),
            ("@every x", "failed to parse duration @every x: time: invalid duration \"x\""),
            (
                "TZ=Mars/Olympus * * * * *",
                "provided bad location Mars/Olympus: unknown time zone Mars/Olympus",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(Schedule::parse(spec).unwrap_err().to_string(), want, "{spec:?}");
        }
        let huge = Schedule::parse("99999999999999999999 * * * *").unwrap_err();
        assert!(huge.to_string().ends_with("value out of range"), "{huge}");
    }

    #[test]
    fn a_zone_prefix_is_resolved_by_the_caller() {
        let utc = |name: &str| (name == "UTC").then_some(TimeZone::UTC);
        let s = Schedule::parse_with_zones("CRON_TZ=UTC 0 * * * *", utc).unwrap();
        assert_eq!(s.zone(), Some(&TimeZone::UTC));
        assert_eq!(s.kind, Schedule::parse("0 * * * *").unwrap().kind);
        assert!(Schedule::parse("0 * * * *").unwrap().zone().is_none());
    }
}
