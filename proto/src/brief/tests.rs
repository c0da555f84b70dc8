use super::*;
use crate::cri;
use prost::Message;
use prost::bytes::{Buf, Bytes};
use std::collections::HashMap;

#[test]
fn a_full_list_decodes_briefly_with_the_fields_it_keeps() {
    let sandbox = cri::PodSandbox {
        id: "s1".into(),
        metadata: Some(cri::PodSandboxMetadata {
            name: "web".into(),
            uid: "u1".into(),
            namespace: "default".into(),
            attempt: 2,
        }),
        state: cri::PodSandboxState::SandboxReady as i32,
        created_at: 7,
        labels: HashMap::from([
            ("io.kubernetes.pod.name".into(), "web".into()),
            (POD_UID_LABEL.into(), "u1".into()),
            ("io.kubernetes.pod.uidx".into(), "not this".into()),
            ("app".into(), "io.kubernetes.pod.uid".into()),
        ]),
        annotations: HashMap::from([("a".into(), "b".into())]),
        runtime_handler: "runc".into(),
    };
    let bytes = cri::ListPodSandboxResponse { items: vec![sandbox] }.encode_to_vec();
    let brief = SandboxList::decode(bytes.as_slice()).unwrap();
    let s = &brief.items[0];
    let ready = cri::PodSandboxState::SandboxReady as i32;
    assert_eq!((s.id.as_str(), s.state, s.created_at), ("s1", ready, 7));
    assert_eq!(s.metadata.as_ref().map(|m| (m.uid.as_str(), m.attempt)), Some(("u1", 2)));
    assert_eq!(s.pod_uid_label.as_deref(), Some("u1"), "the pod-UID label alone is kept");
    assert_eq!(Sandbox::decode(s.encode_to_vec().as_slice()).unwrap(), *s, "and round-trips");

    let container = cri::Container {
        id: "c1".into(),
        pod_sandbox_id: "s1".into(),
        metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 3 }),
        image: Some(cri::ImageSpec { image: "busybox".into(), ..Default::default() }),
        image_ref: "sha256:1".into(),
        state: cri::ContainerState::ContainerExited as i32,
        created_at: 9,
        labels: HashMap::from([("k".into(), "v".into())]),
        annotations: HashMap::from([("a".into(), "b".into())]),
        image_id: "sha256:1".into(),
    };
    let bytes = cri::ListContainersResponse { containers: vec![container] }.encode_to_vec();
    let brief = ContainerList::decode(bytes.as_slice()).unwrap();
    let c = &brief.containers[0];
    assert_eq!(
        (c.id.as_str(), c.pod_sandbox_id.as_str(), c.state, c.created_at),
        ("c1", "s1", 2, 9)
    );
    assert_eq!(c.metadata.as_ref().map(|m| (m.name.as_str(), m.attempt)), Some(("app", 3)));
}

/// A sandbox with `labels`, encoded as the runtime sends it.
fn encoded(labels: &[(&str, &str)]) -> Vec<u8> {
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    cri::PodSandbox { id: "s1".into(), labels, ..Default::default() }.encode_to_vec()
}

#[test]
fn a_sandbox_without_the_pod_uid_label_has_none() {
    let bytes = encoded(&[("app", "web"), ("io.kubernetes.pod.name", "web")]);
    let s = Sandbox::decode(bytes.as_slice()).unwrap();
    assert_eq!((s.id.as_str(), s.pod_uid_label), ("s1", None));
    let empty = Sandbox::decode(encoded(&[(POD_UID_LABEL, "")]).as_slice()).unwrap();
    assert_eq!(empty.pod_uid_label.as_deref(), Some(""), "an empty value is still the label");
}

#[test]
fn a_label_key_split_across_buffer_chunks_is_still_recognised() {
    let bytes = encoded(&[(POD_UID_LABEL, "u1")]);
    let at = bytes.windows(4).position(|w| w == b"io.k").unwrap() + 6;
    for cut in [at - 7, at - 5, at, at + 10] {
        let (a, b) = bytes.split_at(cut);
        let s = Sandbox::decode(a.chain(b)).unwrap();
        assert_eq!(s.pod_uid_label.as_deref(), Some("u1"), "cut at {cut}");
    }
}

#[test]
fn a_truncated_or_malformed_label_is_a_decode_error_not_a_panic() {
    let bytes = encoded(&[(POD_UID_LABEL, "u1")]);
    for len in 0..bytes.len() {
        let _ = Sandbox::decode(&bytes[..len]);
    }
    // Field 5 (the labels) with a varint where a map entry belongs.
    assert!(Sandbox::decode([0x28u8, 0x01].as_slice()).is_err());
    // A map entry whose key is a varint.
    assert!(Sandbox::decode([0x2au8, 0x02, 0x08, 0x01].as_slice()).is_err());
}

#[test]
fn ids_and_names_are_slices_of_the_answers_buffer_not_copies() {
    let sandbox = cri::PodSandbox {
        id: "s1".into(),
        metadata: Some(cri::PodSandboxMetadata { name: "web".into(), ..Default::default() }),
        labels: HashMap::from([(POD_UID_LABEL.into(), "u1".into())]),
        ..Default::default()
    };
    let container = cri::Container {
        id: "c1".into(),
        pod_sandbox_id: "s1".into(),
        metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt: 0 }),
        ..Default::default()
    };
    let answer = Bytes::from(cri::ListPodSandboxResponse { items: vec![sandbox] }.encode_to_vec());
    let within = |answer: &Bytes, s: &str| answer.as_ptr_range().contains(&s.as_ptr());
    let list = SandboxList::decode(answer.clone()).unwrap();
    let s = &list.items[0];
    let name = &s.metadata.as_ref().unwrap().name;
    let uid = s.pod_uid_label.as_ref().unwrap();
    assert!(within(&answer, &s.id) && within(&answer, name) && within(&answer, uid));
    assert_eq!((s.id.as_str(), name.as_str(), uid.as_str()), ("s1", "web", "u1"));

    let answer =
        Bytes::from(cri::ListContainersResponse { containers: vec![container] }.encode_to_vec());
    let list = ContainerList::decode(answer.clone()).unwrap();
    let c = &list.containers[0];
    let name = &c.metadata.as_ref().unwrap().name;
    assert!(within(&answer, &c.id) && within(&answer, &c.pod_sandbox_id) && within(&answer, name));
}

#[test]
fn an_id_that_is_not_utf8_is_prosts_string_error() {
    // Field 1 (the id), two bytes that are not UTF-8.
    let bytes = [0x0au8, 0x02, 0xff, 0xfe];
    let brief = Sandbox::decode(bytes.as_slice()).unwrap_err();
    let full = cri::PodSandbox::decode(bytes.as_slice()).unwrap_err();
    assert_eq!(brief.to_string(), full.to_string());
    assert!(Container::decode(bytes.as_slice()).is_err());
}

#[test]
fn text_compares_and_orders_as_its_str_and_is_a_map_key() {
    use std::collections::HashSet;
    let a = Text::from("a");
    let set: HashSet<Text> = [a.clone(), Text::from(String::from("b"))].into();
    assert!(set.contains(&Text::from("a")) && set.contains(&Text::from("b")));
    assert!(!set.contains(&Text::from("c")));
    let b = Text::from("b");
    assert!(a < b && a == "a" && a.len() == 1);
    assert_eq!(
        (format!("{a}"), format!("{a:?}"), String::from(&a)),
        ("a".into(), "\"a\"".into(), "a".into())
    );
}
