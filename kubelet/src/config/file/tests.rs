use super::*;
use crate::config::checkpoint;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: NAME\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n";

fn pod(name: &str) -> String {
    POD.replace("NAME", name)
}

fn names(dir: &mut ManifestDir) -> Vec<String> {
    dir.desired().0.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect()
}

fn state_of<'a>(reports: &'a [ManifestReport], file: &str) -> &'a ManifestReport {
    reports
        .iter()
        .find(|r| r.file.ends_with(file))
        .unwrap_or_else(|| panic!("no report for {file}: {reports:?}"))
}

#[test]
fn classifies_names_like_an_operator_expects() {
    assert_eq!(classify("web.yaml"), None);
    assert_eq!(classify("web.yml"), None);
    assert_eq!(classify("web.json"), None);
    assert_eq!(classify(".web.yaml.swp"), Some(IgnoreReason::Hidden));
    assert_eq!(classify(".yaml"), Some(IgnoreReason::Hidden));
    assert_eq!(classify("web.yaml.bak"), Some(IgnoreReason::NotAManifest));
    assert_eq!(classify("web.yaml~"), Some(IgnoreReason::NotAManifest));
    assert_eq!(classify("README"), Some(IgnoreReason::NotAManifest));
}

#[test]
fn rescan_reads_manifests_and_reports_everything_else() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("a.yaml"), pod("a")).unwrap();
    std::fs::write(d.join("a.yaml.bak"), pod("a-old")).unwrap();
    std::fs::write(d.join(".b.yaml"), pod("hidden")).unwrap();
    std::fs::write(
        d.join("bad.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers: []\n",
    )
    .unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    let mut m = ManifestDir::new(d.to_path_buf(), "node".into(), Recorder::default());
    m.rescan();
    assert_eq!(names(&mut m), ["a-node"]);
    let (_, reports) = m.desired();
    assert_eq!(state_of(&reports, "/a.yaml").state, ManifestState::Accepted);
    assert_eq!(state_of(&reports, "a.yaml.bak").state, ManifestState::Ignored);
    assert_eq!(state_of(&reports, ".b.yaml").state, ManifestState::Ignored);
    assert_eq!(state_of(&reports, "sub").state, ManifestState::Ignored);
    let bad = state_of(&reports, "bad.yaml");
    assert_eq!(bad.state, ManifestState::Rejected);
    assert!(
        bad.reason.as_ref().unwrap().contains("bad.yaml")
            && bad.reason.as_ref().unwrap().contains("spec.containers: Required value")
    );
}

#[test]
fn files_and_directories_others_could_change_are_warned_about_and_still_read() {
    use std::os::unix::fs::PermissionsExt;
    let set = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let me = nix::unistd::Uid::current().as_raw();
    let owner = |uid: u32| (uid != 0).then(|| format!("owned by uid {uid}, not root"));
    assert_eq!(super::super::dir::insecurity(0o100600, 0), None);
    assert_eq!(
        super::super::dir::insecurity(0o100666, 0).as_deref(),
        Some("group- and world-writable (mode 0666)")
    );
    assert_eq!(
        super::super::dir::insecurity(0o40775, 1000).as_deref(),
        Some("group-writable (mode 0775), owned by uid 1000, not root")
    );

    let tmp = tempfile::tempdir().unwrap();
    let (d, f) = (tmp.path(), tmp.path().join("web.yaml"));
    set(d, 0o700);
    std::fs::write(&f, pod("web")).unwrap();
    set(&f, 0o600);
    let recorder = Recorder::default();
    let mut m = ManifestDir::new(d.to_path_buf(), "n".into(), recorder.clone());
    m.rescan();
    assert_eq!(state_of(&m.desired().1, "web.yaml").warning, owner(me), "as it should be");

    set(&f, 0o666);
    set(d, 0o777);
    m.rescan();
    let (pods, reports) = m.desired();
    assert_eq!(pods.len(), 1, "still read");
    let warning = state_of(&reports, "web.yaml").warning.clone().unwrap();
    assert!(
        warning.starts_with("group- and world-writable (mode 0666)")
            && warning.contains("its directory is group- and world-writable (mode 0777)"),
        "{warning}"
    );
    let insecure: Vec<_> =
        recorder.list().into_iter().filter(|e| e.reason == super::super::dir::INSECURE).collect();
    assert_eq!(insecure.len(), 2, "one for the file, one for the directory: {insecure:?}");
    m.rescan();
    let again = recorder.list().iter().filter(|e| e.reason == "InsecurePermissions").count();
    assert_eq!(again, 2, "warned once, not at every rescan");
}

#[test]
fn a_bad_edit_keeps_the_previous_pod_until_a_good_one_arrives() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("web.yaml");
    std::fs::write(&f, pod("web")).unwrap();
    let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
    m.load(&f);
    let first_uid = m.desired().0[0].metadata.uid.clone();
    std::fs::write(&f, "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n").unwrap();
    m.load(&f);
    let (pods, reports) = m.desired();
    assert_eq!(pods[0].metadata.uid, first_uid, "the last good version keeps running");
    let r = state_of(&reports, "web.yaml");
    assert!(r.running_previous_version && r.state == ManifestState::Rejected);
    std::fs::write(&f, pod("web").replace("1.35", "1.36")).unwrap();
    m.load(&f);
    let (pods, _) = m.desired();
    let image = pods[0].spec.as_ref().unwrap().containers[0].image.as_deref();
    assert_eq!(image, Some("busybox:1.36"), "the valid replacement takes over");
    assert_eq!(pods[0].metadata.uid, first_uid, "an image edit keeps the pod's identity");
}

#[test]
fn an_edit_keeps_the_uid_unless_it_changes_what_an_api_pod_could_not() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("web.yaml");
    let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
    let read = |m: &mut ManifestDir, text: &str| {
        std::fs::write(&f, text).unwrap();
        m.load(&f);
        m.desired().0.remove(0)
    };
    let first = read(&mut m, &pod("web"));
    let uid = first.metadata.uid.clone().unwrap();
    let a = |p: &Pod, k: &str| p.metadata.annotations.as_ref().unwrap()[k].clone();
    assert_eq!(a(&first, api::keys::CONFIG_HASH), uid);
    let labelled = read(&mut m, &pod("web").replace("name: web", "name: web\n  labels: {a: b}"));
    assert_eq!(labelled.metadata.labels.as_ref().unwrap()["a"], "b");
    assert_eq!(labelled.metadata.uid.as_deref(), Some(uid.as_str()), "a label keeps it");
    assert_eq!(a(&labelled, api::keys::CONFIG_HASH), uid);
    assert_eq!(a(&labelled, api::keys::STATIC_IDENTITY), a(&first, api::keys::STATIC_IDENTITY));
    assert_ne!(
        a(&labelled, api::keys::STATIC_CONTENT),
        a(&first, api::keys::STATIC_CONTENT),
        "the content hash follows every edit, so the mirror does"
    );
    let renamed_port =
        read(&mut m, &pod("web").replace("image:", "ports: [{containerPort: 80}]\n    image:"));
    assert_ne!(renamed_port.metadata.uid.as_deref(), Some(uid.as_str()), "a port does not");
    let back = read(&mut m, &pod("web"));
    assert_eq!(back.metadata.uid.as_deref(), Some(uid.as_str()), "the content's UID again");
}

#[test]
fn a_restart_while_a_manifest_is_invalid_keeps_its_checkpointed_pod() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, root) = (tmp.path().join("manifests"), tmp.path().join("root"));
    std::fs::create_dir_all(&dir).unwrap();
    let (web, gone) = (dir.join("web.yaml"), dir.join("gone.yaml"));
    std::fs::write(&web, pod("web")).unwrap();
    std::fs::write(&gone, pod("gone")).unwrap();
    let start = || {
        ManifestDir::new(dir.clone(), "n".into(), Recorder::default())
            .with_checkpoints(Checkpoints::new(&root, "n"))
    };
    let mut first = start();
    first.rescan();
    first.checkpoint();
    let pods = first.desired().0;
    let web_pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some("web-n"));
    let uid = web_pod.unwrap().metadata.uid.clone();

    // Down: web.yaml turns invalid, gone.yaml is removed.
    std::fs::write(&web, "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n").unwrap();
    std::fs::remove_file(&gone).unwrap();
    let mut second = start();
    second.rescan();
    second.checkpoint();
    let (pods, reports) = second.desired();
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(pods[0].metadata.uid, uid, "the last good pod goes on");
    let r = state_of(&reports, "web.yaml");
    assert!(r.state == ManifestState::Rejected && r.running_previous_version, "{r:?}");
    let left = std::fs::read_dir(root.join(checkpoint::DIR)).unwrap().count();
    assert_eq!(left, 1, "the removed manifest's checkpoint went");

    // Fixed: the new version takes over and replaces the checkpoint.
    std::fs::write(&web, pod("web").replace("1.35", "1.36")).unwrap();
    second.load(&web);
    second.checkpoint();
    let (pods, _) = second.desired();
    let image = pods[0].spec.as_ref().unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("busybox:1.36"));
    let (saved, _) = Checkpoints::new(&root, "n").load_all();
    let image = saved[&web].spec.as_ref().unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("busybox:1.36"));
}

#[test]
fn the_first_file_declaring_a_pod_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("b-first.yaml"), tmp.path().join("a-second.yaml"));
    let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
    std::fs::write(&a, pod("web")).unwrap();
    m.load(&a);
    std::fs::write(&b, pod("web").replace("busybox:1.35", "busybox:1.36")).unwrap();
    m.load(&b);
    let (pods, reports) = m.desired();
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].spec.as_ref().unwrap().containers[0].image.as_deref(), Some("busybox:1.35"));
    let dup = state_of(&reports, "a-second.yaml");
    assert_eq!(dup.state, ManifestState::Duplicate);
    assert!(dup.reason.as_ref().unwrap().contains("b-first.yaml"));
    m.forget(&a);
    assert_eq!(
        m.desired().0[0].spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("busybox:1.36")
    );
}

#[test]
fn files_being_written_are_not_read_by_a_rescan() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("half.yaml");
    std::fs::write(&f, "apiVersion: v1\nkind: Po").unwrap();
    let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), Recorder::default());
    m.writing(&f);
    m.rescan();
    let (pods, reports) = m.desired();
    assert!(pods.is_empty());
    assert_eq!(state_of(&reports, "half.yaml").state, ManifestState::Writing);
    std::fs::write(&f, pod("half")).unwrap();
    m.load(&f); // close-after-write
    assert_eq!(names(&mut m), ["half-n"]);
}

#[test]
fn an_unchanged_file_is_not_parsed_again() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("web.yaml");
    std::fs::write(&f, pod("web")).unwrap();
    let recorder = Recorder::default();
    let mut m = ManifestDir::new(tmp.path().to_path_buf(), "n".into(), recorder.clone());
    std::fs::write(tmp.path().join("bad.yaml"), "x: [").unwrap();
    m.rescan();
    m.rescan();
    let failures = recorder.list().iter().filter(|e| e.reason == "FailedManifest").count();
    assert_eq!(failures, 1, "a bad file is reported once, not at every rescan");
}

#[test]
fn the_change_count_moves_with_what_the_files_hold_and_not_with_a_quiet_rescan() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, f) = (tmp.path(), tmp.path().join("web.yaml"));
    std::fs::write(&f, pod("web")).unwrap();
    std::fs::write(d.join("bad.yaml"), "x: [").unwrap();
    std::fs::write(d.join("notes.txt"), "x").unwrap();
    let mut m = ManifestDir::new(d.to_path_buf(), "n".into(), Recorder::default());
    let mut last = m.changes();
    let mut moved = |m: &ManifestDir| {
        let now = m.changes();
        std::mem::replace(&mut last, now) != now
    };
    m.rescan();
    assert!(moved(&m), "the first read");
    m.rescan();
    assert!(!moved(&m), "nothing new: a file read once, a bad one and an ignored one");
    m.writing(&f);
    assert!(moved(&m), "a write started");
    std::fs::write(&f, pod("web2")).unwrap();
    m.load(&f);
    assert!(moved(&m), "the write completed");
    assert_eq!(names(&mut m), ["web2-n"]);
    std::fs::remove_file(d.join("bad.yaml")).unwrap();
    m.rescan();
    assert!(moved(&m), "a file gone");
    m.rescan();
    assert!(!moved(&m));
}
