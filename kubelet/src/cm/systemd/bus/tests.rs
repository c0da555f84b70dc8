//! [`SystemdBus`] against a stand-in `org.freedesktop.systemd1` on a private `dbus-daemon` (as
//! the e2e crate's stand-in logind): the manager records `StartTransientUnit`,
//! `SetUnitProperties` and `StopUnit` and sends `JobRemoved` for each job, with the result a
//! test chose, or never.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue};

use super::*;
use crate::cm::cgroupfs::{CgroupFs, Cgroups};
use crate::cm::systemd::{SystemdCgroups, resource_properties};
use crate::cm::{CgroupDriver, CgroupLayout, resources};

type Props = BTreeMap<String, OwnedValue>;

#[derive(Debug, Default)]
struct Seen {
    starts: Vec<(String, String, Props)>,
    sets: Vec<(String, bool, Props)>,
    stops: Vec<(String, String)>,
    resets: Vec<String>,
}

/// systemd's errors the client tells apart (`org.freedesktop.systemd1.UnitExists`).
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.freedesktop.systemd1")]
enum SdError {
    #[zbus(error)]
    ZBus(zbus::Error),
    UnitExists(String),
}

struct Manager {
    seen: Arc<Mutex<Seen>>,
    /// The job result sent for each unit (`done` unless named; `None`: no signal at all).
    results: BTreeMap<String, Option<String>>,
    /// Units that exist already: starting one is refused as systemd does.
    existing: Vec<String>,
    jobs: u32,
}

impl Manager {
    async fn finish(
        &mut self,
        emitter: &SignalEmitter<'_>,
        unit: &str,
    ) -> Result<OwnedObjectPath, SdError> {
        self.jobs += 1;
        let id = self.jobs;
        let path = OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{id}"))
            .map_err(zbus::Error::from)?;
        let result = self.results.get(unit).cloned().unwrap_or(Some("done".into()));
        if let Some(result) = result {
            // Another job's removal first: the client must wait for its own.
            let other = ObjectPath::from_static_str_unchecked("/org/freedesktop/systemd1/job/0");
            Self::job_removed(emitter, 0, other, "other.slice", "done").await?;
            Self::job_removed(emitter, id, path.as_ref(), unit, &result).await?;
        }
        Ok(path)
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    async fn start_transient_unit(
        &mut self,
        name: String,
        mode: String,
        properties: Vec<(String, OwnedValue)>,
        _aux: Vec<(String, Vec<(String, OwnedValue)>)>,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<OwnedObjectPath, SdError> {
        if self.existing.contains(&name) {
            return Err(SdError::UnitExists(format!("Unit {name} already exists.")));
        }
        let props = properties.into_iter().collect();
        self.seen.lock().unwrap().starts.push((name.clone(), mode, props));
        self.finish(&emitter, &name).await
    }

    async fn set_unit_properties(
        &mut self,
        name: String,
        runtime: bool,
        properties: Vec<(String, OwnedValue)>,
    ) {
        let props = properties.into_iter().collect();
        self.seen.lock().unwrap().sets.push((name, runtime, props));
    }

    async fn stop_unit(
        &mut self,
        name: String,
        mode: String,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
    ) -> Result<OwnedObjectPath, SdError> {
        self.seen.lock().unwrap().stops.push((name.clone(), mode));
        self.finish(&emitter, &name).await
    }

    async fn reset_failed_unit(&mut self, name: String) {
        self.seen.lock().unwrap().resets.push(name);
    }

    #[zbus(property)]
    fn version(&self) -> String {
        "255.4-1".into()
    }

    #[zbus(signal)]
    async fn job_removed(
        emitter: &SignalEmitter<'_>,
        id: u32,
        job: ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// `dbus-daemon` on a socket in a temp dir, with the stand-in manager served on it from a
/// runtime of the test's.
struct Bus {
    dir: tempfile::TempDir,
    daemon: Child,
    _conn: zbus::Connection,
    seen: Arc<Mutex<Seen>>,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

impl Bus {
    async fn start(results: BTreeMap<String, Option<String>>, existing: Vec<String>) -> Self {
        let dir = tempfile::Builder::new().prefix("kubelet-dbus-").tempdir_in("/tmp").unwrap();
        let socket = dir.path().join("system_bus_socket");
        let config = dir.path().join("system.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
                socket.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("dbus-daemon.log")).unwrap();
        let daemon = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dbus-daemon (hack/install-deps.sh installs it)");
        let conn = connect_when_up(&socket).await;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let manager = Manager { seen: seen.clone(), results, existing, jobs: 0 };
        conn.object_server().at("/org/freedesktop/systemd1", manager).await.unwrap();
        conn.request_name("org.freedesktop.systemd1").await.unwrap();
        Self { dir, daemon, _conn: conn, seen }
    }

    fn address(&self) -> String {
        format!("unix:path={}", self.dir.path().join("system_bus_socket").display())
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }
}

async fn connect_when_up(socket: &Path) -> zbus::Connection {
    let address = format!("unix:path={}", socket.display());
    for _ in 0..500 {
        if socket.exists()
            && let Ok(conn) =
                zbus::connection::Builder::address(address.as_str()).unwrap().build().await
        {
            return conn;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("dbus-daemon did not listen on {} within 10 s", socket.display());
}

fn u64_prop(props: &Props, name: &str) -> u64 {
    let value = props.get(name).unwrap_or_else(|| panic!("no {name} in {props:?}"));
    u64::try_from(value).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bool_prop(props: &Props, name: &str) -> bool {
    bool::try_from(props.get(name).unwrap_or_else(|| panic!("no {name}"))).unwrap()
}

// Multi-threaded: the stand-in is served by the workers while the test thread blocks in calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guaranteed_pods_slice_is_started_with_its_limits_and_its_job_awaited() {
    let bus = Bus::start(BTreeMap::new(), Vec::new()).await;
    let cgroupfs = tempfile::tempdir().unwrap();
    std::fs::write(cgroupfs.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
    let client = SystemdBus::at(&bus.address()).unwrap();
    let cgroups = SystemdCgroups::new(CgroupFs::new(cgroupfs.path()), Arc::new(client));

    let layout = CgroupLayout { root: "/".into(), per_qos: true, driver: CgroupDriver::Systemd };
    let uid = "5f1c-77";
    let both = [("cpu", "1500m"), ("memory", "256Mi")];
    let spec = crate::test_cri::resources_spec(&both, &both);
    let config = resources::for_pod(&spec, &resources::PodCgroupPolicy::default());
    let path = layout.pod_cgroup(api::qos::pod_qos(&spec), uid);
    // Blocking calls, as the container manager makes them, from the test's runtime thread.
    cgroups.create(&path, &config).unwrap();

    {
        let seen = bus.seen();
        let (unit, mode, props) = &seen.starts[0];
        assert_eq!((unit.as_str(), mode.as_str()), ("kubepods-pod5f1c_77.slice", "replace"));
        let wants: Vec<String> = props["Wants"].try_clone().unwrap().try_into().unwrap();
        assert_eq!(wants, ["kubepods.slice"]);
        let description: String = props["Description"].try_clone().unwrap().try_into().unwrap();
        assert_eq!(description, "libcontainer container kubepods-pod5f1c_77.slice");
        assert!(!bool_prop(props, "DefaultDependencies"));
        for accounting in ["MemoryAccounting", "CPUAccounting", "IOAccounting", "TasksAccounting"] {
            assert!(bool_prop(props, accounting), "{accounting}");
        }
        assert_eq!(u64_prop(props, "MemoryMax"), 256 << 20);
        assert_eq!(u64_prop(props, "CPUWeight"), resources::shares_to_weight(1536));
        assert_eq!(u64_prop(props, "CPUQuotaPerSecUSec"), 1_500_000);
        assert_eq!(u64_prop(props, "CPUQuotaPeriodUSec"), 100_000);
    }
    // The files, written after systemd.
    let pod_dir = cgroupfs.path().join("kubepods.slice/kubepods-pod5f1c_77.slice");
    assert_eq!(std::fs::read_to_string(pod_dir.join("cpu.max")).unwrap(), "150000 100000");
    assert_eq!(
        std::fs::read_to_string(pod_dir.join("memory.max")).unwrap(),
        (256 << 20).to_string()
    );

    let smaller = resources::ResourceConfig { memory: Some(128 << 20), ..Default::default() };
    cgroups.update(&path, &smaller).unwrap();
    {
        let seen = bus.seen();
        let (unit, runtime, props) = &seen.sets[0];
        assert_eq!((unit.as_str(), *runtime), ("kubepods-pod5f1c_77.slice", true));
        assert_eq!(u64_prop(props, "MemoryMax"), 128 << 20);
        assert_eq!(
            props.len(),
            resource_properties(
                &smaller,
                crate::cm::systemd::Flavor { v2: true, version: Some(255) }
            )
            .len()
        );
    }
    cgroups.remove(&path).unwrap();
    assert_eq!(
        bus.seen().stops,
        [("kubepods-pod5f1c_77.slice".to_string(), "replace".to_string())]
    );
    assert!(!pod_dir.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_or_unanswered_job_is_an_error_and_the_unit_is_reset() {
    let results = BTreeMap::from([
        ("bad.slice".to_string(), Some("failed".to_string())),
        ("silent.slice".to_string(), None),
    ]);
    let bus = Bus::start(results, vec!["there.slice".into()]).await;
    let client = SystemdBus::at(&bus.address()).unwrap().with_timeout(Duration::from_millis(300));
    let err = client.start_unit("bad.slice", &[]).unwrap_err();
    assert_eq!(err.to_string(), "error creating systemd unit `bad.slice`: got `failed`");
    let err = client.start_unit("silent.slice", &[]).unwrap_err();
    assert_eq!(err.to_string(), "Timeout waiting for systemd to create silent.slice");
    assert_eq!(bus.seen().resets, ["bad.slice", "silent.slice"]);
    client.start_unit("there.slice", &[]).unwrap();
    assert!(bus.seen().starts.iter().all(|(u, ..)| u != "there.slice"));
}

// On a runtime, as the kubelet's start calls it.
#[tokio::test]
async fn a_bus_that_is_not_there_is_a_connect_error() {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("unix:path={}", dir.path().join("none").display());
    let err = SystemdBus::at(&address).unwrap_err();
    assert!(err.to_string().starts_with("systemd: connecting to the system bus: "), "{err}");
}
