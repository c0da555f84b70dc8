//! The scheduler binary against apiserver-lite, with Node objects created through the API (no
//! kubelets): pods spread by the scores, filters honoured, `FailedScheduling` with upstream's
//! per-filter reasons and a retry when a node that fits appears, and leader election (only the
//! lease holder binds; a standby takes over when the leader dies).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::Duration;

use e2e::apiserver::ApiServer;
use e2e::eventually;
use e2e::scheduler::{Scheduler, node};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const WITHIN: Duration = Duration::from_secs(30);
const EVERY: Duration = Duration::from_millis(100);

fn pod(name: &str, cpu: &str, memory: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.35",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    })
}

async fn create_pod(pods: &Api<Pod>, body: serde_json::Value) {
    let p: Pod = serde_json::from_value(body).unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
}

async fn create_node(nodes: &Api<Node>, n: Node) {
    nodes.create(&PostParams::default(), &n).await.unwrap();
}

/// Waits until every named pod has a node; returns pod → node.
async fn wait_bound(pods: &Api<Pod>, names: &[String]) -> BTreeMap<String, String> {
    eventually("pods bound", WITHIN, EVERY, || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let bound: BTreeMap<String, String> = list
            .items
            .into_iter()
            .filter_map(|p| Some((p.metadata.name?, p.spec?.node_name?)))
            .filter(|(n, _)| names.contains(n))
            .collect();
        (bound.len() == names.len()).then_some(bound)
    })
    .await
    .unwrap()
}

fn per_node(bound: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for node in bound.values() {
        *out.entry(node.clone()).or_default() += 1;
    }
    out
}

/// The scheduler's `FailedScheduling` event for a pod, once it exists.
async fn failed_scheduling(events: &Api<Event>, pod: &str) -> Event {
    eventually("a FailedScheduling event", WITHIN, EVERY, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.involved_object.name.as_deref() == Some(pod)
                && e.reason.as_deref() == Some("FailedScheduling")
        })
    })
    .await
    .unwrap()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[tokio::test]
async fn equal_pods_spread_evenly_over_equal_nodes_by_the_scores() {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for n in ["node-1", "node-2", "node-3"] {
        create_node(&nodes, node(n, "4", "8Gi", "110")).await;
    }
    let _scheduler = Scheduler::start(&server, &[]).unwrap();

    let even = names("even", 6);
    for n in &even {
        create_pod(&pods, pod(n, "500m", "512Mi")).await;
    }
    let bound = wait_bound(&pods, &even).await;
    assert_eq!(
        per_node(&bound),
        [("node-1".into(), 2), ("node-2".into(), 2), ("node-3".into(), 2)].into(),
        "LeastAllocated and BalancedAllocation spread equal pods: {bound:?}"
    );
    // The binding also records PodScheduled=True, as upstream's pods/binding does.
    let p = pods.get(&even[0]).await.unwrap();
    let conditions = p.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conditions.iter().any(|c| c.type_ == "PodScheduled" && c.status == "True"),
        "{conditions:?}"
    );
}

#[tokio::test]
async fn a_loaded_node_gets_none_of_the_next_pods_by_the_scores() {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for n in ["node-1", "node-2", "node-3"] {
        create_node(&nodes, node(n, "4", "8Gi", "110")).await;
    }
    // node-1 already runs a heavy pod (bound directly, as a kubelet's mirror pod would be).
    let mut heavy = pod("heavy", "2", "4Gi");
    heavy["spec"]["nodeName"] = json!("node-1");
    create_pod(&pods, heavy).await;
    let _scheduler = Scheduler::start(&server, &[]).unwrap();

    let next = names("next", 4);
    for n in &next {
        create_pod(&pods, pod(n, "500m", "512Mi")).await;
    }
    let bound = wait_bound(&pods, &next).await;
    assert_eq!(
        per_node(&bound),
        [("node-2".into(), 2), ("node-3".into(), 2)].into(),
        "the loaded node scores lowest: {bound:?}"
    );
}

#[tokio::test]
async fn a_pod_that_fits_nowhere_gets_failed_scheduling_with_each_filters_reason_and_schedules_when_a_node_fits()
 {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");

    let mut small = node("small", "1", "8Gi", "110");
    small.metadata.labels.get_or_insert_default().insert("disk".into(), "ssd".into());
    create_node(&nodes, small).await;
    create_node(&nodes, node("no-ssd", "8", "8Gi", "110")).await;
    let mut tainted = node("tainted", "8", "8Gi", "110");
    tainted.metadata.labels.get_or_insert_default().insert("disk".into(), "ssd".into());
    tainted.spec.get_or_insert_default().taints = Some(vec![
        serde_json::from_value(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}))
            .unwrap(),
    ]);
    create_node(&nodes, tainted).await;
    let scheduler = Scheduler::start(&server, &[]).unwrap();

    let mut big = pod("big", "2", "1Gi");
    big["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    create_pod(&pods, big).await;
    let event = failed_scheduling(&events, "big").await;
    assert_eq!(
        event.message.as_deref(),
        Some(
            "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s)."
        ),
        "{}",
        scheduler.log_tail(20)
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.source.and_then(|s| s.component).as_deref(), Some("default-scheduler"));
    assert_eq!(event.reporting_component.as_deref(), Some("default-scheduler"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Pod"));

    // The pod says so too, as `kubectl get pods`/`describe` read it.
    let condition = eventually("PodScheduled=False", WITHIN, EVERY, || async {
        let p = pods.get("big").await.ok()?;
        p.status?.conditions?.into_iter().find(|c| c.type_ == "PodScheduled" && c.status == "False")
    })
    .await
    .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert_eq!(condition.message, event.message);
    assert!(pods.get("big").await.unwrap().spec.unwrap().node_name.is_none());

    // A node that fits appears: the queue moves the pod back and it is bound there.
    let mut roomy = node("roomy", "4", "8Gi", "110");
    roomy.metadata.labels.get_or_insert_default().insert("disk".into(), "ssd".into());
    create_node(&nodes, roomy).await;
    let bound = wait_bound(&pods, &["big".to_string()]).await;
    assert_eq!(bound["big"], "roomy");
    let scheduled = eventually("a Scheduled event", WITHIN, EVERY, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| e.reason.as_deref() == Some("Scheduled"))
    })
    .await
    .unwrap();
    assert_eq!(scheduled.message.as_deref(), Some("Successfully assigned default/big to roomy"));
}

#[tokio::test]
async fn node_selectors_affinity_taints_cordons_and_host_ports_are_honoured() {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");

    create_node(&nodes, node("plain", "8", "16Gi", "110")).await;
    let mut ssd = node("ssd", "8", "16Gi", "110");
    ssd.metadata.labels.get_or_insert_default().insert("disk".into(), "ssd".into());
    create_node(&nodes, ssd).await;
    let mut gpu = node("gpu", "8", "16Gi", "110");
    gpu.metadata.labels.get_or_insert_default().insert("pool".into(), "gpu".into());
    gpu.spec.get_or_insert_default().taints = Some(vec![
        serde_json::from_value(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}))
            .unwrap(),
    ]);
    create_node(&nodes, gpu).await;
    let mut cordoned = node("cordoned", "8", "16Gi", "110");
    cordoned.spec.get_or_insert_default().unschedulable = Some(true);
    create_node(&nodes, cordoned).await;
    let _scheduler = Scheduler::start(&server, &[]).unwrap();

    let plain = names("plain", 6);
    for n in &plain {
        create_pod(&pods, pod(n, "100m", "64Mi")).await;
    }
    let mut wants_ssd = pod("wants-ssd", "100m", "64Mi");
    wants_ssd["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    create_pod(&pods, wants_ssd).await;
    let mut wants_gpu = pod("wants-gpu", "100m", "64Mi");
    wants_gpu["spec"]["tolerations"] =
        json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
    wants_gpu["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}});
    create_pod(&pods, wants_gpu).await;

    let mut all = plain.clone();
    all.extend(["wants-ssd".to_string(), "wants-gpu".to_string()]);
    let bound = wait_bound(&pods, &all).await;
    assert_eq!(bound["wants-ssd"], "ssd");
    assert_eq!(bound["wants-gpu"], "gpu");
    for p in &plain {
        assert!(
            bound[p] == "plain" || bound[p] == "ssd",
            "untolerated taints and cordons keep pods off: {bound:?}"
        );
    }

    // Host ports: the second pod asking for port 8080 on `plain` finds it taken; every other
    // node fails an earlier filter, each with its own reason.
    for name in ["port-1", "port-2"] {
        let mut p = pod(name, "100m", "64Mi");
        p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "plain"});
        p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}]);
        create_pod(&pods, p).await;
        if name == "port-1" {
            wait_bound(&pods, &[name.to_string()]).await;
        }
    }
    let event = failed_scheduling(&events, "port-2").await;
    assert_eq!(
        event.message.as_deref(),
        Some(
            "0/4 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable."
        )
    );
}

async fn lease(client: &kube::Client) -> Option<Lease> {
    Api::<Lease>::namespaced(client.clone(), "kube-system")
        .get_opt("kube-scheduler")
        .await
        .ok()
        .flatten()
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref()?.holder_identity.clone().filter(|h| !h.is_empty())
}

#[tokio::test]
async fn only_the_lease_holder_binds_and_a_standby_takes_over_when_it_dies() {
    let server = ApiServer::start().unwrap();
    let client = server.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for n in ["node-1", "node-2", "node-3"] {
        create_node(&nodes, node(n, "4", "8Gi", "110")).await;
    }
    let fast = [
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    ];
    let mut first = Scheduler::start(&server, &fast).unwrap();
    let first_id =
        eventually("the first scheduler's identity", WITHIN, EVERY, || async { first.identity() })
            .await
            .unwrap();
    eventually("the first scheduler to hold the lease", WITHIN, EVERY, || async {
        lease(&client).await.and_then(|l| holder(&l)).filter(|h| *h == first_id)
    })
    .await
    .unwrap();
    let mut second = Scheduler::start(&server, &fast).unwrap();
    let second_id = eventually("the second scheduler's identity", WITHIN, EVERY, || async {
        second.identity()
    })
    .await
    .unwrap();
    assert_ne!(first_id, second_id);
    eventually("the second scheduler to be waiting for the lease", WITHIN, EVERY, || async {
        second.log().contains("attempting to acquire leader lease").then_some(())
    })
    .await
    .unwrap();

    let before = names("before", 5);
    for n in &before {
        create_pod(&pods, pod(n, "100m", "64Mi")).await;
    }
    wait_bound(&pods, &before).await;
    // Let the standby run a few more election rounds: it must still not bind.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(first.bindings(), 5, "{}", first.log_tail(20));
    assert_eq!(second.bindings(), 0, "{}", second.log_tail(20));
    assert!(!second.log().contains("successfully acquired lease"));
    assert_eq!(lease(&client).await.and_then(|l| holder(&l)), Some(first_id.clone()));

    // The leader dies without releasing the lease: the standby takes it once it expires.
    first.kill9();
    let after = names("after", 5);
    for n in &after {
        create_pod(&pods, pod(n, "100m", "64Mi")).await;
    }
    wait_bound(&pods, &after).await;
    // The scheduler logs a binding after the server answered it: the pod may be seen bound
    // a moment before the line is written.
    let logged = eventually("the standby to log its five bindings", WITHIN, EVERY, || async {
        (second.bindings() == 5).then_some(())
    })
    .await;
    assert!(logged.is_ok(), "{} bindings: {}", second.bindings(), second.log_tail(20));
    let taken = lease(&client).await.unwrap();
    assert_eq!(holder(&taken), Some(second_id));
    assert_eq!(taken.spec.as_ref().and_then(|s| s.lease_transitions), Some(1));

    // A clean stop releases the lease, so a successor need not wait out its duration.
    second.stop();
    assert!(!second.is_running());
    let released = lease(&client).await.unwrap();
    assert_eq!(holder(&released), None, "{}", second.log_tail(10));
}
