//! Container manager, as upstream's `pkg/kubelet/cm`:
//! - [`layout`]: where the kubelet's cgroups are, by `cgroupDriver` ([`CgroupDriver`]):
//!   `<cgroupRoot>/kubepods[/<qos>]/pod<uid>` (cgroupfs) or
//!   `/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice` (systemd);
//! - [`cgroupfs`]: the [`Cgroups`] boundary and the cgroup v1/v2 filesystem behind it;
//! - [`control_files`]: the stats scrapes' reads of control files, through kept handles on
//!   the QoS levels' directories;
//! - [`systemd`]: the systemd driver: each cgroup a transient slice systemd makes, sizes and
//!   stops ([`systemd::Systemd`], over D-Bus in [`systemd::bus`]), its files then written
//!   through the cgroupfs; refused at start where systemd is not the init system;
//! - [`resources`]: what a cgroup is given (shares, quota, memory and process limits), for a pod
//!   and for amounts such as allocatable;
//! - [`node_config`]: `enforceNodeAllocatable`, `qosReserved`, the CFS and pod PID settings;
//! - [`manager`]: [`ContainerManager`], which makes, sizes and removes them;
//! - [`allocatable`]: what pods may have of the node.
//!
//! With `cgroupsPerQOS: false` there are no pod cgroups, as upstream's `podContainerManagerNoop`:
//! every sandbox's cgroup parent is `cgroupRoot` itself and the kubelet never touches a cgroup
//! (hollow nodes run this way, unprivileged).

pub mod allocatable;
pub mod cgroupfs;
pub mod control_files;
pub mod layout;
pub mod manager;
pub mod node_config;
pub mod resources;
pub mod systemd;

pub use cgroupfs::{CgroupFs, Cgroups};
pub use layout::{CgroupDriver, CgroupLayout};
pub use manager::ContainerManager;
