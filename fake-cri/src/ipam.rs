//! Pod addresses, handed out as the CNI `host-local` IPAM plugin does behind containerd's
//! default bridge network: from one subnet, the network address and the gateway (`.1`) and the
//! broadcast address excluded, round-robin after the last address given, each released when its
//! sandbox stops. The fake sets up no network; the address is only what the runtime reports.

use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 pod subnet, e.g. `10.244.3.0/24` (one node's share of a cluster CIDR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCidr {
    network: u32,
    prefix: u8,
}

/// Smallest subnet with a usable address besides the gateway: a /30 (network, gateway, one
/// pod, broadcast).
const LONGEST_PREFIX: u8 = 30;
/// Largest subnet accepted (16 million addresses are more than a test can use).
const SHORTEST_PREFIX: u8 = 8;

/// A pod CIDR that cannot be used, with the text given and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pod CIDR {cidr:?}: {reason}")]
pub struct InvalidCidr {
    pub cidr: String,
    pub reason: &'static str,
}

impl FromStr for PodCidr {
    type Err = InvalidCidr;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason| InvalidCidr { cidr: s.to_string(), reason };
        let (addr, prefix) = s.split_once('/').ok_or_else(|| bad("expected <IPv4>/<prefix>"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad("not an IPv4 address"))?;
        let prefix: u8 = prefix.parse().map_err(|_| bad("prefix is not a number"))?;
        if !(SHORTEST_PREFIX..=LONGEST_PREFIX).contains(&prefix) {
            return Err(bad("prefix must be between /8 and /30"));
        }
        let network = u32::from(addr);
        if network & !mask(prefix) != 0 {
            return Err(bad("host bits are set (give the network address)"));
        }
        Ok(Self { network, prefix })
    }
}

impl fmt::Display for PodCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

fn mask(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

impl PodCidr {
    /// containerd's default CNI network (`10.88.0.0/16`).
    pub const DEFAULT: PodCidr = PodCidr { network: 0x0a58_0000, prefix: 16 };

    /// The first pod address: the one after the gateway.
    fn first(self) -> u32 {
        self.network + 2
    }

    /// The last pod address: the one before the broadcast address.
    fn last(self) -> u32 {
        (self.network | !mask(self.prefix)) - 1
    }

    /// How many pods can hold an address at once.
    pub fn capacity(self) -> u32 {
        self.last() - self.first() + 1
    }
}

/// Every address of the range is held by a sandbox (host-local's "no IP addresses available").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no IP addresses available in range set: {first}-{last}")]
pub struct Exhausted {
    pub first: Ipv4Addr,
    pub last: Ipv4Addr,
}

/// The addresses held, and where the next search starts.
#[derive(Debug)]
pub(crate) struct Ipam {
    cidr: PodCidr,
    in_use: HashSet<u32>,
    /// The address handed out last (host-local resumes after it, so a released address is not
    /// reused at once).
    last: Option<u32>,
}

impl Default for Ipam {
    fn default() -> Self {
        Self { cidr: PodCidr::DEFAULT, in_use: HashSet::new(), last: None }
    }
}

impl Ipam {
    /// Later addresses come from `cidr`; addresses already given keep being held until released.
    pub(crate) fn set_cidr(&mut self, cidr: PodCidr) {
        self.cidr = cidr;
        self.last = None;
    }

    pub(crate) fn allocate(&mut self) -> Result<Ipv4Addr, Exhausted> {
        let (first, last) = (self.cidr.first(), self.cidr.last());
        let start = match self.last {
            Some(l) if (first..last).contains(&l) => l + 1,
            _ => first,
        };
        // At most one pass over the range, from `start` round to `start - 1`.
        let candidates = (start..=last).chain(first..start);
        for ip in candidates {
            if self.in_use.insert(ip) {
                self.last = Some(ip);
                return Ok(Ipv4Addr::from(ip));
            }
        }
        Err(Exhausted { first: Ipv4Addr::from(first), last: Ipv4Addr::from(last) })
    }

    pub(crate) fn release(&mut self, ip: &str) {
        if let Ok(ip) = ip.parse::<Ipv4Addr>() {
            self.in_use.remove(&u32::from(ip));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_subnet_and_refuses_what_is_not_one() {
        let c: PodCidr = "10.244.3.0/24".parse().unwrap();
        assert_eq!(c.to_string(), "10.244.3.0/24");
        assert_eq!(c.capacity(), 253, ".2 to .254");
        assert_eq!(PodCidr::DEFAULT.to_string(), "10.88.0.0/16");
        for (bad, why) in [
            ("10.244.3.0", "expected <IPv4>/<prefix>"),
            ("10.244.3/24", "not an IPv4 address"),
            ("10.244.3.0/x", "prefix is not a number"),
            ("10.244.3.0/31", "prefix must be between /8 and /30"),
            ("10.0.0.0/4", "prefix must be between /8 and /30"),
            ("10.244.3.7/24", "host bits are set (give the network address)"),
        ] {
            let e = bad.parse::<PodCidr>().unwrap_err();
            assert_eq!(e.reason, why, "{bad}");
            assert_eq!(e.cidr, bad);
        }
    }

    #[test]
    fn hands_out_distinct_addresses_round_robin_and_reuses_released_ones_last() {
        let mut ipam = Ipam::default();
        ipam.set_cidr("10.1.2.0/29".parse().unwrap()); // .2 to .6
        let got: Vec<String> = (0..5).map(|_| ipam.allocate().unwrap().to_string()).collect();
        assert_eq!(got, ["10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"]);
        let e = ipam.allocate().unwrap_err();
        assert_eq!(e.to_string(), "no IP addresses available in range set: 10.1.2.2-10.1.2.6");
        ipam.release("10.1.2.4");
        ipam.release("10.1.2.3");
        assert_eq!(ipam.allocate().unwrap().to_string(), "10.1.2.3", "the search wraps round");
        assert_eq!(ipam.allocate().unwrap().to_string(), "10.1.2.4");
        assert!(ipam.allocate().is_err());
        ipam.release("not an address");
    }

    #[test]
    fn the_default_range_is_containerds() {
        let mut ipam = Ipam::default();
        assert_eq!(ipam.allocate().unwrap().to_string(), "10.88.0.2");
        assert_eq!(PodCidr::DEFAULT.capacity(), 65_533);
    }
}
