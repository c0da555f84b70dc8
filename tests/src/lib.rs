//! The real test tier: harnesses that start real components in private directories and tear
//! them down, and test bodies shared between the real runtime and the fake one.
//!
//! - [`require`]: fail loudly when root or a tool is missing (or honour the explicit opt-out).
//! - [`containerd`]: a private containerd with its own root, state, socket, CNI and cgroups.
//! - [`registry`]: a loopback OCI registry with the test images pushed.
//! - [`kubelet`]: the kubelet binary as a process against a harness containerd.
//! - [`leaks`]: what teardown must leave behind (nothing), checked.
//! - [`cri_suite`]: CRI scenarios run against any runtime.
//! - [`eventually`]: bounded polling instead of sleeps.

pub mod containerd;
pub mod cri_suite;
pub mod eventually;
pub mod kubelet;
pub mod leaks;
pub mod registry;
pub mod require;

pub use eventually::eventually;
