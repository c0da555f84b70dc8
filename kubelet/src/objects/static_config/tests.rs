//! The static config directory in a temp dir: what it serves, what it refuses and why, and
//! the manager that serves it to static pods.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};

use super::dir::{Published, StaticConfigDir};
use super::file::{MAX_FILE_BYTES, Owners};
use super::*;
use crate::config::dir::ManifestState;
use crate::config::dir_watch::Change;
use crate::objects::ObjectKind;

const CONFIG: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  greeting: hello\n";
const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-secret\n  namespace: kube-system\nstringData:\n  password: hunter2\ndata:\n  user: YWRtaW4=\n";

fn owners() -> Owners {
    Owners { kubelet_uid: nix::unistd::geteuid().as_raw() }
}

fn write(dir: &Path, file: &str, text: &str, mode: u32) {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn cm(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(ObjectKind::ConfigMap, ns, name)
}

fn secret(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(ObjectKind::Secret, ns, name)
}

struct Dir {
    tmp: tempfile::TempDir,
    state: StaticConfigDir,
    recorder: Recorder,
}

impl Dir {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let recorder = Recorder::default();
        let state = StaticConfigDir::new(tmp.path().to_path_buf(), recorder.clone(), owners());
        Self { tmp, state, recorder }
    }

    fn path(&self) -> &Path {
        self.tmp.path()
    }

    fn rescan(&mut self) -> (Published, Vec<ManifestReport>) {
        self.state.apply(vec![Change::Rescan]);
        self.state.desired()
    }
}

fn report<'a>(reports: &'a [ManifestReport], file: &str) -> &'a ManifestReport {
    reports
        .iter()
        .find(|r| r.file.ends_with(&format!("/{file}")))
        .unwrap_or_else(|| panic!("no report for {file}: {reports:?}"))
}

fn data_of(published: &Published, key: &ObjectKey, k: &str) -> String {
    match &published.objects[key] {
        Object::ConfigMap(c) => c.data.as_ref().unwrap()[k].clone(),
        Object::Secret(s) => String::from_utf8(s.data.as_ref().unwrap()[k].0.clone()).unwrap(),
    }
}

#[test]
fn yaml_documents_and_json_files_are_served_in_their_namespaces_with_string_data_merged() {
    let mut d = Dir::new();
    write(d.path(), "app.yaml", &format!("{CONFIG}---\n{SECRET}---\n"), 0o600);
    let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j","namespace":"web"},"data":{"k":"v"}}"#;
    write(d.path(), "j.json", json, 0o644);
    let (published, reports) = d.rescan();
    assert_eq!(data_of(&published, &cm("default", "app-config"), "greeting"), "hello");
    let s = secret("kube-system", "app-secret");
    assert_eq!(data_of(&published, &s, "password"), "hunter2");
    assert_eq!(data_of(&published, &s, "user"), "admin");
    let Object::Secret(sec) = &published.objects[&s] else { panic!() };
    assert_eq!((sec.string_data.as_ref(), sec.type_.as_deref()), (None, Some("Opaque")));
    assert_eq!(data_of(&published, &cm("web", "j"), "k"), "v");
    let app = report(&reports, "app.yaml");
    assert_eq!(app.state, ManifestState::Accepted);
    assert_eq!(app.objects, ["configMap default/app-config", "secret kube-system/app-secret"]);
    assert!(published.unavailable.is_empty());
}

#[test]
fn a_file_starting_with_a_byte_order_mark_is_read() {
    let mut d = Dir::new();
    write(d.path(), "bom.yaml", &format!("\u{feff}{CONFIG}"), 0o600);
    let (published, reports) = d.rescan();
    assert_eq!(published.objects.len(), 1, "{reports:?}");
}

#[test]
fn other_files_are_ignored_and_listed_with_the_reason() {
    let mut d = Dir::new();
    write(d.path(), "app.yaml.bak", CONFIG, 0o644);
    write(d.path(), ".app.yaml.swp", CONFIG, 0o644);
    write(d.path(), "..yaml", CONFIG, 0o644);
    write(d.path(), "README", "notes", 0o644);
    std::fs::create_dir(d.path().join("sub.yaml")).unwrap();
    let (published, reports) = d.rescan();
    assert!(published.objects.is_empty());
    for file in ["app.yaml.bak", ".app.yaml.swp", "..yaml", "README", "sub.yaml"] {
        assert_eq!(report(&reports, file).state, ManifestState::Ignored, "{file}");
    }
}

#[test]
fn bad_files_are_refused_naming_the_file_and_the_problem() {
    let big = format!("{CONFIG}  pad: \"{}\"\n", "x".repeat(MAX_FILE_BYTES as usize));
    let over_mib = format!("{CONFIG}  a: \"{}\"\n", "x".repeat(1024 * 1024));
    let cases: &[(&str, &str, &str)] = &[
        ("syntax.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n", "YAML"),
        ("empty.yaml", "# nothing\n", "the file holds no object"),
        (
            "pod.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n",
            "document 1: expected apiVersion v1 and kind ConfigMap or Secret, found \"v1\" \"Pod\"",
        ),
        (
            "second.yaml",
            &format!("{CONFIG}---\napiVersion: apps/v1\nkind: Deployment\n"),
            "document 2: expected apiVersion v1",
        ),
        (
            "noname.yaml",
            "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n",
            "document 1: metadata.name: Required value",
        ),
        (
            "type.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\ndata: [1]\n",
            "document 1: data",
        ),
        (
            "key.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\ndata: {\"..data\": x}\n",
            "configMap default/k is invalid: data[..data]: Invalid value: \"..data\": must not start with '..'",
        ),
        (
            "name.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ../etc}\ndata: {a: b}\n",
            "metadata.name: Invalid value: \"../etc\"",
        ),
        (
            "ns.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: Bad_NS}\n",
            "metadata.namespace: Invalid value: \"Bad_NS\"",
        ),
        ("big.yaml", &big, "larger than the 3145728-byte limit"),
        ("mib.yaml", &over_mib, "Too long: must have at most 1048576 bytes"),
        (
            "tls.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata: {name: t}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==}\n",
            "data[tls.key]: Required value",
        ),
        (
            "twice.yaml",
            &format!("{CONFIG}---\n{CONFIG}"),
            "defines configMap default/app-config twice (documents 1 and 2)",
        ),
        (
            "dupkey.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata:\n  a: one\n  a: two\n",
            "YAML: line 6: key \"a\" already set in map",
        ),
        (
            "dupkey.json",
            "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n \"kind\": \"Secret\"}",
            "JSON syntax: line 2: key \"kind\" already set in map",
        ),
    ];
    let mut d = Dir::new();
    for (file, text, _) in cases {
        write(d.path(), file, text, 0o600);
    }
    let (published, reports) = d.rescan();
    assert!(published.objects.is_empty(), "{:?}", published.objects.keys());
    for (file, _, want) in cases {
        let r = report(&reports, file);
        let reason = r.reason.clone().unwrap_or_default();
        assert_eq!(r.state, ManifestState::Rejected, "{file}: {reason}");
        assert!(reason.contains(&format!("/{file}")), "{file}: must name the file: {reason}");
        assert!(reason.contains(want), "{file}: {reason} should mention {want:?}");
    }
    let failures = d.recorder.list().iter().filter(|e| e.reason == "FailedStaticConfig").count();
    assert_eq!(failures, cases.len(), "each rejection is an event (and a log line), once");
    d.rescan();
    let again = d.recorder.list().iter().filter(|e| e.reason == "FailedStaticConfig").count();
    assert_eq!(again, failures, "an unchanged bad file is not reported at every rescan");
}

#[test]
fn a_secret_file_readable_by_group_or_others_is_refused_with_its_mode() {
    let mut d = Dir::new();
    write(d.path(), "secret.yaml", SECRET, 0o640);
    write(d.path(), "config.yaml", CONFIG, 0o644);
    let (published, reports) = d.rescan();
    let r = report(&reports, "secret.yaml");
    let reason = r.reason.clone().unwrap();
    assert_eq!(r.state, ManifestState::Rejected);
    assert!(
        reason.contains("/secret.yaml: holds secret kube-system/app-secret but its mode is 0640")
            && reason.contains("must not be readable or writable by group or others"),
        "{reason}"
    );
    assert_eq!(r.objects, ["secret kube-system/app-secret"]);
    let why = &published.unavailable[&secret("kube-system", "app-secret")];
    assert!(why.starts_with("refused: ") && why.contains("mode is 0640"), "{why}");
    assert!(
        published.objects.contains_key(&cm("default", "app-config")),
        "a ConfigMap may be 0644"
    );
    std::fs::set_permissions(d.path().join("secret.yaml"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    // A chmod is seen by the next rescan (the fingerprint has the mode and owner).
    let (published, _) = d.rescan();
    assert!(published.objects.contains_key(&secret("kube-system", "app-secret")));
}

#[test]
fn a_secret_file_owned_by_another_user_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "s.yaml", SECRET, 0o600);
    let meta = std::fs::metadata(tmp.path().join("s.yaml")).unwrap();
    let me = meta.uid();
    let stranger = Owners { kubelet_uid: me.wrapping_add(1) };
    let refused = file::read(&tmp.path().join("s.yaml"), &meta, stranger, &|_| None);
    if me == 0 {
        assert!(refused.is_ok(), "root may own it whoever the kubelet runs as");
    } else {
        let err = refused.unwrap_err().error.to_string();
        assert!(err.contains(&format!("is owned by uid {me}")), "{err}");
    }
}

#[test]
fn two_files_defining_one_object_are_both_refused_until_one_gives_it_up() {
    let mut d = Dir::new();
    write(
        d.path(),
        "a.yaml",
        &format!("{CONFIG}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: only-a}}\n"),
        0o644,
    );
    write(d.path(), "b.yaml", &CONFIG.replace("hello", "bonjour"), 0o644);
    write(d.path(), "c.yaml", &CONFIG.replace("app-config", "other"), 0o644);
    let (published, reports) = d.rescan();
    for (file, other) in [("a.yaml", "b.yaml"), ("b.yaml", "a.yaml")] {
        let r = report(&reports, file);
        assert_eq!(r.state, ManifestState::Duplicate);
        let reason = r.reason.clone().unwrap();
        assert!(
            reason.contains("configMap default/app-config is also defined by")
                && reason.contains(&format!("/{other}")),
            "{reason}"
        );
    }
    assert!(!published.objects.contains_key(&cm("default", "app-config")));
    assert!(!published.objects.contains_key(&cm("default", "only-a")), "neither half-applied");
    assert!(published.objects.contains_key(&cm("default", "other")), "other files unaffected");
    let why = &published.unavailable[&cm("default", "app-config")];
    assert!(why.contains("is also defined by"), "{why}");
    std::fs::remove_file(d.path().join("b.yaml")).unwrap();
    let (published, reports) = d.rescan();
    assert_eq!(data_of(&published, &cm("default", "app-config"), "greeting"), "hello");
    assert!(published.objects.contains_key(&cm("default", "only-a")));
    assert_eq!(report(&reports, "a.yaml").state, ManifestState::Accepted);
}

#[test]
fn a_bad_edit_keeps_the_last_good_objects_and_a_delete_removes_them() {
    let mut d = Dir::new();
    write(d.path(), "app.yaml", CONFIG, 0o644);
    let (published, _) = d.rescan();
    assert_eq!(data_of(&published, &cm("default", "app-config"), "greeting"), "hello");
    write(
        d.path(),
        "app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config\n",
        0o644,
    );
    let (published, reports) = d.rescan();
    assert_eq!(data_of(&published, &cm("default", "app-config"), "greeting"), "hello");
    let r = report(&reports, "app.yaml");
    assert!(r.state == ManifestState::Rejected && r.running_previous_version, "{r:?}");
    assert_eq!(r.objects, ["configMap default/app-config"]);
    write(d.path(), "app.yaml", &CONFIG.replace("hello", "hi there"), 0o644);
    let (published, _) = d.rescan();
    assert_eq!(data_of(&published, &cm("default", "app-config"), "greeting"), "hi there");
    std::fs::remove_file(d.path().join("app.yaml")).unwrap();
    let (published, reports) = d.rescan();
    assert!(published.objects.is_empty() && reports.is_empty());
}

#[test]
fn an_immutable_object_keeps_its_data() {
    let mut d = Dir::new();
    let frozen = format!("{CONFIG}immutable: true\n");
    write(d.path(), "app.yaml", &frozen, 0o644);
    d.rescan();
    write(d.path(), "app.yaml", &frozen.replace("hello", "changed"), 0o644);
    let (published, reports) = d.rescan();
    assert_eq!(data_of(&published, &cm("default", "app-config"), "greeting"), "hello");
    let reason = report(&reports, "app.yaml").reason.clone().unwrap();
    assert!(
        reason.contains("data: Forbidden: field is immutable when `immutable` is set"),
        "{reason}"
    );
}

#[test]
fn a_file_being_written_is_not_read_until_complete() {
    let mut d = Dir::new();
    let path = d.path().join("app.yaml");
    write(d.path(), "app.yaml", "apiVersion: v1\nkind: Conf", 0o644);
    d.state.apply(vec![Change::Writing(path.clone()), Change::Rescan]);
    let (published, reports) = d.state.desired();
    assert!(published.objects.is_empty());
    assert_eq!(report(&reports, "app.yaml").state, ManifestState::Writing);
    write(d.path(), "app.yaml", CONFIG, 0o644);
    d.state.apply(vec![Change::Complete(path)]);
    assert!(d.state.desired().0.objects.contains_key(&cm("default", "app-config")));
}

fn static_pod(uid: &str, config_map: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": uid, "namespace": "default", "uid": uid,
            "annotations": {"kubernetes.io/config.source": "file"}},
        "spec": {"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": config_map}}]}]},
    }))
    .unwrap()
}

fn published(objects: &[(&str, &str)]) -> Published {
    let mut p = Published::default();
    for (name, value) in objects {
        let c: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "namespace": "default"}, "data": {"k": value}}),
        )
        .unwrap();
        p.objects.insert(cm("default", name), Object::ConfigMap(Arc::new(c)));
    }
    p
}

#[tokio::test]
async fn a_change_wakes_exactly_the_pods_that_reference_the_object() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let m = StaticConfigObjects::new(tx);
    m.register_pod(&static_pod("p1", "one"));
    m.register_pod(&static_pod("p2", "two"));
    m.register_pod(&static_pod("p3", "one"));
    m.publish(published(&[("one", "1"), ("two", "2")]));
    let mut first = rx.try_recv().unwrap();
    first.sort();
    assert_eq!(first, ["p1", "p2", "p3"], "the first read wakes those that waited for it");
    m.publish(published(&[("one", "1"), ("two", "2")]));
    assert!(rx.try_recv().is_err(), "a rescan that changes nothing wakes nobody");
    m.publish(published(&[("one", "1"), ("two", "22")]));
    assert_eq!(rx.try_recv().unwrap(), ["p2"]);
    m.unregister_pod("p2");
    m.publish(published(&[("one", "1")]));
    assert!(rx.try_recv().is_err(), "an unregistered pod is not woken");
    let key = cm("default", "one");
    let Object::ConfigMap(c) = m.get(&key).await.unwrap() else { panic!() };
    assert_eq!(c.data.as_ref().unwrap()["k"], "1");
    let err = m.get(&cm("default", "two")).await.unwrap_err();
    assert_eq!(err.to_string(), "configmap \"two\" not found");
    let mut p = published(&[]);
    p.unavailable.insert(key.clone(), "refused: bad".into());
    m.publish(p);
    let mut woken = rx.try_recv().unwrap();
    woken.sort();
    assert_eq!(woken, ["p1", "p3"]);
    let err = m.get(&key).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "couldn't get configMap default/one from the static config directory: refused: bad"
    );
}

#[tokio::test(start_paused = true)]
async fn a_read_before_the_directory_was_read_waits_then_says_so() {
    let (tx, _rx) = mpsc::unbounded_channel();
    let m = StaticConfigObjects::new(tx);
    let err = m.get(&cm("default", "x")).await.unwrap_err();
    assert!(matches!(err, ObjectError::NotSynced(_)), "{err}");
}

#[tokio::test]
async fn the_source_watches_the_directory_and_publishes_what_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let objects = Arc::new(StaticConfigObjects::new(tx));
    objects.register_pod(&static_pod("p1", "app-config"));
    let (report_tx, report_rx) = watch::channel(Vec::new());
    let stop = CancellationToken::new();
    let source = StaticConfigSource {
        dir: tmp.path().to_path_buf(),
        // Long: only the watch can make the edits below seen in time.
        period: Duration::from_secs(3600),
        recorder: Recorder::default(),
    };
    let task = tokio::spawn(source.run(objects.clone(), report_tx, stop.clone()));
    let key = cm("default", "app-config");
    let greeting = |objects: Arc<StaticConfigObjects>| {
        let key = key.clone();
        async move {
            match objects.get(&key).await {
                Ok(Object::ConfigMap(c)) => c.data.as_ref().map(|d| d["greeting"].clone()),
                _ => None,
            }
        }
    };
    assert!(greeting(objects.clone()).await.is_none(), "nothing yet");
    // Written as tools should: a dotfile renamed into place.
    for (i, text) in [CONFIG, &CONFIG.replace("hello", "bonjour")].into_iter().enumerate() {
        let tmp_file = tmp.path().join(".app.yaml.tmp");
        std::fs::write(&tmp_file, text).unwrap();
        std::fs::rename(&tmp_file, tmp.path().join("app.yaml")).unwrap();
        let want = if i == 0 { "hello" } else { "bonjour" };
        let woken = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap();
        assert_eq!(woken.unwrap(), ["p1"], "the referencing pod is woken");
        assert_eq!(greeting(objects.clone()).await.as_deref(), Some(want));
    }
    let reports = report_rx.borrow().clone();
    assert_eq!(report(&reports, "app.yaml").state, ManifestState::Accepted);
    stop.cancel();
    task.await.unwrap();
}

#[test]
fn a_missing_directory_serves_nothing_and_is_noted_once_not_warned() {
    let tmp = tempfile::tempdir().unwrap();
    let recorder = Recorder::default();
    let dir = tmp.path().join("static-config");
    let mut state = StaticConfigDir::new(dir.clone(), recorder.clone(), owners());
    for _ in 0..2 {
        state.apply(vec![Change::Rescan]);
        assert_eq!(state.desired().0, Published::default());
    }
    let events = recorder.list();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].type_, crate::events::EventType::Normal);
    std::fs::create_dir(&dir).unwrap();
    write(&dir, "app.yaml", CONFIG, 0o644);
    state.apply(vec![Change::Rescan]);
    assert!(state.desired().0.objects.contains_key(&cm("default", "app-config")));
}
