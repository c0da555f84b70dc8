use super::*;
use crate::eviction::Observation;

fn written(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn soft(values: &[(&str, &str)], grace: &[(&str, &str)]) -> SoftThresholds {
    SoftThresholds {
        values: Thresholds::parse(&written(values), false).unwrap(),
        grace_periods: parse_grace_periods(&written(grace)).unwrap(),
    }
}

fn obs(signal: Signal, available: u64, capacity: u64) -> Observations {
    Observations(BTreeMap::from([(signal, Observation { available, capacity })]))
}

#[test]
fn hard_thresholds_come_first_then_soft_ones_with_their_grace_periods_and_minimum_reclaims() {
    let hard = Thresholds::parse(&written(&[("memory.available", "100Mi")]), false).unwrap();
    let soft = soft(&[("memory.available", "1Gi")], &[("memory.available", "1m30s")]);
    let reclaim = parse_minimum_reclaims(&written(&[("memory.available", "500Mi")])).unwrap();
    let c = EvictionConfig::new(&hard, &soft, &reclaim).unwrap();
    let q = |n| Some(ThresholdValue::Quantity(n));
    assert_eq!(
        c.thresholds,
        [
            Threshold {
                signal: Signal::MemoryAvailable,
                value: ThresholdValue::Quantity(100 << 20),
                grace: Duration::ZERO,
                min_reclaim: q(500 << 20),
            },
            Threshold {
                signal: Signal::MemoryAvailable,
                value: ThresholdValue::Quantity(1 << 30),
                grace: Duration::from_secs(90),
                min_reclaim: q(500 << 20),
            },
        ]
    );
    assert!(c.thresholds[0].is_hard() && !c.thresholds[1].is_hard());
    assert_eq!(c.pressure_transition_period, Duration::from_secs(300), "upstream's 5m");
    assert_eq!(c.max_pod_grace_period_seconds, 0);
    assert_eq!(EvictionConfig::default().thresholds.len(), 4, "upstream's hard defaults");
}

#[test]
fn a_soft_threshold_without_a_grace_period_is_refused_in_upstreams_words() {
    let soft = soft(&[("nodefs.available", "15%")], &[("memory.available", "1m")]);
    let (signal, e) =
        EvictionConfig::new(&Thresholds::none(), &soft, &BTreeMap::new()).unwrap_err();
    assert_eq!(signal, Signal::NodeFsAvailable);
    assert_eq!(
        e.to_string(),
        "grace period must be specified for the soft eviction threshold nodefs.available"
    );
    // A soft threshold turned off (0%) needs none.
    let off = self::soft(&[("nodefs.available", "0%")], &[]);
    assert!(EvictionConfig::new(&Thresholds::none(), &off, &BTreeMap::new()).is_ok());
}

#[test]
fn grace_periods_that_do_not_parse_are_refused_with_the_signal() {
    let err = |pairs: &[(&str, &str)]| {
        let (signal, e) = parse_grace_periods(&written(pairs)).unwrap_err();
        format!("{signal}: {e}")
    };
    assert_eq!(
        err(&[("memory.available", "-1m")]),
        "memory.available: invalid eviction grace period specified: -1m, must be a positive value"
    );
    assert_eq!(
        err(&[("memory.available", "soon")]),
        "memory.available: invalid duration \"soon\" (use Go syntax such as 20s, 1m0s, 1h30m, 500ms)"
    );
    assert_eq!(
        err(&[("disk.available", "1m")]),
        "disk.available: unsupported eviction signal disk.available"
    );
    let ok = parse_grace_periods(&written(&[("pid.available", "0s")])).unwrap();
    assert_eq!(
        ok[&Signal::PidAvailable],
        Duration::ZERO,
        "zero: the soft threshold acts as a hard one"
    );
}

#[test]
fn minimum_reclaims_parse_as_upstream_and_bad_ones_are_refused() {
    let r =
        parse_minimum_reclaims(&written(&[("nodefs.available", "5%"), ("memory.available", "0")]))
            .unwrap();
    assert_eq!(r[&Signal::NodeFsAvailable], ThresholdValue::Fraction(0.05));
    assert_eq!(r[&Signal::MemoryAvailable], ThresholdValue::Quantity(0), "zero is allowed");
    let err = |pairs: &[(&str, &str)]| {
        let (signal, e) = parse_minimum_reclaims(&written(pairs)).unwrap_err();
        format!("{signal}: {e}")
    };
    assert_eq!(
        err(&[("nodefs.available", "0%")]),
        "nodefs.available: eviction percentage minimum reclaim nodefs.available must be positive: 0%"
    );
    assert_eq!(
        err(&[("memory.available", "-1Gi")]),
        "memory.available: negative eviction minimum reclaim specified for memory.available"
    );
    assert_eq!(
        err(&[("memory.available", "lots")]),
        "memory.available: \"lots\" is neither a quantity nor a percentage"
    );
}

#[test]
fn with_its_minimum_reclaim_enforced_a_threshold_is_met_until_that_much_more_is_free() {
    let t = Threshold {
        signal: Signal::NodeFsAvailable,
        value: ThresholdValue::Fraction(0.10),
        grace: Duration::ZERO,
        min_reclaim: Some(ThresholdValue::Quantity(50)),
    };
    assert!(t.met(&obs(Signal::NodeFsAvailable, 99, 1000), false));
    assert!(!t.met(&obs(Signal::NodeFsAvailable, 100, 1000), false), "at the line: not met");
    assert!(t.met(&obs(Signal::NodeFsAvailable, 149, 1000), true), "below 100 + 50");
    assert!(!t.met(&obs(Signal::NodeFsAvailable, 150, 1000), true));
    assert!(!t.met(&Observations::default(), true), "a signal not read meets nothing");
}
