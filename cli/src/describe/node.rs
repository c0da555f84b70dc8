//! `kubectl describe node`: roles, labels, taints, the lease, conditions, addresses,
//! capacity, system info, the pods not terminated on it with their requests and limits
//! against what the node can allocate, and events.

use std::collections::BTreeMap;

use serde_json::Value;

use super::events::{self, Involved};
use super::quantity::Quantity;
use super::writer::{LEVEL_0, LEVEL_1, PrefixWriter};
use super::{Clock, Settings, fields, items, s};
use crate::builder::{Info, encode};
use crate::errors::Result;
use crate::factory::Factory;

const ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const ROLE_LABEL: &str = "kubernetes.io/role";

/// What kubectl reads beside the node.
#[derive(Debug)]
pub struct Extra {
    /// `None`: listing pods was forbidden.
    pub pods: Option<Vec<Value>>,
    /// The node's lease, or the error reading it.
    pub lease: std::result::Result<Value, String>,
    pub events: Option<Vec<Value>>,
}

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let node = f.get_json(&info.url()).await?;
    let selector =
        format!("spec.nodeName={},status.phase!=Succeeded,status.phase!=Failed", info.name);
    let url = format!("/api/v1/pods?fieldSelector={}", encode(&selector));
    let pods = match super::list_all(f, &url, st.chunk_size).await {
        Ok(p) => Some(p),
        Err(e) if e.status().is_some_and(|s| s.code == 403) => None,
        Err(e) => return Err(e),
    };
    let lease_url =
        format!("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{}", info.name);
    let lease = f.get_json(&lease_url).await.map_err(|e| lease_error(&e));
    let events = if st.show_events {
        // Controllers name a node by its UID, the kubelet by its name: both are asked.
        let by_uid = Involved::of(&node);
        let mut found = events::search(f, &by_uid, st.chunk_size).await.unwrap_or_default();
        let by_name = Involved { uid: Some(s(&node, "/metadata/name")), ..by_uid.clone() };
        found.extend(events::search(f, &by_name, st.chunk_size).await.unwrap_or_default());
        Some(found)
    } else {
        None
    };
    Ok(render(&node, &Extra { pods, lease, events }, clock))
}

/// Go's `%v` of the error reading the lease (the server's message).
fn lease_error(e: &crate::errors::CliError) -> String {
    match e.status() {
        Some(s) => s.message.clone(),
        None => e.to_string(),
    }
}

/// `describeNode`.
pub fn render(node: &Value, extra: &Extra, clock: &Clock) -> String {
    let mut pw = PrefixWriter::new();
    let w = &mut pw;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(node, "/metadata/name")));
    let roles = roles(node);
    let roles = if roles.is_empty() { "<none>".to_string() } else { roles.join(",") };
    w.write(LEVEL_0, &format!("Roles:\t{roles}\n"));
    fields::labels_multiline(w, "Labels", node.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", node.pointer("/metadata/annotations"));
    let created = fields::time(clock, node.pointer("/metadata/creationTimestamp"));
    w.write(LEVEL_0, &format!("CreationTimestamp:\t{created}\n"));
    fields::taints_multiline(w, "Taints", items(node, "/spec/taints"));
    w.write(LEVEL_0, &format!("Unschedulable:\t{}\n", super::flag(node, "/spec/unschedulable")));
    match &extra.lease {
        Ok(lease) => {
            w.write(LEVEL_0, "Lease:\n");
            let holder = lease.pointer("/spec/holderIdentity").and_then(Value::as_str);
            w.write(LEVEL_1, &format!("HolderIdentity:\t{}\n", holder.unwrap_or("<unset>")));
            for (title, ptr) in
                [("AcquireTime", "/spec/acquireTime"), ("RenewTime", "/spec/renewTime")]
            {
                let t = if super::has(lease, ptr) {
                    fields::time(clock, lease.pointer(ptr))
                } else {
                    "<unset>".into()
                };
                w.write(LEVEL_1, &format!("{title}:\t{t}\n"));
            }
        }
        Err(e) => w.write(LEVEL_0, &format!("Lease:\tFailed to get lease: {e}\n")),
    }
    let conditions = items(node, "/status/conditions");
    if !conditions.is_empty() {
        w.write(
            LEVEL_0,
            "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n",
        );
        w.write(LEVEL_1, "----\t------\t-----------------\t------------------\t------\t-------\n");
        for c in conditions {
            w.write(
                LEVEL_1,
                &format!(
                    "{} \t{} \t{} \t{} \t{} \t{}\n",
                    s(c, "/type"),
                    s(c, "/status"),
                    fields::time(clock, c.get("lastHeartbeatTime")),
                    fields::time(clock, c.get("lastTransitionTime")),
                    s(c, "/reason"),
                    s(c, "/message")
                ),
            );
        }
    }
    w.write(LEVEL_0, "Addresses:\n");
    for a in items(node, "/status/addresses") {
        w.write(LEVEL_1, &format!("{}:\t{}\n", s(a, "/type"), s(a, "/address")));
    }
    for (title, ptr) in [("Capacity", "/status/capacity"), ("Allocatable", "/status/allocatable")] {
        let list = super::containers::sorted_quantities(node.pointer(ptr));
        if list.is_empty() {
            continue;
        }
        w.write(LEVEL_0, &format!("{title}:\n"));
        for (name, q) in list {
            w.write(LEVEL_0, &format!("  {name}:\t{q}\n"));
        }
    }
    w.write(LEVEL_0, "System Info:\n");
    for (title, key) in [
        ("Machine ID", "machineID"),
        ("System UUID", "systemUUID"),
        ("Boot ID", "bootID"),
        ("Kernel Version", "kernelVersion"),
        ("OS Image", "osImage"),
        ("Operating System", "operatingSystem"),
        ("Architecture", "architecture"),
        ("Container Runtime Version", "containerRuntimeVersion"),
        ("Kubelet Version", "kubeletVersion"),
        ("Kube-Proxy Version", "kubeProxyVersion"),
    ] {
        w.write(LEVEL_0, &format!("  {title}:\t{}\n", s(node, &format!("/status/nodeInfo/{key}"))));
    }
    let cidr = s(node, "/spec/podCIDR");
    if !cidr.is_empty() {
        w.write(LEVEL_0, &format!("PodCIDR:\t{cidr}\n"));
    }
    let cidrs: Vec<&str> = items(node, "/spec/podCIDRs").iter().filter_map(Value::as_str).collect();
    if !cidrs.is_empty() {
        w.write(LEVEL_0, &format!("PodCIDRs:\t{}\n", cidrs.join(",")));
    }
    let provider = s(node, "/spec/providerID");
    if !provider.is_empty() {
        w.write(LEVEL_0, &format!("ProviderID:\t{provider}\n"));
    }
    match &extra.pods {
        Some(pods) => node_resources(w, node, pods, clock),
        None => w.write(LEVEL_0, "Pods:\tnot authorized\n"),
    }
    if let Some(e) = &extra.events {
        events::describe_events(w, e, clock);
    }
    pw.finish()
}

/// `findNodeRoles`: `node-role.kubernetes.io/<role>` labels and `kubernetes.io/role=<role>`.
fn roles(node: &Value) -> Vec<String> {
    let mut roles: Vec<String> = fields::string_map(node.pointer("/metadata/labels"))
        .into_iter()
        .filter_map(|(k, v)| match k.strip_prefix(ROLE_PREFIX) {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            Some(_) => None,
            None => (k == ROLE_LABEL && !v.is_empty()).then_some(v),
        })
        .collect();
    roles.sort();
    roles.dedup();
    roles
}

type Resources = BTreeMap<String, Quantity>;

fn add(list: &mut Resources, new: &Resources) {
    for (name, q) in new {
        let sum = list.get(name).map_or(*q, |v| v.plus(*q));
        list.insert(name.clone(), sum);
    }
}

fn max(list: &mut Resources, new: &Resources) {
    for (name, q) in new {
        match list.get(name) {
            Some(v) if q.nanos() <= v.nanos() => {}
            _ => {
                list.insert(name.clone(), *q);
            }
        }
    }
}

fn resource_list(v: Option<&Value>) -> Resources {
    v.and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Quantity::of(v).map(|q| (k.clone(), q))).collect())
        .unwrap_or_default()
}

/// kubectl's `PodRequestsAndLimits`: app containers and restartable init containers summed,
/// the largest init container step, the overhead.
pub fn pod_requests_and_limits(pod: &Value) -> (Resources, Resources) {
    let sum = |key: &str| {
        let mut total = Resources::new();
        for c in items(pod, "/spec/containers") {
            add(&mut total, &resource_list(c.pointer(&format!("/resources/{key}"))));
        }
        let mut restartable = Resources::new();
        let mut init_max = Resources::new();
        for c in items(pod, "/spec/initContainers") {
            let own = resource_list(c.pointer(&format!("/resources/{key}")));
            let step = if s(c, "/restartPolicy") == "Always" {
                add(&mut total, &own);
                add(&mut restartable, &own);
                restartable.clone()
            } else {
                let mut tmp = Resources::new();
                add(&mut tmp, &own);
                add(&mut tmp, &restartable);
                tmp
            };
            max(&mut init_max, &step);
        }
        max(&mut total, &init_max);
        total
    };
    let mut reqs = sum("requests");
    let mut limits = sum("limits");
    let overhead = resource_list(pod.pointer("/spec/overhead"));
    add(&mut reqs, &overhead);
    for (name, q) in overhead {
        if let Some(v) = limits.get(&name).filter(|v| !v.is_zero()) {
            let sum = v.plus(q);
            limits.insert(name, sum);
        }
    }
    (reqs, limits)
}

fn percent(part: i128, whole: i128) -> i128 {
    if whole == 0 {
        return 0;
    }
    // Go's float division then int64 conversion (truncation).
    ((part as f64) / (whole as f64) * 100.0) as i128
}

/// A per-pod fraction as Go computes it with no guard: a zero allocatable gives `NaN`/`+Inf`,
/// whose `int64` conversion on amd64 is the smallest int64.
fn fraction(part: i128, whole: i128) -> i128 {
    if whole == 0 {
        return i128::from(i64::MIN);
    }
    percent(part, whole)
}

const STANDARD: &[&str] = &["cpu", "memory", "ephemeral-storage"];

fn node_resources(w: &mut PrefixWriter, node: &Value, pods: &[Value], clock: &Clock) {
    w.write(LEVEL_0, &format!("Non-terminated Pods:\t({} in total)\n", pods.len()));
    w.write(
        LEVEL_1,
        "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n",
    );
    w.write(
        LEVEL_1,
        "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n",
    );
    let alloc_ptr = if resource_list(node.pointer("/status/allocatable")).is_empty() {
        "/status/capacity"
    } else {
        "/status/allocatable"
    };
    let allocatable = resource_list(node.pointer(alloc_ptr));
    let get = |l: &Resources, k: &str| l.get(k).copied().unwrap_or_default();
    let (acpu, amem) =
        (get(&allocatable, "cpu").milli_value(), get(&allocatable, "memory").value());
    for pod in pods {
        let (req, lim) = pod_requests_and_limits(pod);
        let (cr, cl, mr, ml) =
            (get(&req, "cpu"), get(&lim, "cpu"), get(&req, "memory"), get(&lim, "memory"));
        w.write(
            LEVEL_1,
            &format!(
                "{}\t{}\t\t{cr} ({}%)\t{cl} ({}%)\t{mr} ({}%)\t{ml} ({}%)\t{}\n",
                s(pod, "/metadata/namespace"),
                s(pod, "/metadata/name"),
                fraction(cr.milli_value(), acpu),
                fraction(cl.milli_value(), acpu),
                fraction(mr.value(), amem),
                fraction(ml.value(), amem),
                fields::age(clock, pod.pointer("/metadata/creationTimestamp"))
            ),
        );
    }
    w.write(
        LEVEL_0,
        "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n",
    );
    w.write(LEVEL_1, "Resource\tRequests\tLimits\n");
    w.write(LEVEL_1, "--------\t--------\t------\n");
    let mut reqs = Resources::new();
    let mut limits = Resources::new();
    for pod in pods {
        let (r, l) = pod_requests_and_limits(pod);
        add(&mut reqs, &r);
        add(&mut limits, &l);
    }
    let astore = get(&allocatable, "ephemeral-storage").value();
    for (name, whole, milli) in
        [("cpu", acpu, true), ("memory", amem, false), ("ephemeral-storage", astore, false)]
    {
        let (r, l) = (get(&reqs, name), get(&limits, name));
        let v = |q: Quantity| if milli { q.milli_value() } else { q.value() };
        w.write(
            LEVEL_1,
            &format!("{name}\t{r} ({}%)\t{l} ({}%)\n", percent(v(r), whole), percent(v(l), whole)),
        );
    }
    let huge: Vec<&String> = allocatable.keys().filter(|k| k.starts_with("hugepages-")).collect();
    for name in huge {
        let (r, l, a) = (get(&reqs, name), get(&limits, name), get(&allocatable, name).value());
        w.write(
            LEVEL_1,
            &format!(
                "{name}\t{r} ({}%)\t{l} ({}%)\n",
                percent(r.value(), a),
                percent(l.value(), a)
            ),
        );
    }
    let ext: Vec<&String> = allocatable
        .keys()
        .filter(|k| !k.starts_with("hugepages-") && k.as_str() != "pods" && !standard(k))
        .collect();
    for name in ext {
        w.write(LEVEL_1, &format!("{name}\t{}\t{}\n", get(&reqs, name), get(&limits, name)));
    }
}

/// `IsStandardContainerResourceName`: cpu, memory, ephemeral-storage and hugepages.
fn standard(name: &str) -> bool {
    STANDARD.contains(&name) || name.starts_with("hugepages-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_requests_take_the_largest_init_step_and_add_sidecars_and_overhead() {
        let pod = json!({"spec": {
            "initContainers": [
                {"name": "big", "resources": {"requests": {"cpu": "2"}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}}],
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}}],
            "overhead": {"cpu": "10m", "memory": "1Mi"}}});
        let (req, lim) = pod_requests_and_limits(&pod);
        let show =
            |l: &Resources| l.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        assert_eq!(show(&req), "cpu=2010m,memory=129Mi");
        assert_eq!(show(&lim), "memory=321Mi");
    }

    #[test]
    fn a_node_without_capacity_prints_go_s_percentages_of_nothing() {
        let node = json!({"metadata": {"name": "n1", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        let pods = vec![
            json!({"metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2024-01-01T00:09:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}),
        ];
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        let extra = Extra { pods: Some(pods), lease: Err("nope".into()), events: Some(Vec::new()) };
        let text = render(&node, &extra, &clock);
        assert!(text.contains(&format!("{:20}<none>\n", "Roles:")), "{text}");
        assert!(text.contains(&format!("{:20}Failed to get lease: nope\n", "Lease:")), "{text}");
        assert!(text.contains("100m (-9223372036854775808%)"), "{text}");
        assert!(text.contains(&format!("{:21}100m (0%)  0 (0%)\n", "  cpu")), "{text}");
        let no_pods = Extra { pods: None, lease: Err("nope".into()), events: None };
        let text = render(&node, &no_pods, &clock);
        assert!(text.contains(&format!("{:30}not authorized\n", "Pods:")), "{text}");
    }
}
