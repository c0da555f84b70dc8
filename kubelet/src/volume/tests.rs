//! Each volume type set up in a temp dir, with objects from a fake manager, a fake mounter
//! and a fake token source.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use serde_json::json;

use super::mount::fake::FakeMounter;
use super::*;
use crate::objects::ObjectSources;
use crate::objects::fake::FakeObjects;
use crate::token::{Token, TokenRequest, TokenSource};

/// Tokens that name their request: `token-for-<sa>-<audiences>-<pod>`.
#[derive(Debug, Default)]
struct FakeTokens;

impl TokenSource for FakeTokens {
    fn token<'a>(&'a self, r: &'a TokenRequest) -> BoxFuture<'a, Result<Token, TokenError>> {
        Box::pin(async move {
            Ok(Token {
                token: format!(
                    "token-for-{}-{}-{}",
                    r.service_account,
                    r.audiences.join(","),
                    r.pod_name
                ),
                expiration: SystemTime::now() + Duration::from_secs(3600),
                lifetime: Duration::from_secs(3600),
            })
        })
    }
}

struct Node {
    root: tempfile::TempDir,
    objects: Arc<FakeObjects>,
    mounter: Arc<FakeMounter>,
    vm: VolumeManager,
}

const GIB: i128 = 1 << 30;

fn node() -> Node {
    let root = tempfile::tempdir().unwrap();
    let objects = Arc::new(FakeObjects::default());
    let mounter = Arc::new(FakeMounter::default());
    let vm = VolumeManager {
        root_dir: root.path().to_path_buf(),
        mounter: mounter.clone(),
        objects: ObjectSources { api: Some(objects.clone()), local: None },
        tokens: Some(Arc::new(TokenManager::new(Arc::new(FakeTokens)))),
        allocatable: Allocatable { cpu_millis: 2000, memory_bytes: 4 * GIB },
    };
    objects.put_config_map(
        "ns",
        json!({"metadata": {"name": "cm", "resourceVersion": "1"},
        "data": {"a.conf": "alpha", "b.conf": "beta"}, "binaryData": {"bin": "AAE="}}),
    );
    objects.put_secret(
        "ns",
        json!({"metadata": {"name": "s", "resourceVersion": "1"},
        "data": {"password": "aHVudGVyMg=="}}),
    );
    Node { root, objects, mounter, vm }
}

fn pod(volumes: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
            "labels": {"app": "web"}, "annotations": {"team": "blue"}},
        "spec": {"serviceAccountName": "robot", "volumes": volumes, "containers": [{
            "name": "app", "image": "x:1",
            "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "500m"}},
        }]},
    }))
    .unwrap()
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

fn mode_of(dir: &Path, file: &str) -> u32 {
    std::fs::metadata(dir.join(file)).unwrap().permissions().mode() & 0o7777
}

fn data_link(dir: &Path) -> PathBuf {
    std::fs::read_link(dir.join(atomic_writer::DATA_DIR)).unwrap()
}

async fn mount_ok(n: &Node, pod: &Pod) -> PodVolumes {
    let out = n.vm.mount_pod(pod).await;
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    out.volumes
}

#[tokio::test]
async fn a_config_map_volume_is_its_keys_as_files_on_disk_with_default_modes() {
    let n = node();
    let p = pod(json!([{"name": "config", "configMap": {"name": "cm"}}]));
    let volumes = mount_ok(&n, &p).await;
    let dir = &volumes["config"].path;
    assert!(dir.ends_with("pods/u1/volumes/kubernetes.io~configmap/config"), "{dir:?}");
    assert!(volumes["config"].read_only, "managed content is mounted read-only");
    assert_eq!(read(dir, "a.conf"), "alpha");
    assert_eq!(std::fs::read(dir.join("bin")).unwrap(), [0, 1], "binaryData too");
    assert_eq!(mode_of(dir, "a.conf"), 0o644);
    assert!(n.mounter.mounted().is_empty(), "a ConfigMap stays on disk");
}

#[tokio::test]
async fn items_and_modes_are_honoured() {
    let n = node();
    let p = pod(json!([{"name": "config", "configMap": {"name": "cm", "defaultMode": 0o400,
        "items": [{"key": "a.conf", "path": "etc/a"}, {"key": "b.conf", "path": "b", "mode": 0o600}]}}]));
    let dir = mount_ok(&n, &p).await["config"].path.clone();
    assert_eq!(read(&dir, "etc/a"), "alpha");
    assert_eq!(mode_of(&dir, "etc/a"), 0o400, "defaultMode");
    assert_eq!(mode_of(&dir, "b"), 0o600, "the item's own mode");
    assert!(!dir.join("a.conf").exists(), "only the items listed");
}

#[tokio::test]
async fn an_update_of_the_object_swaps_the_files_atomically() {
    let n = node();
    let p = pod(json!([{"name": "config", "configMap": {"name": "cm"}}]));
    let dir = mount_ok(&n, &p).await["config"].path.clone();
    let before = data_link(&dir);
    mount_ok(&n, &p).await;
    assert_eq!(data_link(&dir), before, "unchanged: nothing rewritten");
    n.objects.put_config_map(
        "ns",
        json!({"metadata": {"name": "cm", "resourceVersion": "2"},
        "data": {"a.conf": "ALPHA"}}),
    );
    mount_ok(&n, &p).await;
    assert_ne!(data_link(&dir), before, "..data swapped");
    assert_eq!(read(&dir, "a.conf"), "ALPHA");
    assert!(std::fs::symlink_metadata(dir.join("b.conf")).is_err(), "a removed key goes");
}

#[tokio::test]
async fn missing_objects_and_keys_fail_unless_optional() {
    let n = node();
    let p = pod(json!([
        {"name": "gone", "configMap": {"name": "nope"}},
        {"name": "gone-secret", "secret": {"secretName": "nope"}},
        {"name": "no-key", "configMap": {"name": "cm", "items": [{"key": "zz", "path": "zz"}]}},
        {"name": "maybe", "configMap": {"name": "nope", "optional": true}},
        {"name": "maybe-key", "secret": {"secretName": "s", "optional": true,
            "items": [{"key": "zz", "path": "zz"}]}},
    ]));
    let out = n.vm.mount_pod(&p).await;
    let errors: Vec<String> =
        out.errors.iter().map(|e| format!("{}: {}", e.volume, e.reason)).collect();
    assert_eq!(
        errors,
        [
            "gone: configmap \"nope\" not found",
            "gone-secret: secret \"nope\" not found",
            "no-key: configmap references non-existent config key: zz",
        ]
    );
    assert_eq!(
        out.errors[0].to_string(),
        "pod ns/web: volume \"gone\": configmap \"nope\" not found"
    );
    let maybe = &out.volumes["maybe"].path;
    assert!(maybe.is_dir() && maybe.join(atomic_writer::DATA_DIR).exists(), "an empty volume");
    assert!(out.volumes.contains_key("maybe-key"));
    // The ConfigMap appears: the next sync sets the volume up.
    n.objects.put_config_map("ns", json!({"metadata": {"name": "nope"}, "data": {"k": "v"}}));
    let out = n.vm.mount_pod(&p).await;
    assert_eq!(read(&out.volumes["gone"].path, "k"), "v");
}

#[tokio::test]
async fn a_secret_volume_is_on_a_tmpfs_of_its_own() {
    let n = node();
    let p = pod(json!([{"name": "creds", "secret": {"secretName": "s", "defaultMode": 0o400}}]));
    let dir = mount_ok(&n, &p).await["creds"].path.clone();
    assert!(dir.ends_with("pods/u1/volumes/kubernetes.io~secret/creds"));
    assert_eq!(read(&dir, "password"), "hunter2");
    assert_eq!(mode_of(&dir, "password"), 0o400);
    let mounts = n.mounter.mounted();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[&dir], Some(256 << 20), "sized by the pod's memory limit");
    mount_ok(&n, &p).await;
    assert_eq!(n.mounter.mounted().len(), 1, "mounted once, not on every sync");
}

#[tokio::test]
async fn a_downward_api_volume_carries_metadata_and_follows_label_changes() {
    let n = node();
    let volumes = json!([{"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
        {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}},
        {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}},
        {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory", "divisor": "1Mi"}},
        {"path": "cpu", "resourceFieldRef": {"containerName": "app", "resource": "limits.cpu"}},
    ]}}]);
    let mut p = pod(volumes);
    let dir = mount_ok(&n, &p).await["info"].path.clone();
    assert!(dir.ends_with("kubernetes.io~downward-api/info"));
    assert_eq!(read(&dir, "labels"), "app=\"web\"");
    assert_eq!(read(&dir, "annotations"), "team=\"blue\"");
    assert_eq!(
        (read(&dir, "name"), read(&dir, "ns"), read(&dir, "uid")),
        ("web".into(), "ns".into(), "u1".into())
    );
    assert_eq!(read(&dir, "app"), "web");
    assert_eq!(read(&dir, "mem"), "256");
    assert_eq!(read(&dir, "cpu"), "2", "no CPU limit: the node's allocatable");
    assert!(n.mounter.mounted().is_empty(), "downward API stays on disk");
    p.metadata.labels = Some([("app".into(), "web".into()), ("tier".into(), "2".into())].into());
    mount_ok(&n, &p).await;
    assert_eq!(read(&dir, "labels"), "app=\"web\"\ntier=\"2\"");
}

#[tokio::test]
async fn a_projected_volume_joins_its_sources_on_a_tmpfs() {
    let n = node();
    let p = pod(json!([{"name": "all", "projected": {"defaultMode": 0o440, "sources": [
        {"configMap": {"name": "cm", "items": [{"key": "a.conf", "path": "conf/a"}]}},
        {"secret": {"name": "s"}},
        {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"serviceAccountToken": {"path": "token", "audience": "vault", "expirationSeconds": 3607}},
        {"configMap": {"name": "absent", "optional": true}},
    ]}}]));
    let dir = mount_ok(&n, &p).await["all"].path.clone();
    assert!(dir.ends_with("kubernetes.io~projected/all"));
    assert_eq!(read(&dir, "conf/a"), "alpha");
    assert_eq!(read(&dir, "password"), "hunter2");
    assert_eq!(read(&dir, "labels"), "app=\"web\"");
    assert_eq!(read(&dir, "token"), "token-for-robot-vault-web");
    assert_eq!(mode_of(&dir, "token"), 0o440);
    assert!(n.mounter.mounted().contains_key(&dir), "on a tmpfs");
}

#[tokio::test]
async fn bad_input_names_the_volume_and_spares_the_other_volumes() {
    let n = node();
    let p = pod(json!([
        {"name": "escape", "configMap": {"name": "cm", "items": [{"key": "a.conf", "path": "../../etc/x"}]}},
        {"name": "absolute", "secret": {"secretName": "s", "items": [{"key": "password", "path": "/etc/x"}]}},
        {"name": "collide", "projected": {"sources": [
            {"configMap": {"name": "cm", "items": [{"key": "a.conf", "path": "same"}]}},
            {"secret": {"name": "s", "items": [{"key": "password", "path": "same"}]}},
        ]}},
        {"name": "fine", "configMap": {"name": "cm"}},
    ]));
    let out = n.vm.mount_pod(&p).await;
    let errors: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("pod ns/web: volume \"escape\": items path \"../../etc/x\": invalid path: must not contain '..'"), "{}", errors[0]);
    assert!(
        errors[1].contains(
            "volume \"absolute\": items path \"/etc/x\": invalid path: must be relative path"
        ),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].contains("volume \"collide\": conflicting duplicate paths: \"same\""),
        "{}",
        errors[2]
    );
    assert!(out.volumes.contains_key("fine"));
    let stray = n.root.path().join("etc");
    assert!(!stray.exists(), "nothing written outside the volume");
}

#[tokio::test]
async fn a_key_that_is_no_file_name_is_an_error_naming_it() {
    let n = node();
    n.objects.put_config_map("ns", json!({"metadata": {"name": "odd"}, "data": {"..data": "x"}}));
    let p = pod(json!([{"name": "odd", "configMap": {"name": "odd"}}]));
    let out = n.vm.mount_pod(&p).await;
    assert_eq!(
        out.errors[0].reason.to_string(),
        "configMap ns/odd: key \"..data\" is not a valid file name: invalid path: must not start with '..': ..data"
    );
}

#[tokio::test]
async fn static_pods_get_no_api_objects_or_tokens_but_the_downward_api() {
    let mut n = node();
    n.vm.objects.local = Some(Arc::new(FakeObjects::default()));
    let mut p = pod(json!([
        {"name": "config", "configMap": {"name": "cm"}},
        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
        {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
    ]));
    p.metadata.annotations = Some([(api::keys::CONFIG_SOURCE.into(), "file".into())].into());
    let out = n.vm.mount_pod(&p).await;
    let errors: Vec<String> = out.errors.iter().map(|e| e.reason.to_string()).collect();
    assert_eq!(
        errors,
        [
            "configmap \"cm\" not found",
            "service account token for pod ns/web: a static pod may not use service account tokens",
        ]
    );
    assert_eq!(read(&out.volumes["info"].path, "name"), "web");
}

#[tokio::test]
async fn static_pods_mount_node_local_config_maps_and_secrets_secrets_on_tmpfs() {
    let mut n = node();
    let local = Arc::new(FakeObjects::default());
    local.put_config_map("ns", json!({"metadata": {"name": "cm"}, "data": {"a.conf": "local"}}));
    local.put_secret("ns", json!({"metadata": {"name": "s"}, "data": {"password": "bG9jYWw="}}));
    n.vm.objects.local = Some(local);
    let mut p = pod(json!([
        {"name": "config", "configMap": {"name": "cm"}},
        {"name": "secret", "secret": {"secretName": "s", "defaultMode": 0o400}},
        {"name": "both", "projected": {"sources": [
            {"configMap": {"name": "cm"}}, {"secret": {"name": "s"}},
        ]}},
    ]));
    p.metadata.annotations = Some([(api::keys::CONFIG_SOURCE.into(), "file".into())].into());
    let volumes = mount_ok(&n, &p).await;
    assert_eq!(read(&volumes["config"].path, "a.conf"), "local", "the node's, not the API's");
    assert_eq!(read(&volumes["secret"].path, "password"), "local");
    assert_eq!(mode_of(&volumes["secret"].path, "..data/password"), 0o400);
    assert_eq!(read(&volumes["both"].path, "a.conf"), "local");
    assert_eq!(read(&volumes["both"].path, "password"), "local");
    let mounts = n.mounter.mounted();
    assert!(
        mounts.contains_key(&volumes["secret"].path) && mounts.contains_key(&volumes["both"].path)
    );
    assert!(!mounts.contains_key(&volumes["config"].path));
}

#[tokio::test]
async fn memory_empty_dirs_are_sized_tmpfs_and_disk_ones_are_directories() {
    let n = node();
    let p = pod(json!([
        {"name": "scratch", "emptyDir": {}},
        {"name": "fast", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "big", "emptyDir": {"medium": "Memory", "sizeLimit": "1Ti"}},
        {"name": "huge", "emptyDir": {"medium": "HugePages"}},
    ]));
    let out = n.vm.mount_pod(&p).await;
    let scratch = &out.volumes["scratch"];
    assert!(!scratch.read_only && scratch.path.is_dir());
    assert_eq!(mode_of(&scratch.path, ""), 0o777);
    let mounts = n.mounter.mounted();
    assert_eq!(mounts[&out.volumes["fast"].path], Some(64 << 20));
    assert_eq!(mounts[&out.volumes["big"].path], Some(256 << 20), "no more than the pod's limit");
    assert!(!mounts.contains_key(&scratch.path));
    assert_eq!(
        out.errors[0].reason.to_string(),
        "emptyDir medium \"HugePages\" is not supported by this kubelet"
    );
    let mut unlimited = p.clone();
    unlimited.spec.as_mut().unwrap().containers[0].resources = None;
    let size = memory_size(&unlimited, None, n.vm.allocatable);
    assert_eq!(size, Some(4 << 30), "no pod limit: the node's allocatable memory");
}

#[tokio::test]
async fn unmounting_detaches_every_tmpfs_removes_the_volumes_and_forgets_tokens() {
    let n = node();
    let p = pod(json!([
        {"name": "creds", "secret": {"secretName": "s"}},
        {"name": "all", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
        {"name": "config", "configMap": {"name": "cm"}},
    ]));
    mount_ok(&n, &p).await;
    assert_eq!(n.mounter.mounted().len(), 2);
    assert_eq!(n.vm.tokens.as_ref().unwrap().cached(), 1);
    n.vm.unmount_pod("u1").unwrap();
    assert!(n.mounter.mounted().is_empty(), "every tmpfs detached");
    assert!(!pod_volumes_dir(n.root.path(), "u1").exists());
    assert_eq!(n.vm.tokens.as_ref().unwrap().cached(), 0);
    n.vm.unmount_pod("u1").unwrap(); // nothing left: fine
}

#[tokio::test]
async fn a_mount_or_unmount_that_fails_is_an_error_and_removes_nothing() {
    let n = node();
    let p = pod(json!([{"name": "creds", "secret": {"secretName": "s"}}]));
    *n.mounter.fail_mount.lock().unwrap() = Some(libc::EPERM);
    let out = n.vm.mount_pod(&p).await;
    let err = out.errors[0].reason.to_string();
    assert!(
        err.starts_with("mounting a tmpfs at ") && err.contains("Operation not permitted"),
        "{err}"
    );
    assert!(!n.vm.volume_dir(&p, SECRET, "creds").join("password").exists(), "never on disk");
    *n.mounter.fail_mount.lock().unwrap() = None;
    let dir = mount_ok(&n, &p).await["creds"].path.clone();
    *n.mounter.fail_unmount.lock().unwrap() = Some(libc::EBUSY);
    let err = n.vm.unmount_pod("u1").unwrap_err();
    assert_eq!(err.path, dir);
    assert!(dir.join("password").exists(), "nothing removed under a mount still there");
    *n.mounter.fail_unmount.lock().unwrap() = None;
    n.vm.unmount_pod("u1").unwrap();
    assert!(!dir.exists());
}

#[tokio::test]
async fn unsupported_volume_types_are_errors_naming_the_type() {
    let n = node();
    let p = pod(json!([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]));
    let out = n.vm.mount_pod(&p).await;
    assert_eq!(
        out.errors[0].reason.to_string(),
        "persistentVolumeClaim volumes are not supported by this kubelet"
    );
}
