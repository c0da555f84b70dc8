#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use super::*;
use crate::config::manifest;
use crate::runtime::adoption::{ContainerRecord, SandboxRecord};

const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n    command: [sleep, '9']\n";

fn read(text: &str) -> Pod {
    manifest::parse(Path::new("/m/web.yaml"), text, "n").unwrap().pod
}

/// What the runtime would report of `pod` running under `uid`.
fn running(pod: &Pod, uid: &str, identity: Option<String>) -> RunningPod {
    let c = &pod.spec.as_ref().unwrap().containers[0];
    RunningPod {
        uid: uid.into(),
        namespace: "default".into(),
        name: "web-n".into(),
        identity,
        sandbox: SandboxRecord::default(),
        containers: vec![ContainerRecord {
            name: c.name.clone(),
            image: format!("docker.io/library/{}", c.image.as_deref().unwrap()),
            config: None,
        }],
        cfs: Default::default(),
    }
}

fn resolve(ids: &mut Identities, text: &str) -> (Pod, Decision) {
    let mut pod = read(text);
    let decision = ids.resolve(Path::new("/m/web.yaml"), &mut pod);
    (pod, decision)
}

#[test]
fn the_identity_ignores_what_an_api_pod_may_change_in_place() {
    let base = identity(&read(WEB));
    assert!(base.starts_with("v1:"));
    let same = [
        WEB.replace("name: web\n", "name: web\n  labels: {a: b}\n  annotations: {x: y}\n"),
        WEB.replace("busybox:1.35", "busybox:1.36"),
        WEB.replace("spec:\n", "spec:\n  activeDeadlineSeconds: 30\n"),
    ];
    for text in same {
        assert_eq!(identity(&read(&text)), base, "{text}");
    }
    let different = [
        WEB.replace("'9'", "'10'"),
        WEB.replace("spec:\n", "spec:\n  hostNetwork: true\n"),
        WEB.replace("command:", "env: [{name: A, value: b}]\n    command:"),
    ];
    for text in different {
        assert_ne!(identity(&read(&text)), base, "{text}");
    }
}

#[test]
fn an_unknown_manifest_gets_its_content_uid_and_an_edit_in_place_keeps_it() {
    let mut ids = Identities::default();
    let (first, decision) = resolve(&mut ids, WEB);
    assert_eq!(decision, Decision::Content);
    let uid = first.metadata.uid.clone().unwrap();
    assert_eq!(uid, read(WEB).metadata.uid.unwrap(), "the content-derived UID");
    let (labelled, decision) =
        resolve(&mut ids, &WEB.replace("name: web\n", "name: web\n  labels: {a: b}\n"));
    assert_eq!((decision, labelled.metadata.uid.as_deref()), (Decision::Kept, Some(uid.as_str())));
    let (changed, decision) = resolve(&mut ids, &WEB.replace("'9'", "'10'"));
    assert_eq!(decision, Decision::Content);
    assert_ne!(changed.metadata.uid.as_deref(), Some(uid.as_str()));
}

#[test]
fn a_running_pod_is_adopted_by_its_recorded_identity_or_its_runtime_config() {
    let pod = read(WEB);
    // An older build: another UID scheme, the same identity recorded.
    let mut ids = Identities::new(vec![running(&pod, "older-uid", Some(identity(&pod)))]);
    let (adopted, decision) = resolve(&mut ids, WEB);
    assert_eq!(decision, Decision::Adopted { by: AdoptedBy::RecordedIdentity });
    assert_eq!(adopted.metadata.uid.as_deref(), Some("older-uid"));
    assert_eq!(adopted.metadata.annotations.as_ref().unwrap()[keys::CONFIG_HASH], "older-uid");
    // Upstream's kubelet, or an identity of another version: what the runtime recorded decides.
    let mut ids = Identities::new(vec![running(&pod, "upstream-uid", Some("v0:x".into()))]);
    let (adopted, decision) = resolve(&mut ids, WEB);
    assert_eq!(decision, Decision::Adopted { by: AdoptedBy::RuntimeConfig });
    assert_eq!(adopted.metadata.uid.as_deref(), Some("upstream-uid"));
}

#[test]
fn a_running_pod_that_differs_from_its_manifest_is_not_adopted() {
    let pod = read(WEB);
    let mut ids = Identities::new(vec![running(&pod, "upstream-uid", None)]);
    let (replaced, decision) = resolve(&mut ids, &WEB.replace("busybox:1.35", "busybox:1.36"));
    assert_eq!(decision, Decision::Content);
    assert_ne!(replaced.metadata.uid.as_deref(), Some("upstream-uid"));
    // Only the first sight adopts: a running pod is not considered again.
    let mut other = Identities::new(vec![running(&pod, "upstream-uid", None)]);
    other.retain(|_| false);
    let (adopted, _) = resolve(&mut other, WEB);
    assert_eq!(adopted.metadata.uid.as_deref(), Some("upstream-uid"));
    let (again, decision) = resolve(&mut other, WEB);
    assert_eq!((decision, again.metadata.uid.as_deref()), (Decision::Kept, Some("upstream-uid")));
}
