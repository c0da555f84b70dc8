//! Node allocatable, as upstream's `node_container_manager`: what pods may have is the capacity
//! less `systemReserved`, less `kubeReserved`, less what the hard eviction thresholds hold back
//! (`memory.available` of memory, `nodefs.available` of ephemeral storage). A configuration that
//! reserves more than the node has is refused at start, in upstream's words.

use std::collections::BTreeMap;
use std::fmt;

use api::quantity::Quantity;

use crate::eviction::{Signal, Thresholds};

/// A resource that may be reserved for the system or Kubernetes daemons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reservable {
    /// In millicores.
    Cpu,
    /// In bytes.
    Memory,
    /// In bytes.
    EphemeralStorage,
    /// Process IDs.
    Pid,
}

impl Reservable {
    const ALL: [Reservable; 4] =
        [Reservable::Cpu, Reservable::Memory, Reservable::EphemeralStorage, Reservable::Pid];

    /// Its resource name: `cpu`, `ephemeral-storage`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reservable::Cpu => "cpu",
            Reservable::Memory => "memory",
            Reservable::EphemeralStorage => "ephemeral-storage",
            Reservable::Pid => "pid",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// An amount as upstream prints the quantity: cpu in cores or millicores, bytes with the
    /// largest binary suffix that is exact.
    pub fn format(self, amount: u64) -> String {
        match self {
            Reservable::Cpu if amount.is_multiple_of(1000) => (amount / 1000).to_string(),
            Reservable::Cpu => format!("{amount}m"),
            Reservable::Memory | Reservable::EphemeralStorage => {
                api::quantity::format_binary(amount)
            }
            Reservable::Pid => amount.to_string(),
        }
    }
}

impl fmt::Display for Reservable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a `systemReserved`/`kubeReserved` entry was refused, worded as upstream's
/// `ParseResourceList`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    #[error("cannot reserve {resource:?} resource")]
    Resource { resource: String },
    #[error("{value:?} is not a quantity: {source}")]
    Quantity { value: String, source: api::quantity::QuantityError },
    #[error("resource quantity for \"{resource}\" cannot be negative: {value}")]
    Negative { resource: Reservable, value: String },
}

/// What one of `systemReserved`/`kubeReserved` holds back, per resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reserved(BTreeMap<Reservable, u64>);

impl Reserved {
    /// The map as written (`cpu: 500m`, `memory: 1Gi`); the error names the entry's key.
    pub fn parse(map: &BTreeMap<String, String>) -> Result<Self, (String, ReservationError)> {
        let mut reserved = BTreeMap::new();
        for (name, value) in map {
            let fail = |e| (name.clone(), e);
            let resource = Reservable::parse(name)
                .ok_or_else(|| fail(ReservationError::Resource { resource: name.clone() }))?;
            let q = Quantity::parse(value).map_err(|source| {
                fail(ReservationError::Quantity { value: value.clone(), source })
            })?;
            if q.is_negative() {
                return Err(fail(ReservationError::Negative { resource, value: value.clone() }));
            }
            let amount = if resource == Reservable::Cpu { q.milli_value() } else { q.value() };
            reserved.insert(resource, u64::try_from(amount).unwrap_or(u64::MAX));
        }
        Ok(Self(reserved))
    }

    pub fn get(&self, r: Reservable) -> u64 {
        self.0.get(&r).copied().unwrap_or(0)
    }
}

/// What the node has of each reservable resource; what was not read is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capacity(pub BTreeMap<Reservable, u64>);

/// A reservation above capacity, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid Node Allocatable configuration. {}", .over.join(" "))]
pub struct AllocatableError {
    /// One sentence per resource reserved beyond its capacity.
    pub over: Vec<String>,
}

/// How allocatable is made from capacity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAllocatable {
    /// `systemReserved`.
    pub system: Reserved,
    /// `kubeReserved`.
    pub kube: Reserved,
    /// `evictionHard`: its memory and nodefs thresholds are reserved too.
    pub hard: Thresholds,
}

impl NodeAllocatable {
    /// Upstream's `GetNodeAllocatableReservation` for one resource of `capacity`.
    pub fn reservation(&self, r: Reservable, capacity: u64) -> u64 {
        let eviction = match r {
            Reservable::Memory => self.hard.reserved(Signal::MemoryAvailable, capacity),
            Reservable::EphemeralStorage => self.hard.reserved(Signal::NodeFsAvailable, capacity),
            Reservable::Cpu | Reservable::Pid => 0,
        };
        self.system.get(r).saturating_add(self.kube.get(r)).saturating_add(eviction)
    }

    /// `capacity` less `systemReserved` and `kubeReserved` alone (upstream's
    /// `getNodeAllocatableInternalAbsolute`): what the `kubepods` cgroup is limited to. The
    /// hard eviction reservation is left to the eviction manager.
    pub fn internal(&self, r: Reservable, capacity: u64) -> u64 {
        capacity.saturating_sub(self.system.get(r).saturating_add(self.kube.get(r)))
    }

    /// What pods may have of `capacity`: never below zero.
    pub fn allocatable(&self, r: Reservable, capacity: u64) -> u64 {
        capacity.saturating_sub(self.reservation(r, capacity))
    }

    /// Upstream's `validateNodeAllocatable`: every reserved resource fits its capacity. A
    /// resource whose capacity was not read cannot be checked.
    pub fn validate(&self, capacity: &Capacity) -> Result<(), AllocatableError> {
        let over: Vec<String> = capacity
            .0
            .iter()
            .filter_map(|(r, cap)| {
                let reserved = self.reservation(*r, *cap);
                (reserved > *cap).then(|| {
                    format!(
                        "Resource {:?} has a reservation of {} but capacity of {}. Expected capacity >= reservation.",
                        r.as_str(),
                        r.format(reserved),
                        r.format(*cap)
                    )
                })
            })
            .collect();
        if over.is_empty() { Ok(()) } else { Err(AllocatableError { over }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
    }

    fn reserved(pairs: &[(&str, &str)]) -> Reserved {
        Reserved::parse(&map(pairs)).expect("parses")
    }

    #[test]
    fn allocatable_is_capacity_less_system_kube_and_hard_eviction_reservations() {
        let a = NodeAllocatable {
            system: reserved(&[("cpu", "500m"), ("memory", "1Gi")]),
            kube: reserved(&[("cpu", "0.25"), ("memory", "512Mi"), ("ephemeral-storage", "1Gi")]),
            hard: Thresholds::default(), // memory.available<100Mi, nodefs.available<10%
        };
        assert_eq!(a.allocatable(Reservable::Cpu, 2000), 1250);
        let gib = 1 << 30;
        assert_eq!(
            a.allocatable(Reservable::Memory, 8 * gib),
            8 * gib - gib - gib / 2 - (100 << 20)
        );
        assert_eq!(a.allocatable(Reservable::EphemeralStorage, 100 * gib), 89 * gib);
        assert_eq!(a.allocatable(Reservable::Cpu, 500), 0, "never below zero");
    }

    #[test]
    fn entries_that_are_not_reservable_or_not_quantities_are_refused_by_key() {
        let err = |pairs| Reserved::parse(&map(pairs)).expect_err("refused");
        let (key, e) = err(&[("gpu", "1")]);
        assert_eq!(
            (key.as_str(), e.to_string().as_str()),
            ("gpu", "cannot reserve \"gpu\" resource")
        );
        let (key, e) = err(&[("memory", "lots")]);
        assert_eq!(key, "memory");
        assert!(
            e.to_string().starts_with("\"lots\" is not a quantity: quantities must match"),
            "{e}"
        );
        let (_, e) = err(&[("cpu", "-1")]);
        assert_eq!(e.to_string(), "resource quantity for \"cpu\" cannot be negative: -1");
        assert_eq!(reserved(&[("pid", "1000")]).get(Reservable::Pid), 1000);
    }

    #[test]
    fn reserving_more_than_capacity_is_refused_in_upstreams_words() {
        let a = NodeAllocatable {
            system: reserved(&[("memory", "30Gi"), ("cpu", "3")]),
            kube: Reserved::default(),
            hard: Thresholds::none(),
        };
        let capacity = Capacity(BTreeMap::from([
            (Reservable::Cpu, 2000),
            (Reservable::Memory, 24 << 30),
            (Reservable::EphemeralStorage, 100 << 30),
        ]));
        assert_eq!(
            a.validate(&capacity).expect_err("over").to_string(),
            "invalid Node Allocatable configuration. Resource \"cpu\" has a reservation of 3 but capacity of 2. Expected capacity >= reservation. Resource \"memory\" has a reservation of 30Gi but capacity of 24Gi. Expected capacity >= reservation."
        );
        let fits = NodeAllocatable { system: reserved(&[("cpu", "1500m")]), ..a };
        assert!(fits.validate(&capacity).is_ok());
        assert_eq!(Reservable::Cpu.format(1500), "1500m");
        assert_eq!(Reservable::Memory.format(1536 << 20), "1536Mi");
        assert_eq!(Reservable::Memory.format(1000), "1000");
    }
}
