//! `kubectl describe service`: selector, type, IPs, ports with their endpoints (from the
//! service's EndpointSlices), session affinity, traffic policies and events.

use serde_json::Value;

use super::containers::int_or_string;
use super::events::{self, Involved};
use super::writer::{LEVEL_0, PrefixWriter};
use super::{Clock, Settings, fields, has, int, items, s};
use crate::builder::{Info, encode};
use crate::errors::Result;
use crate::factory::Factory;

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let svc = f.get_json(&info.url()).await?;
    let url = format!(
        "/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices?labelSelector={}",
        s(&svc, "/metadata/namespace"),
        encode(&format!("kubernetes.io/service-name={}", info.name))
    );
    // kubectl describes the service without endpoints when they cannot be listed.
    let slices = f
        .get_json(&url)
        .await
        .ok()
        .and_then(|l| l.get("items").and_then(Value::as_array).cloned())
        .unwrap_or_default();
    let events = if st.show_events {
        Some(events::search(f, &Involved::of(&svc), st.chunk_size).await.unwrap_or_default())
    } else {
        None
    };
    Ok(render(&svc, &slices, events.as_deref(), clock))
}

fn strings(v: &Value, ptr: &str) -> Vec<String> {
    items(v, ptr).iter().filter_map(Value::as_str).map(str::to_string).collect()
}

/// `describeService`.
pub fn render(svc: &Value, slices: &[Value], events: Option<&[Value]>, clock: &Clock) -> String {
    let mut pw = PrefixWriter::new();
    let w = &mut pw;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(svc, "/metadata/name")));
    w.write(LEVEL_0, &format!("Namespace:\t{}\n", s(svc, "/metadata/namespace")));
    fields::labels_multiline(w, "Labels", svc.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", svc.pointer("/metadata/annotations"));
    let selector = fields::string_map(svc.pointer("/spec/selector"));
    let selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    w.write(LEVEL_0, &format!("Selector:\t{}\n", selector.join(",")));
    w.write(LEVEL_0, &format!("Type:\t{}\n", s(svc, "/spec/type")));
    if has(svc, "/spec/ipFamilyPolicy") {
        w.write(LEVEL_0, &format!("IP Family Policy:\t{}\n", s(svc, "/spec/ipFamilyPolicy")));
    }
    let or_none = |l: Vec<String>| if l.is_empty() { "<none>".to_string() } else { l.join(",") };
    w.write(LEVEL_0, &format!("IP Families:\t{}\n", or_none(strings(svc, "/spec/ipFamilies"))));
    w.write(LEVEL_0, &format!("IP:\t{}\n", s(svc, "/spec/clusterIP")));
    w.write(LEVEL_0, &format!("IPs:\t{}\n", or_none(strings(svc, "/spec/clusterIPs"))));
    let external = strings(svc, "/spec/externalIPs");
    if !external.is_empty() {
        w.write(LEVEL_0, &format!("External IPs:\t{}\n", external.join(",")));
    }
    let lb = s(svc, "/spec/loadBalancerIP");
    if !lb.is_empty() {
        w.write(LEVEL_0, &format!("Desired LoadBalancer IP:\t{lb}\n"));
    }
    let en = s(svc, "/spec/externalName");
    if !en.is_empty() {
        w.write(LEVEL_0, &format!("External Name:\t{en}\n"));
    }
    let ingress = items(svc, "/status/loadBalancer/ingress");
    if !ingress.is_empty() {
        let list: Vec<String> = ingress
            .iter()
            .map(|i| {
                let ip = s(i, "/ip");
                if ip.is_empty() {
                    s(i, "/hostname").to_string()
                } else if has(i, "/ipMode") {
                    format!("{ip} ({})", s(i, "/ipMode"))
                } else {
                    ip.to_string()
                }
            })
            .collect();
        w.write(LEVEL_0, &format!("LoadBalancer Ingress:\t{}\n", list.join(", ")));
    }
    for p in items(svc, "/spec/ports") {
        let name = if s(p, "/name").is_empty() { "<unset>" } else { s(p, "/name") };
        let proto = s(p, "/protocol");
        w.write(LEVEL_0, &format!("Port:\t{name}\t{}/{proto}\n", int(p, "/port")));
        w.write(LEVEL_0, &format!("TargetPort:\t{}/{proto}\n", int_or_string(p.get("targetPort"))));
        if int(p, "/nodePort") != 0 {
            w.write(LEVEL_0, &format!("NodePort:\t{name}\t{}/{proto}\n", int(p, "/nodePort")));
        }
        w.write(LEVEL_0, &format!("Endpoints:\t{}\n", endpoints(slices, s(p, "/name"))));
    }
    w.write(LEVEL_0, &format!("Session Affinity:\t{}\n", s(svc, "/spec/sessionAffinity")));
    let etp = s(svc, "/spec/externalTrafficPolicy");
    if !etp.is_empty() {
        w.write(LEVEL_0, &format!("External Traffic Policy:\t{etp}\n"));
    }
    if has(svc, "/spec/internalTrafficPolicy") {
        let itp = s(svc, "/spec/internalTrafficPolicy");
        w.write(LEVEL_0, &format!("Internal Traffic Policy:\t{itp}\n"));
    }
    if int(svc, "/spec/healthCheckNodePort") != 0 {
        let hc = int(svc, "/spec/healthCheckNodePort");
        w.write(LEVEL_0, &format!("HealthCheck NodePort:\t{hc}\n"));
    }
    let ranges = strings(svc, "/spec/loadBalancerSourceRanges");
    if !ranges.is_empty() {
        w.write(LEVEL_0, &format!("LoadBalancer Source Ranges:\t{}\n", ranges.join(",")));
    }
    if has(svc, "/spec/trafficDistribution") {
        let td = s(svc, "/spec/trafficDistribution");
        w.write(LEVEL_0, &format!("Traffic Distribution:\t{td}\n"));
    }
    if let Some(e) = events {
        events::describe_events(w, e, clock);
    }
    pw.finish()
}

/// `formatEndpointSlices` for one port name: ready addresses with the port, three at most
/// and `+ N more...`.
fn endpoints(slices: &[Value], port_name: &str) -> String {
    if slices.is_empty() {
        return "<none>".into();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let (mut more, mut count) = (false, 0usize);
    let ready = |e: &Value| e.pointer("/conditions/ready").and_then(Value::as_bool).unwrap_or(true);
    for slice in slices {
        let eps = items(slice, "/endpoints");
        let ports = items(slice, "/ports");
        if ports.is_empty() {
            for e in eps {
                if list.len() == MAX {
                    more = true;
                }
                if !ready(e) {
                    continue;
                }
                if !more {
                    list.push(s(e, "/addresses/0").to_string());
                }
                count += 1;
            }
            continue;
        }
        for port in ports {
            if s(port, "/name") != port_name {
                continue;
            }
            for e in eps {
                if list.len() == MAX {
                    more = true;
                }
                if !ready(e) {
                    continue;
                }
                if !more {
                    let addr = s(e, "/addresses/0");
                    let p = int(port, "/port");
                    list.push(if addr.contains(':') {
                        format!("[{addr}]:{p}")
                    } else {
                        format!("{addr}:{p}")
                    });
                }
                count += 1;
            }
        }
    }
    let text = list.join(",");
    if more { format!("{text} + {} more...", count - MAX) } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoints_list_three_ready_addresses_of_the_port_and_count_the_rest() {
        let slice = json!({"ports": [{"name": "http", "port": 8080}, {"name": "other", "port": 1}],
            "endpoints": [
                {"addresses": ["10.0.0.1"]},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": true}},
                {"addresses": ["fd00::4"]},
                {"addresses": ["10.0.0.5"]},
                {"addresses": ["10.0.0.6"]}]});
        assert_eq!(
            endpoints(std::slice::from_ref(&slice), "http"),
            "10.0.0.1:8080,10.0.0.3:8080,[fd00::4]:8080 + 2 more..."
        );
        assert_eq!(endpoints(&[], "http"), "<none>");
        assert_eq!(endpoints(&[json!({"ports": [{"name": "x", "port": 1}]})], "http"), "");
    }
}
