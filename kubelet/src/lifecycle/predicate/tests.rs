use k8s_openapi::api::core::v1::{
    Container, ContainerPort, NodeSpec, NodeStatus, PodOS, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

fn node(cpu: &str, memory: &str, pods: &str) -> Node {
    let alloc = [("cpu", cpu), ("memory", memory), ("pods", pods)]
        .iter()
        .map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string())))
        .collect();
    Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("n1".into()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                ("disk".to_string(), "ssd".to_string()),
            ])),
            ..Default::default()
        },
        status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
        ..Default::default()
    }
}

fn pod(name: &str, cpu: &str, memory: &str) -> Pod {
    let requests: BTreeMap<String, Quantity> = [("cpu", cpu), ("memory", memory)]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string())))
        .collect();
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: (!requests.is_empty()).then_some(requests),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn rejected(pod: &Pod, admitted: &[&Pod], node: &Node) -> (String, String) {
    let r = admit(pod, admitted, node).expect_err("rejected");
    (r.reason, r.message)
}

#[test]
fn requests_beyond_what_is_left_of_allocatable_are_out_of_cpu_or_memory() {
    let n = node("2", "4Gi", "110");
    let running = pod("running", "1500m", "3Gi");
    assert!(admit(&pod("fits", "500m", "1Gi"), &[&running], &n).is_ok());
    assert_eq!(
        rejected(&pod("big", "1", ""), &[&running], &n),
        (
            "OutOfcpu".into(),
            "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"
                .into()
        )
    );
    assert_eq!(
        rejected(&pod("fat", "", "2Gi"), &[&running], &n),
        (
            "OutOfmemory".into(),
            "Node didn't have enough resource: memory, requested: 2147483648, used: 3221225472, capacity: 4294967296"
                .into()
        )
    );
    // Both short: the first failure (cpu) decides, as upstream's.
    assert_eq!(rejected(&pod("both", "1", "2Gi"), &[&running], &n).0, "OutOfcpu");
    assert!(admit(&pod("besteffort", "", ""), &[&running], &n).is_ok(), "requests nothing");
}

#[test]
fn one_pod_more_than_max_pods_is_out_of_pods() {
    let n = node("2", "4Gi", "2");
    let (a, b) = (pod("a", "", ""), pod("b", "", ""));
    assert!(admit(&pod("c", "", ""), &[&a], &n).is_ok());
    assert_eq!(
        rejected(&pod("c", "", ""), &[&a, &b], &n),
        (
            "OutOfpods".into(),
            "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2".into()
        )
    );
}

#[test]
fn node_selector_affinity_name_and_host_ports_are_checked_as_the_scheduler_does() {
    let n = node("2", "4Gi", "110");
    let mut p = pod("p", "", "");
    let spec = p.spec.as_mut().unwrap();
    spec.node_selector = Some(BTreeMap::from([("disk".to_string(), "hdd".to_string())]));
    assert_eq!(
        rejected(&p, &[], &n),
        (
            "NodeAffinity".into(),
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
                .into()
        )
    );
    let mut p = pod("p", "", "");
    p.spec.as_mut().unwrap().node_name = Some("n2".into());
    assert_eq!(rejected(&p, &[], &n).0, "NodeName");

    let with_port = |name: &str| {
        let mut p = pod(name, "", "");
        p.spec.as_mut().unwrap().containers[0].ports = Some(vec![ContainerPort {
            container_port: 80,
            host_port: Some(8080),
            ..Default::default()
        }]);
        p
    };
    let first = with_port("first");
    assert_eq!(
        rejected(&with_port("second"), &[&first], &n),
        (
            "NodePorts".into(),
            "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
                .into()
        )
    );
}

#[test]
fn untolerated_no_execute_taints_reject_api_pods_but_not_static_ones() {
    let mut n = node("2", "4Gi", "110");
    n.spec = Some(NodeSpec {
        taints: Some(vec![
            Taint { key: "soft".into(), effect: "NoSchedule".into(), ..Default::default() },
            Taint { key: "gone".into(), effect: "NoExecute".into(), ..Default::default() },
        ]),
        ..Default::default()
    });
    let p = pod("p", "", "");
    assert_eq!(
        rejected(&p, &[], &n),
        (
            "TaintToleration".into(),
            "Predicate TaintToleration failed: node(s) had untolerated taint(s)".into()
        )
    );
    let mut tolerant = pod("t", "", "");
    tolerant.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
        key: Some("gone".into()),
        operator: Some("Exists".into()),
        ..Default::default()
    }]);
    assert!(admit(&tolerant, &[], &n).is_ok(), "NoSchedule taints are the scheduler's business");
    let mut static_pod = pod("s", "", "");
    static_pod.metadata.annotations =
        Some(BTreeMap::from([(api::keys::CONFIG_SOURCE.to_string(), "file".to_string())]));
    assert!(admit(&static_pod, &[], &n).is_ok());
}

#[test]
fn a_pod_for_another_os_is_refused_before_anything_else() {
    let n = node("1", "1Gi", "110");
    let mut p = pod("win", "8", "");
    p.metadata.labels =
        Some(BTreeMap::from([("kubernetes.io/os".to_string(), "windows".to_string())]));
    assert_eq!(rejected(&p, &[], &n).0, "PodOSSelectorNodeLabelDoesNotMatch");
    let mut p = pod("win", "", "");
    p.spec.as_mut().unwrap().os = Some(PodOS { name: "windows".into() });
    assert_eq!(
        rejected(&p, &[], &n),
        (
            "PodOSNotSupported".into(),
            "Failed to admit pod as the OS field doesn't match node OS".into()
        )
    );
}

#[test]
fn extended_resources_the_node_does_not_advertise_are_not_counted() {
    let n = node("1", "1Gi", "110");
    let mut p = pod("p", "", "");
    let requests = |list: &[(&str, &str)]| {
        Some(
            list.iter()
                .map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string())))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        requests: requests(&[("example.com/gpu", "1")]),
        ..Default::default()
    });
    assert!(admit(&p, &[], &n).is_ok(), "a cluster-level resource");
    p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
        requests: requests(&[("hugepages-2Mi", "4Mi")]),
        ..Default::default()
    });
    assert_eq!(rejected(&p, &[], &n).0, "OutOfhugepages-2Mi");
}

fn static_pod(name: &str, cpu: &str, memory: &str) -> Pod {
    let mut p = pod(name, cpu, memory);
    p.metadata.annotations =
        Some(BTreeMap::from([(api::keys::CONFIG_SOURCE.to_string(), "file".to_string())]));
    p
}

#[test]
fn a_critical_pod_short_of_resources_is_admitted_by_preempting_lower_pods() {
    let n = node("2", "4Gi", "110");
    let api_pod = pod("api", "1500m", "1Gi");
    let other_static = static_pod("etcd", "250m", "");
    // A static pod is critical: the API pod makes room; the other static pod never does.
    let preempt = admit(&static_pod("apiserver", "1", ""), &[&other_static, &api_pod], &n);
    assert_eq!(preempt, Ok(vec![1]));
    // A regular pod in the same spot is refused as before.
    assert_eq!(rejected(&pod("web", "1", ""), &[&other_static, &api_pod], &n).0, "OutOfcpu");
    // Only static pods to preempt: upstream's UnexpectedAdmissionError, naming what is short.
    assert_eq!(
        rejected(&static_pod("apiserver", "2", ""), &[&other_static], &n),
        (
            "UnexpectedAdmissionError".into(),
            "Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q: 250), ]".into()
        )
    );
    // A failure preemption cannot mend (node affinity) decides alone: resources are not a
    // critical pod's reason to be refused.
    let mut elsewhere = static_pod("elsewhere", "1", "");
    elsewhere.spec.as_mut().unwrap().node_selector =
        Some(BTreeMap::from([("disk".to_string(), "hdd".to_string())]));
    assert_eq!(rejected(&elsewhere, &[&other_static, &api_pod], &n).0, "NodeAffinity");
}
