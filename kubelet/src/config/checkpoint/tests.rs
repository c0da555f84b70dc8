#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use super::*;

fn pod(name: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p
}

#[test]
fn a_saved_pod_is_read_back_and_replaced_atomically() {
    let root = tempfile::tempdir().unwrap();
    let manifest = Path::new("/etc/kubernetes/manifests/web.yaml");
    let mut c = Checkpoints::new(root.path(), "n1");
    c.save(manifest, &pod("a")).unwrap();
    c.save(manifest, &pod("b")).unwrap();
    let files: Vec<_> = std::fs::read_dir(root.path().join(DIR)).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one file per manifest, no temporary left");
    let (pods, errors) = Checkpoints::new(root.path(), "n1").load_all();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(pods[manifest].metadata.name.as_deref(), Some("b"));
    c.remove(manifest).unwrap();
    assert!(Checkpoints::new(root.path(), "n1").load_all().0.is_empty());
    c.remove(manifest).unwrap(); // removing what is gone is fine
}

#[test]
fn corrupt_foreign_and_misnamed_checkpoints_are_reported_and_removed() {
    let root = tempfile::tempdir().unwrap();
    let manifest = Path::new("/m/web.yaml");
    let mut c = Checkpoints::new(root.path(), "n1");
    c.save(manifest, &pod("a")).unwrap();
    // Another node's: copied from elsewhere.
    let theirs = Checkpoints::new(root.path(), "n2").file_for(Path::new("/m/other.yaml"));
    let record =
        serde_json::json!({"version": 1, "node": "n2", "manifest": "/m/other.yaml", "pod": {}});
    std::fs::write(&theirs, record.to_string()).unwrap();
    let corrupt = c.file_for(Path::new("/m/broken.yaml"));
    std::fs::write(&corrupt, "{\"version\": 1, \"node\"").unwrap();
    let misnamed = root.path().join(DIR).join("0000.json");
    let record =
        serde_json::json!({"version": 1, "node": "n1", "manifest": "/m/x.yaml", "pod": {}});
    std::fs::write(&misnamed, record.to_string()).unwrap();
    let future = c.file_for(Path::new("/m/future.yaml"));
    let record =
        serde_json::json!({"version": 9, "node": "n1", "manifest": "/m/future.yaml", "pod": {}});
    std::fs::write(&future, record.to_string()).unwrap();
    std::fs::write(root.path().join(DIR).join("x.json.tmp"), "half").unwrap();

    let (pods, errors) = Checkpoints::new(root.path(), "n1").load_all();
    assert_eq!(pods.len(), 1, "the good one is kept");
    let mut messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    messages.sort();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("of node \"n2\", not of this node \"n1\"")));
    assert!(messages.iter().any(|m| m.contains("corrupt static pod checkpoint: EOF")));
    assert!(messages.iter().any(|m| m.contains("it names /m/x.yaml")));
    assert!(messages.iter().any(|m| m.contains("version 9")));
    let left: Vec<_> = std::fs::read_dir(root.path().join(DIR)).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "bad files and temporaries removed: {left:?}");
}
