//! The RPCs a test can aim a fault at, and the fault knobs themselves.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Every CRI RPC the fake answers. Faults and call counts are keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rpc {
    Version,
    RunPodSandbox,
    StopPodSandbox,
    RemovePodSandbox,
    PodSandboxStatus,
    ListPodSandbox,
    CreateContainer,
    StartContainer,
    StopContainer,
    RemoveContainer,
    ListContainers,
    ContainerStatus,
    ReopenContainerLog,
    ExecSync,
    Status,
    GetContainerEvents,
    ListContainerStats,
    ListPodSandboxStats,
    ListImages,
    ImageStatus,
    PullImage,
    RemoveImage,
    ImageFsInfo,
}

/// Injected faults: a queue of errors per RPC (each answers one call) and a standing delay.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    fail_next: HashMap<Rpc, VecDeque<tonic::Status>>,
    delays: HashMap<Rpc, Duration>,
    calls: HashMap<Rpc, u64>,
}

impl Faults {
    pub(crate) fn push_failure(&mut self, rpc: Rpc, status: tonic::Status) {
        self.fail_next.entry(rpc).or_default().push_back(status);
    }

    pub(crate) fn set_delay(&mut self, rpc: Rpc, delay: Option<Duration>) {
        match delay {
            Some(d) => self.delays.insert(rpc, d),
            None => self.delays.remove(&rpc),
        };
    }

    /// Counts the call and says what to do with it: how long to wait, then whether to fail.
    pub(crate) fn admit(&mut self, rpc: Rpc) -> (Option<Duration>, Option<tonic::Status>) {
        *self.calls.entry(rpc).or_default() += 1;
        let failure = self.fail_next.get_mut(&rpc).and_then(VecDeque::pop_front);
        (self.delays.get(&rpc).copied(), failure)
    }

    pub(crate) fn calls(&self, rpc: Rpc) -> u64 {
        self.calls.get(&rpc).copied().unwrap_or(0)
    }
}
