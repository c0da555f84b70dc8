use super::*;
use crate::eviction::{Observation, Signal, ThresholdValue};

const MIN: Duration = Duration::from_secs(60);
const TRANSITION: Duration = Duration::from_secs(300);
const NONE: [usize; 0] = [];

fn memory(available: u64) -> Observations {
    let o = Observation { available, capacity: 1000 };
    Observations(BTreeMap::from([(Signal::MemoryAvailable, o)]))
}

fn threshold(value: u64, grace: Duration, min_reclaim: Option<u64>) -> Threshold {
    Threshold {
        signal: Signal::MemoryAvailable,
        value: ThresholdValue::Quantity(value),
        grace,
        min_reclaim: min_reclaim.map(ThresholdValue::Quantity),
    }
}

#[test]
fn a_soft_threshold_acts_only_once_met_continuously_for_its_grace_period() {
    let soft = [threshold(100, MIN, None)];
    let mut state = State::default();
    let t0 = Instant::now();
    let v = state.observe(&soft, &memory(50), TRANSITION, t0);
    assert_eq!(v.pressures, [Pressure::Memory], "the condition shows before the grace period");
    assert_eq!(v.act_on, Vec::<usize>::new());
    assert_eq!(state.observe(&soft, &memory(50), TRANSITION, t0 + MIN / 2).act_on, NONE);
    assert_eq!(state.observe(&soft, &memory(50), TRANSITION, t0 + MIN).act_on, [0]);
    // Relieved once, the clock starts again.
    assert_eq!(state.observe(&soft, &memory(500), TRANSITION, t0 + MIN * 2).act_on, NONE);
    let t1 = t0 + MIN * 3;
    assert_eq!(state.observe(&soft, &memory(50), TRANSITION, t1).act_on, NONE);
    assert_eq!(
        state.observe(&soft, &memory(50), TRANSITION, t1 + MIN - Duration::from_secs(1)).act_on,
        NONE
    );
    assert_eq!(state.observe(&soft, &memory(50), TRANSITION, t1 + MIN).act_on, [0]);
}

#[test]
fn a_hard_threshold_acts_at_once() {
    let hard = [threshold(100, Duration::ZERO, None), threshold(200, MIN, None)];
    let v = State::default().observe(&hard, &memory(50), TRANSITION, Instant::now());
    assert_eq!(v.act_on, [0], "the hard one; the soft one waits for its grace period");
}

#[test]
fn a_met_threshold_stays_met_until_its_minimum_reclaim_is_freed() {
    let hard = [threshold(100, Duration::ZERO, Some(50))];
    let mut state = State::default();
    let t0 = Instant::now();
    // Not met yet: the minimum reclaim does not count before the threshold is crossed.
    assert_eq!(state.observe(&hard, &memory(120), TRANSITION, t0).act_on, NONE);
    assert_eq!(state.observe(&hard, &memory(90), TRANSITION, t0).act_on, [0]);
    assert_eq!(state.observe(&hard, &memory(120), TRANSITION, t0).act_on, [0], "below 150");
    assert_eq!(state.observe(&hard, &memory(149), TRANSITION, t0).act_on, [0]);
    assert_eq!(state.observe(&hard, &memory(150), TRANSITION, t0).act_on, NONE, "resolved");
    assert_eq!(
        state.observe(&hard, &memory(120), TRANSITION, t0).act_on,
        NONE,
        "crossed again only below 100"
    );
}

#[test]
fn a_soft_threshold_in_its_grace_period_is_not_kept_by_its_minimum_reclaim() {
    // Upstream keeps only the thresholds that acted (grace served) until their reclaim.
    let soft = [threshold(100, MIN, Some(50))];
    let mut state = State::default();
    let t0 = Instant::now();
    state.observe(&soft, &memory(90), TRANSITION, t0);
    assert_eq!(state.observe(&soft, &memory(120), TRANSITION, t0 + MIN).act_on, NONE);
    assert_eq!(
        state.observe(&soft, &memory(90), TRANSITION, t0 + MIN * 2).act_on,
        NONE,
        "the clock restarted"
    );
}

#[test]
fn a_pressure_condition_stays_for_the_transition_period_after_it_was_last_seen() {
    let hard = [threshold(100, Duration::ZERO, None)];
    let mut state = State::default();
    let t0 = Instant::now();
    assert_eq!(state.observe(&hard, &memory(50), TRANSITION, t0).pressures, [Pressure::Memory]);
    let relieved = state.observe(&hard, &memory(500), TRANSITION, t0 + MIN);
    assert_eq!((relieved.pressures, relieved.act_on), (vec![Pressure::Memory], vec![]));
    let almost = t0 + TRANSITION - Duration::from_secs(1);
    assert_eq!(
        state.observe(&hard, &memory(500), TRANSITION, almost).pressures,
        [Pressure::Memory]
    );
    assert_eq!(state.observe(&hard, &memory(500), TRANSITION, t0 + TRANSITION).pressures, []);
    // Seen again: the period counts from the newest sighting.
    let t1 = t0 + TRANSITION * 2;
    state.observe(&hard, &memory(50), TRANSITION, t1);
    assert_eq!(
        state.observe(&hard, &memory(500), TRANSITION, t1 + TRANSITION - MIN).pressures,
        [Pressure::Memory]
    );
}

#[test]
fn each_signal_sets_its_own_condition() {
    let mut disk = threshold(100, Duration::ZERO, None);
    disk.signal = Signal::ImageFsAvailable;
    let mut pid = disk;
    pid.signal = Signal::PidAvailable;
    let both = [disk, pid];
    let o = |s| (s, Observation { available: 10, capacity: 1000 });
    let observed =
        Observations(BTreeMap::from([o(Signal::ImageFsAvailable), o(Signal::PidAvailable)]));
    let v = State::default().observe(&both, &observed, TRANSITION, Instant::now());
    assert_eq!(v.pressures, [Pressure::Disk, Pressure::Pid]);
    assert_eq!(v.act_on, [0, 1]);
}
