//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`), parsed exactly.
//!
//! Grammar (as upstream): an optionally signed decimal number followed by a binary-SI suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal-SI suffix (`n u m "" k M G T P E`) or a decimal exponent
//! (`e3`, `E-2`). The value is kept in billionths, rounded up, which is exact for every
//! quantity a pod spec can sensibly carry.

use std::cmp::Ordering;
use std::fmt;

/// A parsed quantity, in units of 10⁻⁹ (so `1` is `1_000_000_000`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Upstream's own wording for a string that is not a quantity.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    #[error("quantity is too large")]
    TooLarge,
}

const NANO: i128 = 1_000_000_000;

fn pow10(exp: u32) -> Result<i128, QuantityError> {
    10i128.checked_pow(exp).ok_or(QuantityError::TooLarge)
}

impl Quantity {
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let s = s.trim();
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(split);
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return Err(QuantityError::Format);
        }
        // Scale: value = digits × 10^exp10 × 2^exp2, with digits = int ++ frac.
        let (mut exp10, exp2): (i64, u32) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            other => {
                let exp = other.strip_prefix(['e', 'E']).ok_or(QuantityError::Format)?;
                let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                if digits.is_empty()
                    || !digits.bytes().all(|b| b.is_ascii_digit())
                    || digits.len() > 4
                {
                    return Err(QuantityError::Format);
                }
                (exp.parse::<i64>().map_err(|_| QuantityError::Format)?, 0)
            }
        };
        let digits = format!("{int}{frac}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return Err(QuantityError::TooLarge);
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| QuantityError::Format)?
        };
        exp10 += 9 - i64::try_from(frac.len()).map_err(|_| QuantityError::TooLarge)?;
        let scaled = mantissa.checked_mul(1i128 << exp2).ok_or(QuantityError::TooLarge)?;
        let nanos = if exp10 >= 0 {
            let e = u32::try_from(exp10).map_err(|_| QuantityError::TooLarge)?;
            scaled.checked_mul(pow10(e)?).ok_or(QuantityError::TooLarge)?
        } else {
            match u32::try_from(-exp10).ok().filter(|e| *e <= 38) {
                // Round up, as upstream does when it drops precision.
                Some(e) => {
                    let d = pow10(e)?;
                    scaled / d + i128::from(scaled % d != 0)
                }
                None => i128::from(scaled != 0),
            }
        };
        Ok(Self { nanos: if negative { -nanos } else { nanos } })
    }

    /// The value in thousandths, rounded up (CPU in millicores).
    pub fn milli_value(self) -> i128 {
        ceil_div(self.nanos, 1_000_000)
    }

    /// The exact value in units of 10⁻⁹.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// The value in units, rounded up (memory in bytes).
    pub fn value(self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_add(other.nanos) }
    }

    pub fn cmp_value(self, other: Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

fn ceil_div(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

impl fmt::Display for Quantity {
    /// A canonical form: whole units when exact, else millis, else nanos.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANO == 0 {
            write!(f, "{}", self.nanos / NANO)
        } else if self.nanos % 1_000_000 == 0 {
            write!(f, "{}m", self.nanos / 1_000_000)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

/// A byte count as apimachinery prints a `BinarySI` quantity: with the largest binary suffix
/// that divides it exactly (`10Mi`), else as a plain number (`1234567`).
pub fn format_binary(n: u64) -> String {
    for (suffix, shift) in [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)]
    {
        if n != 0 && n.trailing_zeros() >= shift {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_every_suffix_family() {
        assert_eq!(q("100m").milli_value(), 100);
        assert_eq!(q("0.1").milli_value(), 100);
        assert_eq!(q("2").milli_value(), 2000);
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("1.5Gi").value(), 1_610_612_736);
        assert_eq!(q("128Mi").value(), 134_217_728);
        assert_eq!(q("1k").value(), 1000);
        assert_eq!(q("1M").value(), 1_000_000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E3").value(), 1000);
        assert_eq!(q("5e-1").milli_value(), 500);
        assert_eq!(q("1E").value(), 1_000_000_000_000_000_000);
        assert_eq!(q("+1").value(), 1);
        assert!(q("-1").is_negative());
        assert!(q("0").is_zero() && q("0Mi").is_zero() && q(".0").is_zero());
        assert_eq!(q("1.").value(), 1);
        assert_eq!(q(".5").milli_value(), 500);
    }

    #[test]
    fn rounds_up_below_a_nano_and_compares_exactly() {
        assert_eq!(q("1n").milli_value(), 1, "any positive amount is at least one milli");
        assert_eq!(q("0.0000000001").milli_value(), 1);
        assert_eq!(q("500m").cmp_value(q("0.5")), Ordering::Equal);
        assert_eq!(q("1Gi").cmp_value(q("1G")), Ordering::Greater);
        assert_eq!(q("1024Mi"), q("1Gi"));
    }

    #[test]
    fn rejects_what_upstream_rejects() {
        for bad in ["", "abc", "1.2.3", "1x", "Mi", "1 Mi", "1e", "1Kib", "--1", "1e99999", "."] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} must be rejected");
        }
        assert_eq!(
            Quantity::parse("99999999999999999999999999999999999Ei"),
            Err(QuantityError::TooLarge)
        );
    }

    #[test]
    fn displays_canonically() {
        assert_eq!(q("1.5").to_string(), "1500m");
        assert_eq!(q("2").to_string(), "2");
        assert_eq!(q("1Ki").to_string(), "1024");
    }
}
