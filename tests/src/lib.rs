//! The real test tier: harnesses that start real components in private directories and tear
//! them down, and test bodies shared between the real runtime and the fake one.
//!
//! - [`require`]: fail loudly when root or a tool is missing (or honour the explicit opt-out).
//! - [`containerd`]: a private containerd with its own root, state, socket, CNI and cgroups.
//! - [`registry`]: a loopback OCI registry with the test images pushed.
//! - [`kubelet`]: the kubelet binary as a process against a harness containerd.
//! - [`apiserver`]: apiserver-lite as a process (on its own SQLite store or a harness etcd;
//!   peers sharing one's PKI and flags), and the real kubectl against it.
//! - [`etcd`]: a private etcd cluster (one or three members) on loopback ports: leader, kill,
//!   stop, restart.
//! - [`cluster`]: apiserver-lite, a private containerd and a kubelet joined to it, as one.
//! - [`scheduler`]: the scheduler binary as a process, and Node objects with capacity for nodes
//!   without kubelets.
//! - [`measure`]: what benchmarks measure (percentiles, process CPU and RSS, runtime CPU).
//! - [`controllers`]: the controller-manager binary as a process.
//! - [`hollow`]: hollow nodes (real kubelets on fake runtimes) joined to apiserver-lite, with the
//!   scheduler and other control-plane processes: the scale-test cluster.
//! - [`ports`]: loopback ports for components, never handed to two test processes.
//! - [`process`]: a component as a child process: liveness with its log tail, RSS and CPU.
//! - [`leaks`]: what teardown must leave behind (nothing), checked.
//! - [`logind`]: a private system bus (`dbus-daemon`) with a stand-in systemd-logind, for
//!   graceful node shutdown.
//! - [`cri_suite`]: CRI scenarios run against any runtime.
//! - [`eventually`]: bounded polling instead of sleeps.

pub mod apiserver;
pub mod cluster;
pub mod containerd;
pub mod controllers;
pub mod cri_suite;
pub mod etcd;
pub mod eventually;
pub mod hollow;
pub mod kubelet;
pub mod leaks;
pub mod logind;
pub mod measure;
pub mod ports;
pub mod process;
pub mod prom;
pub mod registry;
pub mod require;
pub mod scheduler;

pub use eventually::{eventually, eventually_showing};

/// A binary of this workspace: beside this executable (a binary in `target/<profile>`) or one
/// level up (a test in `target/<profile>/deps`).
pub fn workspace_binary(name: &str) -> anyhow::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or_else(|| anyhow::anyhow!("executable location"))?;
    let candidates = [Some(dir.join(name)), dir.parent().map(|p| p.join(name))];
    match candidates.iter().flatten().find(|c| c.is_file()) {
        Some(bin) => Ok(bin.clone()),
        None => anyhow::bail!(
            "no {name} binary beside {}: build it first (`cargo build --workspace --bins`; hack/test.sh does)",
            exe.display()
        ),
    }
}
