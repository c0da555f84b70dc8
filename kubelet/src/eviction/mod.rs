//! Eviction thresholds, as upstream's `pkg/kubelet/eviction`: the [`Signal`]s a node is
//! watched by, the hard thresholds (`evictionHard`: upstream's defaults when unset, merged with
//! them under `mergeDefaultEvictionSettings`) and which of them an [`Observations`] meets.
//!
//! - [`config`]: every threshold the manager watches (upstream's `ParseThresholdConfig`): the
//!   hard ones, the soft ones (`evictionSoft`) with their grace periods
//!   (`evictionSoftGracePeriod`), each with its `evictionMinimumReclaim`, and
//!   `evictionPressureTransitionPeriod` and `evictionMaxPodGracePeriod`.
//! - [`state`]: what the manager remembers from round to round, pure: when each threshold was
//!   first met (soft ones act after their grace period), which stay met until their minimum
//!   reclaim is freed, and when each pressure was last seen (conditions stay for the
//!   transition period).
//! - [`manager`]: the rounds: the node's pressure conditions (`MemoryPressure`,
//!   `DiskPressure`, `PIDPressure`) for the node status and admission, reclaiming node-level
//!   resources, and evicting pods ranked by [`rank`].
//!
//! The hard thresholds also decide the reservation taken out of allocatable memory and
//! ephemeral storage.

pub mod config;
pub mod manager;
pub mod rank;
pub mod state;

use std::collections::BTreeMap;
use std::fmt;

use api::quantity::Quantity;

/// What the node is watched by (upstream's `evictionapi.Signal`), the ones this kubelet
/// observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    /// `memory.available`: the node's available memory (`MemAvailable`).
    MemoryAvailable,
    /// `nodefs.available`: free bytes on the kubelet's root directory's filesystem.
    NodeFsAvailable,
    /// `nodefs.inodesFree`: free inodes there.
    NodeFsInodesFree,
    /// `imagefs.available`: free bytes on the runtime's image filesystem (CRI `ImageFsInfo`).
    ImageFsAvailable,
    /// `imagefs.inodesFree`: free inodes there.
    ImageFsInodesFree,
    /// `pid.available`: `kernel.pid_max` less the tasks running.
    PidAvailable,
}

/// The node condition a met threshold sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pressure {
    Memory,
    Disk,
    Pid,
}

impl Pressure {
    /// The node condition's type.
    pub fn condition(self) -> &'static str {
        match self {
            Pressure::Memory => "MemoryPressure",
            Pressure::Disk => "DiskPressure",
            Pressure::Pid => "PIDPressure",
        }
    }
}

impl Signal {
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    pub fn pressure(self) -> Pressure {
        match self {
            Signal::MemoryAvailable => Pressure::Memory,
            Signal::PidAvailable => Pressure::Pid,
            _ => Pressure::Disk,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Upstream's signals this kubelet does not observe yet: refused by name rather than ignored.
const NOT_OBSERVED: &[&str] =
    &["containerfs.available", "containerfs.inodesFree", "allocatableMemory.available"];

/// Upstream's `DefaultEvictionHard` on Linux.
pub const DEFAULT_EVICTION_HARD: [(&str, &str); 4] = [
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
];

/// A threshold: an absolute amount (bytes, inodes or PIDs) or a fraction of the capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    Quantity(u64),
    /// Of the capacity, in `(0, 1)`.
    Fraction(f64),
}

impl ThresholdValue {
    /// The amount below which the threshold is met, given the capacity (upstream's
    /// `GetThresholdQuantity`).
    pub fn amount(self, capacity: u64) -> u64 {
        match self {
            ThresholdValue::Quantity(q) => q,
            // Truncated, as upstream's int64 conversion.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            ThresholdValue::Fraction(f) => (capacity as f64 * f) as u64,
        }
    }
}

/// A threshold that does not parse, worded as upstream's `ParseThresholdConfig`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("unsupported eviction signal {0}")]
    Unsupported(String),
    #[error("eviction signal {0} is not observed by this kubelet yet")]
    NotObserved(String),
    #[error("{value:?} is neither a quantity nor a percentage")]
    Syntax { value: String },
    #[error("eviction percentage threshold {signal} must be >= 0%: {value}")]
    PercentBelowZero { signal: Signal, value: String },
    #[error("eviction percentage threshold {signal} must be <= 100%: {value}")]
    PercentAbove100 { signal: Signal, value: String },
    #[error("eviction threshold {signal} must be positive: {value}")]
    NotPositive { signal: Signal, value: String },
    #[error("grace period must be specified for the soft eviction threshold {0}")]
    NoGracePeriod(Signal),
    #[error("{0}")]
    GracePeriodSyntax(api::duration::DurationError),
    #[error("invalid eviction grace period specified: {0}, must be a positive value")]
    NegativeGracePeriod(String),
    #[error("eviction percentage minimum reclaim {signal} must be positive: {value}")]
    MinReclaimPercentNotPositive { signal: Signal, value: String },
    #[error("negative eviction minimum reclaim specified for {0}")]
    NegativeMinReclaim(Signal),
}

/// The hard thresholds, one per signal at most.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    hard: BTreeMap<Signal, ThresholdValue>,
}

impl Default for Thresholds {
    /// Upstream's defaults.
    fn default() -> Self {
        let defaults = DEFAULT_EVICTION_HARD.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Self::parse(&defaults.collect(), false).expect("upstream's defaults parse")
    }
}

impl Thresholds {
    /// No thresholds at all.
    pub fn none() -> Self {
        Self { hard: BTreeMap::new() }
    }

    /// These thresholds, as parsed.
    pub fn from_map(hard: BTreeMap<Signal, ThresholdValue>) -> Self {
        Self { hard }
    }

    /// `evictionHard` as written (signal → value), with upstream's defaults for the signals it
    /// leaves out when `merge_defaults` (`mergeDefaultEvictionSettings`). `0%` and `100%`
    /// disable a signal, as upstream. The error names the signal as written.
    pub fn parse(
        written: &BTreeMap<String, String>,
        merge_defaults: bool,
    ) -> Result<Self, (String, ThresholdError)> {
        let mut all = written.clone();
        if merge_defaults {
            for (k, v) in DEFAULT_EVICTION_HARD {
                all.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
        let mut hard = BTreeMap::new();
        for (name, value) in &all {
            let parsed = parse_one(name, value).map_err(|e| (name.clone(), e))?;
            if let Some((signal, value)) = parsed {
                hard.insert(signal, value);
            }
        }
        Ok(Self { hard })
    }

    pub fn get(&self, signal: Signal) -> Option<ThresholdValue> {
        self.hard.get(&signal).copied()
    }

    /// Each signal's threshold, in [`Signal::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Signal, ThresholdValue)> + '_ {
        self.hard.iter().map(|(s, v)| (*s, *v))
    }

    /// What the hard thresholds hold back from pods: `memory.available` of the memory
    /// capacity and `nodefs.available` of the ephemeral storage (upstream's
    /// `hardEvictionReservation`).
    pub fn reserved(&self, signal: Signal, capacity: u64) -> u64 {
        self.get(signal).map_or(0, |v| v.amount(capacity).min(capacity))
    }

    /// `capacity` less what `signal`'s threshold holds back: what pods may have.
    pub fn allocatable(&self, signal: Signal, capacity: u64) -> u64 {
        capacity - self.reserved(signal, capacity)
    }

    /// The signals whose threshold the observations meet; a signal not observed meets none.
    pub fn met(&self, observed: &Observations) -> Vec<Signal> {
        self.hard
            .iter()
            .filter(|(signal, value)| {
                observed.get(**signal).is_some_and(|o| o.available < value.amount(o.capacity))
            })
            .map(|(s, _)| *s)
            .collect()
    }
}

/// `--eviction-hard`'s statements (`memory.available<100Mi,nodefs.available<10%`) as the
/// config file's map, worded as upstream's flag parser when they do not split.
pub fn statements(flag: &str) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for statement in flag.split(',').filter(|s| !s.trim().is_empty()) {
        let Some((signal, value)) = statement.split_once('<').filter(|(_, v)| !v.contains('<'))
        else {
            return Err(format!(
                "invalid eviction threshold syntax {statement}, expected <signal><operator><value>"
            ));
        };
        let signal = signal.trim();
        if map.insert(signal.to_string(), value.trim().to_string()).is_some() {
            return Err(format!("found duplicate eviction threshold for signal {signal}"));
        }
    }
    Ok(map)
}

/// The signal `name` spells, or why none (upstream's `validSignal`).
pub fn signal_named(name: &str) -> Result<Signal, ThresholdError> {
    Signal::ALL.into_iter().find(|s| s.as_str() == name).ok_or_else(|| {
        if NOT_OBSERVED.contains(&name) {
            ThresholdError::NotObserved(name.into())
        } else {
            ThresholdError::Unsupported(name.into())
        }
    })
}

fn parse_one(name: &str, value: &str) -> Result<Option<(Signal, ThresholdValue)>, ThresholdError> {
    let signal = signal_named(name)?;
    let syntax = || ThresholdError::Syntax { value: value.into() };
    if let Some(percent) = value.strip_suffix('%') {
        if value == "0%" || value == "100%" {
            return Ok(None);
        }
        let p: f64 = percent.trim().parse().map_err(|_| syntax())?;
        if !p.is_finite() {
            return Err(syntax());
        }
        if p < 0.0 {
            return Err(ThresholdError::PercentBelowZero { signal, value: value.into() });
        }
        if p > 100.0 {
            return Err(ThresholdError::PercentAbove100 { signal, value: value.into() });
        }
        return Ok(Some((signal, ThresholdValue::Fraction(p / 100.0))));
    }
    let q = Quantity::parse(value).map_err(|_| syntax())?;
    if q.is_negative() || q.is_zero() {
        return Err(ThresholdError::NotPositive { signal, value: value.into() });
    }
    let amount = u64::try_from(q.value()).map_err(|_| syntax())?;
    Ok(Some((signal, ThresholdValue::Quantity(amount))))
}

/// One signal's reading: what is available of what capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

/// What the node reads for each signal; a signal not read is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observations(pub BTreeMap<Signal, Observation>);

impl Observations {
    pub fn get(&self, signal: Signal) -> Option<Observation> {
        self.0.get(&signal).copied()
    }
}

#[cfg(test)]
mod tests;
