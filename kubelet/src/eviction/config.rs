//! Every threshold the eviction manager watches, as upstream's `ParseThresholdConfig`: the hard
//! ones (`evictionHard`), then the soft ones (`evictionSoft`), each soft one with its grace
//! period (`evictionSoftGracePeriod`; a soft threshold without one is refused), and each of
//! them with the signal's minimum reclaim (`evictionMinimumReclaim`). With them, how long a
//! pressure condition outlasts its thresholds (`evictionPressureTransitionPeriod`) and the
//! longest grace a soft eviction gives a pod (`evictionMaxPodGracePeriod`).

use std::collections::BTreeMap;
use std::time::Duration;

use api::duration::GoDuration;
use api::quantity::Quantity;

use super::{Observations, Signal, ThresholdError, ThresholdValue, Thresholds, signal_named};

/// Upstream's default `evictionPressureTransitionPeriod` (also what `0s` means).
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(5 * 60);

/// One threshold (upstream's `evictionapi.Threshold`): met when the signal's available amount
/// is below `value`; hard when `grace` is zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    /// How long the threshold must be met before pods are evicted for it (zero: hard).
    pub grace: Duration,
    /// Once met, it stays met until this much more than `value` is available.
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// Upstream's `isHardEvictionThreshold`.
    pub fn is_hard(&self) -> bool {
        self.grace.is_zero()
    }

    /// Whether `observed` meets it (upstream's `thresholdsMet`): below `value`, or with
    /// `enforce_min_reclaim` below `value` plus the minimum reclaim. A signal not observed meets
    /// nothing.
    pub fn met(&self, observed: &Observations, enforce_min_reclaim: bool) -> bool {
        let Some(o) = observed.get(self.signal) else { return false };
        let mut amount = self.value.amount(o.capacity);
        if enforce_min_reclaim && let Some(reclaim) = self.min_reclaim {
            amount = amount.saturating_add(reclaim.amount(o.capacity));
        }
        o.available < amount
    }
}

/// How the eviction manager is configured (upstream's `eviction.Config`).
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// The hard thresholds, then the soft ones.
    pub thresholds: Vec<Threshold>,
    pub pressure_transition_period: Duration,
    /// `evictionMaxPodGracePeriod`, in seconds.
    pub max_pod_grace_period_seconds: i64,
}

impl Default for EvictionConfig {
    /// Upstream's defaults: its hard thresholds, no soft ones.
    fn default() -> Self {
        Self::new(&Thresholds::default(), &SoftThresholds::default(), &BTreeMap::new())
            .expect("no soft thresholds to miss a grace period")
    }
}

/// `evictionSoft` and `evictionSoftGracePeriod` as parsed, before they are paired.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftThresholds {
    pub values: Thresholds,
    pub grace_periods: BTreeMap<Signal, Duration>,
}

impl Default for SoftThresholds {
    fn default() -> Self {
        Self { values: Thresholds::none(), grace_periods: BTreeMap::new() }
    }
}

impl EvictionConfig {
    /// Pairs each soft threshold with its grace period and each threshold with its minimum
    /// reclaim; the transition period and the pods' grace are upstream's defaults until set.
    /// The error names the soft threshold that has no grace period.
    pub fn new(
        hard: &Thresholds,
        soft: &SoftThresholds,
        min_reclaim: &BTreeMap<Signal, ThresholdValue>,
    ) -> Result<Self, (Signal, ThresholdError)> {
        let mut thresholds: Vec<Threshold> = hard
            .iter()
            .map(|(signal, value)| Threshold {
                signal,
                value,
                grace: Duration::ZERO,
                min_reclaim: None,
            })
            .collect();
        for (signal, value) in soft.values.iter() {
            let Some(grace) = soft.grace_periods.get(&signal) else {
                return Err((signal, ThresholdError::NoGracePeriod(signal)));
            };
            thresholds.push(Threshold { signal, value, grace: *grace, min_reclaim: None });
        }
        for t in &mut thresholds {
            t.min_reclaim = min_reclaim.get(&t.signal).copied();
        }
        Ok(Self {
            thresholds,
            pressure_transition_period: DEFAULT_PRESSURE_TRANSITION_PERIOD,
            max_pod_grace_period_seconds: 0,
        })
    }

    /// The hard thresholds, upstream's defaults besides.
    pub fn hard(hard: &Thresholds) -> Self {
        Self::new(hard, &SoftThresholds::default(), &BTreeMap::new())
            .expect("no soft thresholds to miss a grace period")
    }
}

/// `evictionSoftGracePeriod` as written (signal → Go duration), as upstream's
/// `parseGracePeriods`. The error names the signal as written.
pub fn parse_grace_periods(
    written: &BTreeMap<String, String>,
) -> Result<BTreeMap<Signal, Duration>, (String, ThresholdError)> {
    let mut periods = BTreeMap::new();
    for (name, value) in written {
        let err = |e| (name.clone(), e);
        let signal = signal_named(name).map_err(err)?;
        let period = match value.trim().strip_prefix('-') {
            Some(rest) => {
                let d = rest
                    .parse::<GoDuration>()
                    .map_err(|e| err(ThresholdError::GracePeriodSyntax(e)))?;
                if !d.0.is_zero() {
                    return Err(err(ThresholdError::NegativeGracePeriod(value.clone())));
                }
                d.0
            }
            None => {
                value
                    .trim()
                    .parse::<GoDuration>()
                    .map_err(|e| err(ThresholdError::GracePeriodSyntax(e)))?
                    .0
            }
        };
        periods.insert(signal, period);
    }
    Ok(periods)
}

/// `evictionMinimumReclaim` as written (signal → quantity or percentage), as upstream's
/// `parseMinimumReclaims`: a percentage must be above 0, a quantity not negative. The error
/// names the signal as written.
pub fn parse_minimum_reclaims(
    written: &BTreeMap<String, String>,
) -> Result<BTreeMap<Signal, ThresholdValue>, (String, ThresholdError)> {
    let mut reclaims = BTreeMap::new();
    for (name, value) in written {
        let err = |e| (name.clone(), e);
        let signal = signal_named(name).map_err(err)?;
        let syntax = || err(ThresholdError::Syntax { value: value.clone() });
        let reclaim = if let Some(percent) = value.strip_suffix('%') {
            let p: f64 = percent.trim().parse().map_err(|_| syntax())?;
            if !p.is_finite() {
                return Err(syntax());
            }
            if p <= 0.0 {
                return Err(err(ThresholdError::MinReclaimPercentNotPositive {
                    signal,
                    value: value.clone(),
                }));
            }
            ThresholdValue::Fraction(p / 100.0)
        } else {
            let q = Quantity::parse(value).map_err(|_| syntax())?;
            if q.is_negative() {
                return Err(err(ThresholdError::NegativeMinReclaim(signal)));
            }
            ThresholdValue::Quantity(u64::try_from(q.value()).map_err(|_| syntax())?)
        };
        reclaims.insert(signal, reclaim);
    }
    Ok(reclaims)
}

#[cfg(test)]
mod tests;
