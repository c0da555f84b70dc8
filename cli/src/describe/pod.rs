//! `kubectl describe pod`: identity, node, status, IPs, the controller, containers with their
//! state, conditions, volumes, QoS class, node selectors, tolerations and events.

use serde_json::Value;

use super::containers::describe_containers;
use super::events::{self, Involved};
use super::writer::{LEVEL_0, LEVEL_1, PrefixWriter};
use super::{Clock, Settings, fields, has, int, items, s, volumes};
use crate::builder::Info;
use crate::errors::Result;
use crate::factory::Factory;

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let pod = f.get_json(&info.url()).await?;
    let events = if st.show_events {
        // kubectl leaves the kind out of a pod's selector; a mirror pod's events are the
        // static pod's, under the UID its annotation names.
        let mirror = pod
            .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
            .and_then(Value::as_str);
        let uid = mirror.unwrap_or_else(|| s(&pod, "/metadata/uid"));
        let who = Involved {
            namespace: s(&pod, "/metadata/namespace"),
            name: s(&pod, "/metadata/name"),
            kind: None,
            uid: (!uid.is_empty()).then_some(uid),
        };
        Some(events::search(f, &who, st.chunk_size).await.unwrap_or_default())
    } else {
        None
    };
    Ok(render(&pod, events.as_deref(), clock))
}

/// `describePod`.
pub fn render(pod: &Value, events: Option<&[Value]>, clock: &Clock) -> String {
    let mut w = PrefixWriter::new();
    let w = &mut w;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(pod, "/metadata/name")));
    w.write(LEVEL_0, &format!("Namespace:\t{}\n", s(pod, "/metadata/namespace")));
    if has(pod, "/spec/priority") {
        w.write(LEVEL_0, &format!("Priority:\t{}\n", int(pod, "/spec/priority")));
    }
    let pc = s(pod, "/spec/priorityClassName");
    if !pc.is_empty() {
        w.write(LEVEL_0, &format!("Priority Class Name:\t{pc}\n"));
    }
    let rc = s(pod, "/spec/runtimeClassName");
    if !rc.is_empty() {
        w.write(LEVEL_0, &format!("Runtime Class Name:\t{rc}\n"));
    }
    let sa = s(pod, "/spec/serviceAccountName");
    if !sa.is_empty() {
        w.write(LEVEL_0, &format!("Service Account:\t{sa}\n"));
    }
    let node = s(pod, "/spec/nodeName");
    if node.is_empty() {
        w.write(LEVEL_0, "Node:\t<none>\n");
    } else {
        w.write(LEVEL_0, &format!("Node:\t{node}/{}\n", s(pod, "/status/hostIP")));
    }
    if has(pod, "/status/startTime") {
        w.write(
            LEVEL_0,
            &format!("Start Time:\t{}\n", fields::time(clock, pod.pointer("/status/startTime"))),
        );
    }
    fields::labels_multiline(w, "Labels", pod.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", pod.pointer("/metadata/annotations"));
    let phase = s(pod, "/status/phase");
    if has(pod, "/metadata/deletionTimestamp") && phase != "Failed" && phase != "Succeeded" {
        let lasts = fields::age(clock, pod.pointer("/metadata/deletionTimestamp"));
        w.write(LEVEL_0, &format!("Status:\tTerminating (lasts {lasts})\n"));
        let grace = int(pod, "/metadata/deletionGracePeriodSeconds");
        w.write(LEVEL_0, &format!("Termination Grace Period:\t{grace}s\n"));
    } else {
        w.write(LEVEL_0, &format!("Status:\t{phase}\n"));
    }
    for (title, ptr) in [("Reason", "/status/reason"), ("Message", "/status/message")] {
        if !s(pod, ptr).is_empty() {
            w.write(LEVEL_0, &format!("{title}:\t{}\n", s(pod, ptr)));
        }
    }
    if has(pod, "/spec/securityContext/seccompProfile") {
        let t = s(pod, "/spec/securityContext/seccompProfile/type");
        w.write(LEVEL_0, &format!("SeccompProfile:\t{t}\n"));
        if t == "Localhost" {
            let p = s(pod, "/spec/securityContext/seccompProfile/localhostProfile");
            w.write(LEVEL_0, &format!("LocalhostProfile:\t{p}\n"));
        }
    }
    w.write(LEVEL_0, &format!("IP:\t{}\n", s(pod, "/status/podIP")));
    let ips = items(pod, "/status/podIPs");
    if ips.is_empty() {
        w.write(LEVEL_0, "IPs:\t<none>\n");
    } else {
        w.write(LEVEL_0, "IPs:\n");
        for ip in ips {
            w.write(LEVEL_1, &format!("IP:\t{}\n", s(ip, "/ip")));
        }
    }
    if let Some(c) = controller_of(pod) {
        w.write(LEVEL_0, &format!("Controlled By:\t{c}\n"));
    }
    let nominated = s(pod, "/status/nominatedNodeName");
    if !nominated.is_empty() {
        w.write(LEVEL_0, &format!("NominatedNodeName:\t{nominated}\n"));
    }
    if let Some(r) = pod.pointer("/spec/resources").filter(|r| !r.is_null()) {
        w.write(LEVEL_0, "Resources:\n");
        super::containers::resources(w, Some(r), LEVEL_1);
    }
    let init = items(pod, "/spec/initContainers");
    if !init.is_empty() {
        let st = items(pod, "/status/initContainerStatuses");
        describe_containers(w, "Init Containers", init, st, Some(pod), "", clock);
    }
    let st = items(pod, "/status/containerStatuses");
    describe_containers(w, "Containers", items(pod, "/spec/containers"), st, Some(pod), "", clock);
    let eph = items(pod, "/spec/ephemeralContainers");
    if !eph.is_empty() {
        let st = items(pod, "/status/ephemeralContainerStatuses");
        describe_containers(w, "Ephemeral Containers", eph, st, Some(pod), "", clock);
    }
    let conditions = items(pod, "/status/conditions");
    let gates = items(pod, "/spec/readinessGates");
    if !gates.is_empty() {
        w.write(LEVEL_0, "Readiness Gates:\n  Type\tStatus\n");
        for g in gates {
            let t = s(g, "/conditionType");
            let status = conditions
                .iter()
                .find(|c| s(c, "/type") == t)
                .map_or("<none>", |c| s(c, "/status"));
            w.write(LEVEL_1, &format!("{t} \t{status} \n"));
        }
    }
    if !conditions.is_empty() {
        w.write(LEVEL_0, "Conditions:\n  Type\tStatus\n");
        for c in conditions {
            w.write(LEVEL_1, &format!("{} \t{} \n", s(c, "/type"), s(c, "/status")));
        }
    }
    volumes::describe_volumes(w, items(pod, "/spec/volumes"), "");
    let qos = s(pod, "/status/qosClass");
    let qos = if qos.is_empty() { computed_qos(pod) } else { qos.to_string() };
    w.write(LEVEL_0, &format!("QoS Class:\t{qos}\n"));
    fields::labels_multiline(w, "Node-Selectors", pod.pointer("/spec/nodeSelector"));
    fields::tolerations_multiline(w, "Tolerations", items(pod, "/spec/tolerations"));
    topology_spread(w, items(pod, "/spec/topologySpreadConstraints"), "");
    if let Some(e) = events {
        events::describe_events(w, e, clock);
    }
    std::mem::take(w).finish()
}

/// `Kind/name` of the controlling owner, if any.
pub fn controller_of(obj: &Value) -> Option<String> {
    items(obj, "/metadata/ownerReferences")
        .iter()
        .find(|r| super::flag(r, "/controller"))
        .map(|r| format!("{}/{}", s(r, "/kind"), s(r, "/name")))
}

/// The QoS class when the status has none: the `api` crate's computation (upstream's).
fn computed_qos(pod: &Value) -> String {
    match pod
        .get("spec")
        .cloned()
        .map(serde_json::from_value::<k8s_openapi::api::core::v1::PodSpec>)
    {
        Some(Ok(spec)) => api::qos::pod_qos(&spec).as_str().to_string(),
        _ => "BestEffort".into(),
    }
}

/// `describeTopologySpreadConstraints`, sorted by topology key.
pub fn topology_spread(w: &mut PrefixWriter, tscs: &[Value], space: &str) {
    if tscs.is_empty() {
        return;
    }
    let mut t: Vec<&Value> = tscs.iter().collect();
    t.sort_by(|a, b| s(a, "/topologyKey").cmp(s(b, "/topologyKey")));
    w.write(LEVEL_0, &format!("{space}Topology Spread Constraints:\t"));
    for (i, c) in t.iter().enumerate() {
        if i != 0 {
            w.write(LEVEL_0, space);
            w.write(LEVEL_0, "\t");
        }
        let mut line = format!(
            "{}:{} when max skew {} is exceeded",
            s(c, "/topologyKey"),
            s(c, "/whenUnsatisfiable"),
            int(c, "/maxSkew")
        );
        if has(c, "/labelSelector") {
            line.push_str(&format!(
                " for selector {}",
                fields::format_label_selector(c.get("labelSelector"))
            ));
        }
        w.write(LEVEL_0, &format!("{line}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn clock() -> Clock {
        Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC }
    }

    #[test]
    fn a_running_pod_shows_its_container_state_conditions_and_events() {
        let pod = json!({"metadata": {"name": "web", "namespace": "default", "uid": "u1",
                "labels": {"app": "web"},
                "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d4", "controller": true, "uid": "r"}]},
            "spec": {"nodeName": "n1", "priority": 0, "serviceAccountName": "default",
                "containers": [{"name": "c", "image": "nginx:1.8",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "0.5"}},
                    "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running", "hostIP": "192.0.2.1", "podIP": "10.0.0.5",
                "podIPs": [{"ip": "10.0.0.5"}], "startTime": "2024-01-01T00:00:00Z", "qosClass": "Burstable",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "c", "containerID": "containerd://abc", "imageID": "sha256:1",
                    "ready": true, "restartCount": 2,
                    "state": {"running": {"startedAt": "2024-01-01T00:01:00Z"}},
                    "lastState": {"terminated": {"exitCode": 137, "reason": "Error", "signal": 9,
                        "startedAt": "2024-01-01T00:00:10Z", "finishedAt": "2024-01-01T00:00:50Z"}}}]}});
        let events = [json!({"type": "Normal", "reason": "Started", "count": 1,
            "firstTimestamp": "2024-01-01T00:01:00Z", "lastTimestamp": "2024-01-01T00:01:00Z",
            "source": {"component": "kubelet"}, "message": "Started container c",
            "involvedObject": {"fieldPath": "spec.containers{c}"}})];
        let want = "\
Name:             web
Namespace:        default
Priority:         0
Service Account:  default
Node:             n1/192.0.2.1
Start Time:       Mon, 01 Jan 2024 00:00:00 +0000
Labels:           app=web
Annotations:      <none>
Status:           Running
IP:               10.0.0.5
IPs:
  IP:           10.0.0.5
Controlled By:  ReplicaSet/web-7d4
Containers:
  c:
    Container ID:   containerd://abc
    Image:          nginx:1.8
    Image ID:       sha256:1
    Port:           80/TCP
    Host Port:      0/TCP
    State:          Running
      Started:      Mon, 01 Jan 2024 00:01:00 +0000
    Last State:     Terminated
      Reason:       Error
      Exit Code:    137
      Signal:       9
      Started:      Mon, 01 Jan 2024 00:00:10 +0000
      Finished:     Mon, 01 Jan 2024 00:00:50 +0000
    Ready:          True
    Restart Count:  2
    Requests:
      cpu:        500m
    Environment:  <none>
    Mounts:
      /v from v (rw)
Conditions:
  Type           Status
  Ready          True 
  PodScheduled   True 
Volumes:
  v:
    Type:        EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:      
    SizeLimit:   <unset>
QoS Class:       Burstable
Node-Selectors:  <none>
Tolerations:     <none>
Events:
  Type    Reason   Age   From     Message
  ----    ------   ----  ----     -------
  Normal  Started  9m    kubelet  spec.containers{c}: Started container c
";
        assert_eq!(render(&pod, Some(&events), &clock()), want);
    }

    #[test]
    fn a_pod_being_deleted_says_how_long_it_has_been_terminating() {
        let pod = json!({"metadata": {"name": "p", "namespace": "default",
                "deletionTimestamp": "2024-01-01T00:09:30Z", "deletionGracePeriodSeconds": 30},
            "spec": {"containers": []}, "status": {"phase": "Running"}});
        let text = render(&pod, None, &clock());
        assert!(text.contains(&format!("{:27}Terminating (lasts 30s)\n", "Status:")), "{text}");
        assert!(text.contains("\nTermination Grace Period:  30s\n"), "{text}");
        assert!(text.contains("Containers: <none>\n"), "{text}");
        assert!(!text.contains("Events"), "no events asked for: {text}");
    }
}
