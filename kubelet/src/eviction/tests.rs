use super::*;

fn written(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn parse(pairs: &[(&str, &str)]) -> Result<Thresholds, (String, ThresholdError)> {
    Thresholds::parse(&written(pairs), false)
}

#[test]
fn the_defaults_are_upstreams_linux_ones() {
    let d = Thresholds::default();
    assert_eq!(d.get(Signal::MemoryAvailable), Some(ThresholdValue::Quantity(100 << 20)));
    assert_eq!(d.get(Signal::NodeFsAvailable), Some(ThresholdValue::Fraction(0.10)));
    assert_eq!(d.get(Signal::NodeFsInodesFree), Some(ThresholdValue::Fraction(0.05)));
    assert_eq!(d.get(Signal::ImageFsAvailable), Some(ThresholdValue::Fraction(0.15)));
    assert_eq!((d.get(Signal::ImageFsInodesFree), d.get(Signal::PidAvailable)), (None, None));
}

#[test]
fn a_written_set_replaces_the_defaults_unless_merged() {
    let only = parse(&[("memory.available", "1Gi")]).unwrap();
    assert_eq!(only.get(Signal::MemoryAvailable), Some(ThresholdValue::Quantity(1 << 30)));
    assert_eq!(only.get(Signal::NodeFsAvailable), None, "upstream: the others are reset");
    let merged = Thresholds::parse(&written(&[("memory.available", "1Gi")]), true).unwrap();
    assert_eq!(merged.get(Signal::MemoryAvailable), Some(ThresholdValue::Quantity(1 << 30)));
    assert_eq!(merged.get(Signal::NodeFsAvailable), Some(ThresholdValue::Fraction(0.10)));
    // 0% written turns a default off even when merging.
    let off = Thresholds::parse(&written(&[("nodefs.available", "0%")]), true).unwrap();
    assert_eq!(off.get(Signal::NodeFsAvailable), None);
    assert_eq!(parse(&[("pid.available", "100%")]).unwrap(), Thresholds::none());
}

#[test]
fn thresholds_that_do_not_parse_are_refused_with_upstreams_words() {
    let err = |pairs: &[(&str, &str)]| {
        let (signal, e) = parse(pairs).unwrap_err();
        format!("{signal}: {e}")
    };
    assert_eq!(
        err(&[("memory.available", "ten percent")]),
        "memory.available: \"ten percent\" is neither a quantity nor a percentage"
    );
    assert_eq!(
        err(&[("memory.available<", "1Gi")]),
        "memory.available<: unsupported eviction signal memory.available<"
    );
    assert_eq!(
        err(&[("containerfs.available", "10%")]),
        "containerfs.available: eviction signal containerfs.available is not observed by this kubelet yet"
    );
    assert_eq!(
        err(&[("nodefs.available", "-5%")]),
        "nodefs.available: eviction percentage threshold nodefs.available must be >= 0%: -5%"
    );
    assert_eq!(
        err(&[("nodefs.available", "150%")]),
        "nodefs.available: eviction percentage threshold nodefs.available must be <= 100%: 150%"
    );
    assert_eq!(
        err(&[("memory.available", "0")]),
        "memory.available: eviction threshold memory.available must be positive: 0"
    );
    assert_eq!(
        err(&[("memory.available", "-1Gi")]),
        "memory.available: eviction threshold memory.available must be positive: -1Gi"
    );
    assert!(err(&[("nodefs.available", "NaN%")]).contains("neither a quantity"));
}

#[test]
fn a_threshold_is_met_below_its_amount_and_never_for_a_signal_not_read() {
    let t = parse(&[("nodefs.available", "10%"), ("memory.available", "100Mi")]).unwrap();
    let obs = |pairs: &[(Signal, u64, u64)]| {
        Observations(
            pairs
                .iter()
                .map(|&(s, available, capacity)| (s, Observation { available, capacity }))
                .collect(),
        )
    };
    assert_eq!(t.met(&obs(&[(Signal::NodeFsAvailable, 10, 100)])), [], "at the line: not met");
    assert_eq!(t.met(&obs(&[(Signal::NodeFsAvailable, 9, 100)])), [Signal::NodeFsAvailable]);
    assert_eq!(
        t.met(&obs(&[(Signal::MemoryAvailable, 99 << 20, 1 << 40)])),
        [Signal::MemoryAvailable]
    );
    assert_eq!(t.met(&Observations::default()), []);
    assert_eq!(t.reserved(Signal::NodeFsAvailable, 1000), 100);
    assert_eq!(t.reserved(Signal::MemoryAvailable, 50 << 20), 50 << 20, "never above capacity");
    assert_eq!(t.reserved(Signal::PidAvailable, 1000), 0);
}

#[test]
fn the_flag_form_splits_into_the_config_map_or_says_why_not() {
    assert_eq!(
        statements("memory.available<1Gi, nodefs.available<5%").unwrap(),
        written(&[("memory.available", "1Gi"), ("nodefs.available", "5%")])
    );
    assert_eq!(statements("").unwrap(), BTreeMap::new());
    assert_eq!(
        statements("memory.available=1Gi").unwrap_err(),
        "invalid eviction threshold syntax memory.available=1Gi, expected <signal><operator><value>"
    );
    assert_eq!(
        statements("memory.available<1Gi,memory.available<2Gi").unwrap_err(),
        "found duplicate eviction threshold for signal memory.available"
    );
}
