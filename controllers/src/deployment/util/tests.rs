#![allow(clippy::unwrap_used)]

use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

pub fn rolling(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
    Deployment {
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(surge),
                    max_unavailable: Some(unavailable),
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.into())
}

#[test]
fn the_hash_is_stable_short_and_in_upstreams_alphabet() {
    let a = compute_hash(&template("busybox:1.35"), None);
    assert_eq!(a, compute_hash(&template("busybox:1.35"), None), "stable");
    assert_ne!(a, compute_hash(&template("busybox:1.36"), None));
    assert_ne!(
        a,
        compute_hash(&template("busybox:1.35"), Some(1)),
        "the collision count changes it"
    );
    assert!(!a.is_empty() && a.len() <= 10, "{a}");
    assert!(a.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{a}");
    // Pinned, so a change of the rendering (which would rename every new ReplicaSet) is seen.
    assert_eq!(a, PINNED_HASH);
    // An empty label map hashes as no labels.
    let mut t = template("x");
    t.metadata.as_mut().unwrap().labels = Some(Default::default());
    let mut u = template("x");
    u.metadata.as_mut().unwrap().labels = None;
    assert_eq!(compute_hash(&t, None), compute_hash(&u, None));
}

const PINNED_HASH: &str = "6ddcdff769";

#[test]
fn safe_encoding_maps_decimal_digits_as_upstreams() {
    // '0'..'9' are bytes 48..57; 48 % 27 = 21 → '4', ... as rand.SafeEncodeString.
    assert_eq!(safe_encode("0123456789"), "456789bcdf");
}

#[test]
fn templates_equal_ignoring_the_hash_label_and_empty_values() {
    let mut with_hash = template("busybox:1.35");
    with_hash
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(POD_TEMPLATE_HASH.into(), "abc".into());
    assert!(equal_ignore_hash(&with_hash, &template("busybox:1.35")));
    assert!(!equal_ignore_hash(&with_hash, &template("busybox:1.36")));
    // What kubectl rollout undo sends back: `resources: {}` where the stored template has none.
    let mut from_kubectl = template("busybox:1.35");
    from_kubectl.spec.as_mut().unwrap().containers[0].resources = Some(Default::default());
    from_kubectl.spec.as_mut().unwrap().containers[0].env = Some(vec![]);
    assert!(equal_ignore_hash(&with_hash, &from_kubectl));
    assert_eq!(compute_hash(&from_kubectl, None), compute_hash(&template("busybox:1.35"), None));
}

#[test]
fn percentages_round_surge_up_and_unavailable_down() {
    assert_eq!(fenceposts(&rolling(10, pct("25%"), pct("25%"))), Ok((3, 2)));
    assert_eq!(fenceposts(&rolling(4, pct("25%"), pct("25%"))), Ok((1, 1)));
    assert_eq!(fenceposts(&rolling(1, pct("25%"), pct("25%"))), Ok((1, 0)));
    assert_eq!(
        fenceposts(&rolling(3, IntOrString::Int(0), pct("10%"))),
        Ok((0, 1)),
        "both zero: one may be unavailable"
    );
    assert_eq!(
        max_unavailable(&rolling(2, IntOrString::Int(0), IntOrString::Int(5))),
        Ok(2),
        "never above replicas"
    );
    assert_eq!(max_unavailable(&rolling(0, IntOrString::Int(1), IntOrString::Int(1))), Ok(0));
    assert!(fenceposts(&rolling(3, pct("lots"), IntOrString::Int(1))).is_err());
}

#[test]
fn rollbacks_keep_former_revisions_in_the_history_annotation() {
    let d = rolling(2, IntOrString::Int(1), IntOrString::Int(0));
    let mut rs = ReplicaSet::default();
    assert_eq!(set_new_rs_annotations(&d, &mut rs, 1, false), Ok(true));
    let anns = rs.metadata.annotations.clone().unwrap();
    assert_eq!(anns[REVISION], "1");
    assert_eq!((anns[DESIRED_REPLICAS].as_str(), anns[MAX_REPLICAS].as_str()), ("2", "3"));
    assert_eq!(set_new_rs_annotations(&d, &mut rs, 3, true), Ok(true));
    assert_eq!(rs.metadata.annotations.as_ref().unwrap()[REVISION_HISTORY], "1");
    assert_eq!(set_new_rs_annotations(&d, &mut rs, 5, true), Ok(true));
    let anns = rs.metadata.annotations.clone().unwrap();
    assert_eq!((anns[REVISION].as_str(), anns[REVISION_HISTORY].as_str()), ("5", "1,3"));
    assert_eq!(set_new_rs_annotations(&d, &mut rs, 5, true), Ok(false), "nothing new");
}
