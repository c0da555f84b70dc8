//! The systemd cgroup driver, as upstream's with runc's `libcontainer/cgroups/systemd`: each
//! kubelet cgroup is a transient slice systemd makes, sizes and stops; the cgroupfs files are
//! written after systemd (as runc's `Set` does after `SetUnitProperties`) so the figures are
//! exact, and everything read (existence, children, usage) is read from the cgroupfs.
//! - [`Systemd`]: the boundary (a fake in tests), with [`bus::SystemdBus`] over D-Bus;
//! - [`SystemdCgroups`]: [`Cgroups`] through it;
//! - [`start_properties`]/[`resource_properties`]: what runc hands systemd;
//! - [`check_booted`]: the driver works only where systemd is the init system (upstream's
//!   `sd_booted` check, `/run/systemd/system`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::cgroupfs::{CgroupError, CgroupFs, CgroupUsage, Cgroups, Processes};
use super::resources::{ResourceConfig, shares_to_weight};

pub mod bus;

/// systemd's `USEC_INFINITY`/`CGROUP_LIMIT_MAX`: no limit.
pub const INFINITY: u64 = u64::MAX;
/// The kernel's CFS period when none is given (100 ms).
const DEFAULT_PERIOD_US: u64 = 100_000;

/// A unit property's value, as D-Bus types it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Bool(bool),
    U64(u64),
    Str(String),
    Strs(Vec<String>),
}

/// A unit property (`StartTransientUnit`'s and `SetUnitProperties`' `a(sv)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub name: &'static str,
    pub value: Value,
}

fn prop(name: &'static str, value: Value) -> Property {
    Property { name, value }
}

/// A systemd call that failed: the unit and why.
#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("unable to start unit {unit:?}: {source}")]
    Start { unit: String, source: Box<zbus::Error> },
    #[error("error creating systemd unit `{unit}`: got `{result}`")]
    Job { unit: String, result: String },
    #[error("Timeout waiting for systemd to create {unit}")]
    StartTimeout { unit: String },
    #[error("unable to set unit properties of {unit:?}: {source}")]
    Set { unit: String, source: Box<zbus::Error> },
    #[error("unable to stop unit {unit:?}: {source}")]
    Stop { unit: String, source: Box<zbus::Error> },
    #[error("Timed out while waiting for systemd to remove {unit}")]
    StopTimeout { unit: String },
}

/// What the driver asks of systemd; each call returns once systemd's job is done.
pub trait Systemd: Send + Sync + std::fmt::Debug {
    /// `StartTransientUnit(unit, "replace", properties, [])`; a unit that exists is fine.
    fn start_unit(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError>;
    /// `SetUnitProperties(unit, true, properties)`.
    fn set_properties(&self, unit: &str, properties: &[Property]) -> Result<(), SystemdError>;
    /// `StopUnit(unit, "replace")`; a unit systemd does not know is fine.
    fn stop_unit(&self, unit: &str) -> Result<(), SystemdError>;
    /// The manager's `Version` as a number (`v245.4-1.fc32` is 245); `None` when unknown.
    fn version(&self) -> Option<u32>;
}

/// runc's `systemdVersionAtoi`: the first number, after an optional `v`.
pub fn parse_version(text: &str) -> Option<u32> {
    let digits: String = text
        .trim_start_matches('v')
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Why the systemd driver cannot be used here.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(
        "systemd needs systemd as the init system (no {}); set cgroupDriver: cgroupfs",
        marker.display()
    )]
    NotBooted { marker: PathBuf },
    #[error("systemd: connecting to the system bus: {0}")]
    Connect(#[source] Box<zbus::Error>),
}

/// `sd_booted`: systemd is the init system where `<root>/run/systemd/system` is a directory.
pub fn check_booted(root: &Path) -> Result<(), DriverError> {
    let marker = root.join("run/systemd/system");
    match std::fs::symlink_metadata(&marker) {
        Ok(m) if m.is_dir() => Ok(()),
        _ => Err(DriverError::NotBooted { marker }),
    }
}

/// What the properties depend on: the cgroup hierarchy and systemd's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavor {
    /// The unified (v2) hierarchy: `CPUWeight`, `MemoryMax`, `IOAccounting`.
    pub v2: bool,
    /// systemd's version (the manager's `Version`), when known.
    pub version: Option<u32>,
}

impl Flavor {
    /// `CPUQuotaPeriodUSec` is systemd's since v242 (runc leaves it out before, and when the
    /// version is unknown; the cgroupfs file still gets the period).
    fn quota_period(&self) -> bool {
        self.version.is_some_and(|v| v >= 242)
    }
}

/// The limits of `config` as unit properties (runc's `genV1ResourcesProperties` and
/// `genV2ResourcesProperties` for what the kubelet sets).
pub fn resource_properties(config: &ResourceConfig, flavor: Flavor) -> Vec<Property> {
    let v2 = flavor.v2;
    let mut out = Vec::new();
    let unlimited_if_not_positive = |v: i64| u64::try_from(v).ok().filter(|v| *v > 0);
    if let Some(memory) = config.memory {
        let value = unlimited_if_not_positive(memory).unwrap_or(INFINITY);
        out.push(prop(if v2 { "MemoryMax" } else { "MemoryLimit" }, Value::U64(value)));
    }
    if let Some(shares) = config.cpu_shares.filter(|s| *s != 0) {
        out.push(if v2 {
            prop("CPUWeight", Value::U64(shares_to_weight(shares)))
        } else {
            prop("CPUShares", Value::U64(shares))
        });
    }
    // runc's addCpuQuota: the period as given; the quota per second rounded up to 10 ms (what
    // systemd keeps as a whole percentage), unlimited when not positive.
    let (quota, period) = (config.cpu_quota.unwrap_or(0), config.cpu_period.unwrap_or(0));
    if period != 0 && flavor.quota_period() {
        out.push(prop("CPUQuotaPeriodUSec", Value::U64(period)));
    }
    if quota != 0 || period != 0 {
        let per_sec = match u64::try_from(quota).ok().filter(|q| *q > 0) {
            Some(q) => {
                let period = if period == 0 { DEFAULT_PERIOD_US } else { period };
                (q.saturating_mul(1_000_000) / period).div_ceil(10_000).saturating_mul(10_000)
            }
            None => INFINITY,
        };
        out.push(prop("CPUQuotaPerSecUSec", Value::U64(per_sec)));
    }
    if let Some(pids) = config.pids {
        let value = unlimited_if_not_positive(pids).unwrap_or(INFINITY);
        out.push(prop("TasksMax", Value::U64(value)));
    }
    out
}

/// A new slice's properties, as runc's `Apply` for a slice with no process (the kubelet's
/// case): its description, its parent as `Wants=`, accounting on, no default dependencies;
/// then its limits. `Delegate` is runc's for scopes only, not slices.
pub fn start_properties(
    unit: &str,
    parent: &str,
    config: &ResourceConfig,
    flavor: Flavor,
) -> Vec<Property> {
    let v2 = flavor.v2;
    let mut out = vec![
        prop("Description", Value::Str(format!("libcontainer container {unit}"))),
        prop("Wants", Value::Strs(vec![parent.to_string()])),
        prop("MemoryAccounting", Value::Bool(true)),
        prop("CPUAccounting", Value::Bool(true)),
        prop(if v2 { "IOAccounting" } else { "BlockIOAccounting" }, Value::Bool(true)),
        prop("TasksAccounting", Value::Bool(true)),
        prop("DefaultDependencies", Value::Bool(false)),
    ];
    out.extend(resource_properties(config, flavor));
    out
}

/// A cgroup path's unit (its last component, when that names a unit) and the unit's parent
/// slice (`-.slice` at the top).
fn unit_of(path: &str) -> Option<(&str, &str)> {
    let path = path.trim_end_matches('/');
    let (dir, unit) = path.rsplit_once('/').unwrap_or(("", path));
    if ![".slice", ".scope", ".service"].iter().any(|s| unit.ends_with(s)) {
        return None;
    }
    let parent = dir.rsplit('/').next().filter(|p| !p.is_empty()).unwrap_or("-.slice");
    Some((unit, parent))
}

/// [`Cgroups`] through systemd: units made, sized and stopped by systemd, the cgroupfs written
/// after it and read.
#[derive(Debug, Clone)]
pub struct SystemdCgroups {
    fs: CgroupFs,
    systemd: Arc<dyn Systemd>,
}

impl SystemdCgroups {
    pub fn new(fs: CgroupFs, systemd: Arc<dyn Systemd>) -> Self {
        Self { fs, systemd }
    }

    fn flavor(&self) -> Flavor {
        Flavor { v2: self.fs.is_v2(), version: self.systemd.version() }
    }

    /// The driver on this host: refused unless systemd is the init system under `root` (`/`),
    /// then systemd on the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else its socket).
    pub fn open(root: &Path, fs: CgroupFs) -> Result<Self, DriverError> {
        check_booted(root)?;
        let bus = bus::SystemdBus::system()?;
        Ok(Self::new(fs, Arc::new(bus)))
    }
}

impl Cgroups for SystemdCgroups {
    fn exists(&self, path: &str) -> bool {
        self.fs.exists(path)
    }

    fn create(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError> {
        if let Some((unit, parent)) = unit_of(path) {
            let properties = start_properties(unit, parent, config, self.flavor());
            self.systemd.start_unit(unit, &properties)?;
        }
        self.fs.create(path, config)
    }

    fn update(&self, path: &str, config: &ResourceConfig) -> Result<(), CgroupError> {
        if let Some((unit, _)) = unit_of(path) {
            let properties = resource_properties(config, self.flavor());
            if !properties.is_empty() {
                self.systemd.set_properties(unit, &properties)?;
            }
        }
        self.fs.update(path, config)
    }

    fn remove(&self, path: &str) -> Result<(), CgroupError> {
        if let Some((unit, _)) = unit_of(path) {
            self.systemd.stop_unit(unit)?;
        }
        // What systemd left (older versions keep sub-cgroups), as runc's Destroy.
        self.fs.remove(path)
    }

    fn children(&self, path: &str) -> Vec<String> {
        self.fs.children(path)
    }

    fn usage(&self, path: &str, processes: Processes) -> Option<CgroupUsage> {
        self.fs.usage(path, processes)
    }

    fn end_reading(&self) {
        self.fs.end_reading();
    }
}

#[cfg(test)]
mod tests;
