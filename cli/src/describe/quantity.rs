//! Resource quantities printed as apimachinery's `Quantity.String()` prints them: the
//! canonical form in the format the quantity was written in (`1500m`, `2k`, `1536Mi`, `1e3`),
//! sums keeping the first operand's format. Values come from the `api` crate's parser.

use std::fmt;

use api::quantity::Quantity as Value;

const NANO: i128 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quantity {
    /// The value in units of 10⁻⁹ (rounded up, as the canonical form rounds).
    nanos: i128,
    format: Format,
}

impl Quantity {
    pub fn parse(s: &str) -> Option<Quantity> {
        let v = Value::parse(s).ok()?;
        let s = s.trim();
        let suffix = s
            .trim_start_matches(['+', '-'])
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        let format = if suffix.ends_with('i') {
            Format::BinarySi
        } else if suffix.len() > 1 && suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSi
        };
        Some(Quantity { nanos: nanos_of(v), format })
    }

    /// A quantity of a JSON value (a string, or a number as some clients send).
    pub fn of(v: &serde_json::Value) -> Option<Quantity> {
        match v {
            serde_json::Value::String(s) => Quantity::parse(s),
            serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
            _ => None,
        }
    }

    /// The sum, in this quantity's format (a zero takes the other's, as apimachinery's `Add`).
    pub fn plus(self, other: Quantity) -> Quantity {
        let format = if self.nanos == 0 { other.format } else { self.format };
        Quantity { nanos: self.nanos.saturating_add(other.nanos), format }
    }

    pub fn milli_value(self) -> i128 {
        ceil_div(self.nanos, 1_000_000)
    }

    pub fn value(self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    pub fn nanos(self) -> i128 {
        self.nanos
    }
}

/// The exact value of the `api` crate's quantity, read back from its canonical display
/// (whole units, `m` or `n`).
fn nanos_of(v: Value) -> i128 {
    let s = v.to_string();
    if let Some(n) = s.strip_suffix('n') {
        n.parse().unwrap_or(0)
    } else if let Some(m) = s.strip_suffix('m') {
        m.parse::<i128>().unwrap_or(0) * 1_000_000
    } else {
        s.parse::<i128>().unwrap_or(0) * NANO
    }
}

fn ceil_div(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let whole = self.nanos % NANO == 0;
        let units = self.nanos / NANO;
        if self.format == Format::BinarySi && whole && !(-1024 < units && units < 1024) {
            let (mut n, mut exp) = (units, 0usize);
            while n % 1024 == 0 && exp < 6 {
                n /= 1024;
                exp += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
            return write!(f, "{n}{suffix}");
        }
        // Decimal: the largest power of a thousand that leaves a whole mantissa.
        let (mut m, mut exp) = (self.nanos, -9i32);
        while m % 1000 == 0 && exp < 18 {
            m /= 1000;
            exp += 3;
        }
        if self.format == Format::DecimalExponent {
            return if exp == 0 { write!(f, "{m}") } else { write!(f, "{m}e{exp}") };
        }
        let suffix = match exp {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        };
        write!(f, "{m}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(q: &str) -> String {
        Quantity::parse(q).unwrap().to_string()
    }

    #[test]
    fn quantities_print_in_their_canonical_form() {
        assert_eq!(s("100m"), "100m");
        assert_eq!(s("1000m"), "1");
        assert_eq!(s("0.5"), "500m");
        assert_eq!(s("1500m"), "1500m");
        assert_eq!(s("2000"), "2k");
        assert_eq!(s("128Mi"), "128Mi");
        assert_eq!(s("1024Mi"), "1Gi");
        assert_eq!(s("1.5Gi"), "1536Mi");
        assert_eq!(s("100Ki"), "100Ki");
        assert_eq!(s("512"), "512");
        assert_eq!(s("1e3"), "1e3");
        assert_eq!(s("0"), "0");
        assert_eq!(s("0Mi"), "0");
        assert_eq!(s("1G"), "1G");
    }

    #[test]
    fn a_sum_keeps_the_first_format() {
        let a = Quantity::parse("128Mi").unwrap();
        let b = Quantity::parse("64Mi").unwrap();
        assert_eq!(a.plus(b).to_string(), "192Mi");
        let c = Quantity::parse("100m").unwrap().plus(Quantity::parse("900m").unwrap());
        assert_eq!(c.to_string(), "1");
        assert_eq!(Quantity::default().plus(a).to_string(), "128Mi");
    }
}
