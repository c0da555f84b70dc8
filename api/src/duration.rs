//! Durations as Go and upstream config files spell them: `20s`, `1m0s`, `1h30m`, `500ms`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A duration that parses and prints in Go's `time.Duration` syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct GoDuration(pub Duration);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?} (use Go syntax such as 20s, 1m0s, 1h30m, 500ms)")]
pub struct DurationError(pub String);

impl FromStr for GoDuration {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || DurationError(s.to_string());
        if s == "0" {
            return Ok(GoDuration(Duration::ZERO));
        }
        let mut rest = s;
        let mut total = 0f64;
        if rest.is_empty() || rest.starts_with('-') {
            return Err(bad());
        }
        while !rest.is_empty() {
            let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
            let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
            rest = &rest[num_end..];
            let unit_end =
                rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
            let scale = match &rest[..unit_end] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad()),
            };
            total += value * scale;
            rest = &rest[unit_end..];
        }
        Duration::try_from_secs_f64(total).map(GoDuration).map_err(|_| bad())
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.subsec_nanos() == 0 {
            let s = d.as_secs();
            match (s / 3600, s % 3600 / 60, s % 60) {
                (0, 0, s) => write!(f, "{s}s"),
                (0, m, s) => write!(f, "{m}m{s}s"),
                (h, m, s) => write!(f, "{h}h{m}m{s}s"),
            }
        } else {
            write!(f, "{}ms", d.as_millis())
        }
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let d = |s: &str| s.parse::<GoDuration>().unwrap().0;
        assert_eq!(d("20s"), Duration::from_secs(20));
        assert_eq!(d("1m0s"), Duration::from_secs(60));
        assert_eq!(d("1h30m"), Duration::from_secs(5400));
        assert_eq!(d("500ms"), Duration::from_millis(500));
        assert_eq!(d("1.5s"), Duration::from_millis(1500));
        assert_eq!(d("0"), Duration::ZERO);
        for bad in ["", "20", "1x", "-1s", "s", "1m-", "abc"] {
            assert!(bad.parse::<GoDuration>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prints_like_go() {
        assert_eq!(GoDuration(Duration::from_secs(20)).to_string(), "20s");
        assert_eq!(GoDuration(Duration::from_secs(60)).to_string(), "1m0s");
        assert_eq!(GoDuration(Duration::from_secs(3661)).to_string(), "1h1m1s");
    }
}
