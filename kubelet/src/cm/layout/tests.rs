use super::*;

fn layout(root: &str, driver: CgroupDriver) -> CgroupLayout {
    CgroupLayout { root: root.into(), per_qos: true, driver }
}

#[test]
fn names_pod_cgroups_like_upstream_cgroupfs() {
    let l = layout("/", CgroupDriver::Cgroupfs);
    assert_eq!(l.kubepods(), "/kubepods");
    assert_eq!(l.root_cgroup(), "/");
    assert_eq!(l.pod_cgroup(QosClass::Guaranteed, "u1"), "/kubepods/podu1");
    assert_eq!(l.pod_cgroup(QosClass::Burstable, "u1"), "/kubepods/burstable/podu1");
    assert_eq!(l.pod_cgroup(QosClass::BestEffort, "u1"), "/kubepods/besteffort/podu1");
    let custom = layout("/e2e-abc/", CgroupDriver::Cgroupfs);
    assert_eq!(custom.root_cgroup(), "/e2e-abc");
    assert_eq!(custom.pod_cgroup(QosClass::BestEffort, "u"), "/e2e-abc/kubepods/besteffort/podu");
}

#[test]
fn without_cgroups_per_qos_pods_share_the_root_and_no_cgroup_is_removed() {
    let flat = CgroupLayout { root: "/x/".into(), per_qos: false, driver: CgroupDriver::Cgroupfs };
    assert_eq!(flat.pod_cgroup(QosClass::Burstable, "u"), "/x");
    assert_eq!(flat.pod_cgroup(QosClass::Guaranteed, "u"), "/x");
    let root = CgroupLayout { root: "/".into(), per_qos: false, driver: CgroupDriver::Cgroupfs };
    assert_eq!(root.pod_cgroup(QosClass::BestEffort, "u"), "/");
    assert!(flat.all_pod_cgroups("u").is_empty(), "nothing of the kubelet's to remove");
    let slice = CgroupLayout { root: "/".into(), per_qos: false, driver: CgroupDriver::Systemd };
    assert_eq!(slice.pod_cgroup(QosClass::BestEffort, "u"), "/");
}

#[test]
fn expands_slices_as_runc() {
    // runc's TestExpandSlice cases.
    assert_eq!(expand_slice("-.slice").unwrap(), "/");
    assert_eq!(expand_slice("a.slice").unwrap(), "/a.slice");
    assert_eq!(expand_slice("a-b.slice").unwrap(), "/a.slice/a-b.slice");
    assert_eq!(expand_slice("a-b-c.slice").unwrap(), "/a.slice/a-b.slice/a-b-c.slice");
    for bad in [".slice", "a", "a.scope", "a--b.slice", "-a.slice", "a-.slice", "a/b.slice"] {
        assert_eq!(expand_slice(bad), Err(SliceError(bad.into())), "{bad}");
    }
    assert_eq!(SliceError("x".into()).to_string(), "invalid slice name: x");
}

#[test]
fn converts_cgroup_names_to_and_from_systemd_as_upstream() {
    let name = |parts: &[&str]| parts.iter().map(|p| (*p).to_string()).collect::<Vec<_>>();
    // Upstream's TestCgroupNameToSystemd cases.
    assert_eq!(to_systemd(&name(&[])), "/");
    assert_eq!(to_systemd(&name(&[""])), "/");
    assert_eq!(to_systemd(&name(&["foo"])), "/foo.slice");
    assert_eq!(to_systemd(&name(&["foo", "bar"])), "/foo.slice/foo-bar.slice");
    assert_eq!(to_systemd(&name(&["foo-bar", "baz"])), "/foo_bar.slice/foo_bar-baz.slice");
    // TestCgroupNameToSystemdBasename's inverse, ParseSystemdToCgroupName.
    assert_eq!(
        parse_systemd("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poda_b.slice"),
        name(&["kubepods", "besteffort", "poda-b"])
    );
    assert_eq!(parse_systemd("foo_bar-baz.slice"), name(&["foo-bar", "baz"]));
}

#[test]
fn names_pod_slices_like_upstream_systemd() {
    let uid = "f07700a5-b996-4b1a-a3af-5f99ecb29549";
    let l = layout("/", CgroupDriver::Systemd);
    assert_eq!(l.root_cgroup(), "/");
    assert_eq!(l.kubepods(), "/kubepods.slice");
    assert_eq!(l.qos_cgroup(QosClass::Burstable), "/kubepods.slice/kubepods-burstable.slice");
    assert_eq!(l.qos_cgroup(QosClass::Guaranteed), "/kubepods.slice");
    // As a real kubelet handed containerd (crictl inspectp's cgroup_parent).
    assert_eq!(
        l.pod_cgroup(QosClass::Burstable, uid),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podf07700a5_b996_4b1a_a3af_5f99ecb29549.slice"
    );
    assert_eq!(l.pod_cgroup(QosClass::Guaranteed, "u-1"), "/kubepods.slice/kubepods-podu_1.slice");
    assert_eq!(
        l.pod_cgroup(QosClass::BestEffort, "u"),
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu.slice"
    );
}

#[test]
fn a_systemd_cgroup_root_is_a_slice_the_kubepods_slice_goes_under() {
    for root in ["foo-bar.slice", "/foo.slice/foo-bar.slice", "/foo-bar.slice/"] {
        let l = layout(root, CgroupDriver::Systemd);
        assert_eq!(l.root_cgroup(), "/foo.slice/foo-bar.slice", "{root}");
        assert_eq!(l.kubepods(), "/foo.slice/foo-bar.slice/foo-bar-kubepods.slice", "{root}");
        assert_eq!(
            l.pod_cgroup(QosClass::BestEffort, "u"),
            "/foo.slice/foo-bar.slice/foo-bar-kubepods.slice/foo-bar-kubepods-besteffort.slice/foo-bar-kubepods-besteffort-podu.slice"
        );
        assert_eq!(check_systemd_root(root), Ok(()));
    }
    assert_eq!(check_systemd_root("/"), Ok(()));
    assert_eq!(check_systemd_root("-.slice"), Ok(()));
    assert_eq!(check_systemd_root("/kubelet"), Err(SliceError("kubelet".into())));
    assert_eq!(check_systemd_root("/a--b.slice"), Err(SliceError("a--b.slice".into())));
}

#[test]
fn reads_the_pod_uid_back_from_a_child_cgroup_name() {
    let fs = layout("/", CgroupDriver::Cgroupfs);
    assert_eq!(fs.pod_uid("podu-1").as_deref(), Some("u-1"));
    assert_eq!(fs.pod_uid("burstable"), None);
    assert_eq!(fs.pod_uid("pod"), None);
    let sd = layout("/", CgroupDriver::Systemd);
    assert_eq!(sd.pod_uid("kubepods-burstable-podu_1.slice").as_deref(), Some("u-1"));
    assert_eq!(sd.pod_uid("kubepods-podu.slice").as_deref(), Some("u"));
    assert_eq!(sd.pod_uid("kubepods-burstable.slice"), None);
    assert_eq!(sd.pod_uid("kubepods-podu.scope"), None, "not a slice");
    assert!(sd.all_pod_cgroups("u").iter().all(|p| p.ends_with("-podu.slice")));
}

#[test]
fn a_containers_cgroup_is_named_as_the_runtimes_driver_names_it() {
    let fs = layout("/", CgroupDriver::Cgroupfs);
    assert_eq!(fs.container_cgroup("/kubepods/podu", "abc", &[]), "/kubepods/podu/abc");
    let sd = layout("/", CgroupDriver::Systemd);
    let pod = "/kubepods.slice/kubepods-podu.slice";
    let children = ["crio-abc.scope".to_string(), "cri-containerd-xabc.scope".to_string()];
    assert_eq!(sd.container_cgroup(pod, "abc", &children), format!("{pod}/crio-abc.scope"));
    assert_eq!(
        sd.container_cgroup(pod, "def", &children),
        format!("{pod}/cri-containerd-def.scope"),
        "containerd's name when the scope is not there"
    );
}
