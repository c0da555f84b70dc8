//! Discovery: `/version`, legacy discovery (`/api`, `/apis`, the resource lists per group
//! version) and aggregated discovery (with the exact content type kubectl requires). The
//! OpenAPI documents are [`crate::openapi`]'s.

use serde_json::{Value, json};

use crate::resources::{self, RESOURCES, ResourceType};

/// The Kubernetes version this server reports (kubectl warns beyond one minor version of skew).
pub const KUBE_MINOR: &str = "35";

/// The content type of aggregated discovery responses.
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-apiserver-lite.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "unknown",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

pub fn api_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

fn group_entry(group: &str) -> Value {
    let versions: Vec<Value> = resources::group_versions()
        .into_iter()
        .filter(|(g, _)| *g == group)
        .map(|(g, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions.first().cloned().unwrap_or(Value::Null)})
}

pub fn api_group_list() -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in resources::group_versions() {
        if !g.is_empty() && !groups.contains(&g) {
            groups.push(g);
        }
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups.iter().map(|g| group_entry(g)).collect::<Vec<_>>()})
}

pub fn api_group(group: &str) -> Option<Value> {
    resources::group_versions().iter().any(|(g, _)| *g == group).then(|| {
        let mut e = group_entry(group);
        e["kind"] = json!("APIGroup");
        e["apiVersion"] = json!("v1");
        e
    })
}

fn subresource_kind(r: &ResourceType, sub: &str) -> (String, String, &'static str) {
    match sub {
        "scale" => ("autoscaling".into(), "v1".into(), "Scale"),
        "binding" => (String::new(), "v1".into(), "Binding"),
        // Upstream's `EvictionREST` reports `policy/v1` (and accepts `policy/v1beta1` too).
        "eviction" => ("policy".into(), "v1".into(), "Eviction"),
        "portforward" => (String::new(), "v1".into(), "PodPortForwardOptions"),
        "token" => ("authentication.k8s.io".into(), "v1".into(), "TokenRequest"),
        "proxy" => (String::new(), "v1".into(), "NodeProxyOptions"),
        _ => (r.group.into(), r.version.into(), r.kind),
    }
}

fn sub_verbs(sub: &str) -> Vec<&'static str> {
    match sub {
        "binding" | "eviction" | "token" => vec!["create"],
        "log" => vec!["get"],
        "exec" | "attach" | "portforward" => vec!["create", "get"],
        "finalize" => vec!["update"],
        "proxy" => vec!["create", "delete", "get", "patch", "update"],
        _ => vec!["get", "patch", "update"],
    }
}

/// The legacy `APIResourceList` of a group version.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut list = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group == group && r.version == version) {
        list.push(json!({
            "name": r.name, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
            "verbs": r.verb_names(), "shortNames": r.short_names, "categories": r.categories,
        }));
        for sub in r.subresources.iter().map(|s| s.as_str()) {
            let (g, v, kind) = subresource_kind(r, sub);
            let mut e = json!({"name": format!("{}/{sub}", r.name), "singularName": "", "namespaced": r.namespaced, "kind": kind, "verbs": sub_verbs(sub)});
            if g != r.group || v != r.version {
                e["group"] = json!(g);
                e["version"] = json!(v);
            }
            list.push(e);
        }
    }
    (!list.is_empty()).then(|| {
        let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list})
    })
}

/// Aggregated discovery for `/api` (core) or `/apis` (the rest).
pub fn aggregated(core: bool) -> Value {
    let mut items = Vec::new();
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in resources::group_versions() {
        if g.is_empty() == core && !groups.contains(&g) {
            groups.push(g);
        }
    }
    for g in groups {
        let versions: Vec<Value> = resources::group_versions()
            .into_iter()
            .filter(|(gg, _)| *gg == g)
            .map(|(_, v)| {
                let res: Vec<Value> = RESOURCES
                    .iter()
                    .filter(|r| r.group == g && r.version == v)
                    .map(|r| {
                        let subs: Vec<Value> = r
                            .subresources
                            .iter()
                            .map(|s| s.as_str())
                            .map(|s| {
                                let (sg, sv, kind) = subresource_kind(r, s);
                                json!({"subresource": s, "responseKind": {"group": sg, "version": sv, "kind": kind}, "verbs": sub_verbs(s)})
                            })
                            .collect();
                        json!({
                            "resource": r.name, "singularResource": r.singular,
                            "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                            "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                            "verbs": r.verb_names(), "shortNames": r.short_names, "categories": r.categories,
                            "subresources": subs,
                        })
                    })
                    .collect();
                json!({"version": v, "freshness": "Current", "resources": res})
            })
            .collect();
        items.push(json!({"metadata": {"name": g}, "versions": versions}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_resources_and_subresources() {
        let core = resource_list("", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"pods")
                && names.contains(&"pods/status")
                && names.contains(&"pods/binding")
        );
        let apps = resource_list("apps", "v1").unwrap();
        let scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .unwrap();
        assert_eq!(
            (scale["group"].as_str(), scale["kind"].as_str()),
            (Some("autoscaling"), Some("Scale"))
        );
        let token = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "serviceaccounts/token")
            .unwrap();
        assert_eq!(
            (token["group"].as_str(), token["kind"].as_str(), &token["verbs"]),
            (Some("authentication.k8s.io"), Some("TokenRequest"), &json!(["create"]))
        );
        // What `kubectl drain`'s CheckEvictionSupport looks for.
        let eviction = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(
            (eviction["group"].as_str(), eviction["version"].as_str(), eviction["kind"].as_str()),
            (Some("policy"), Some("v1"), Some("Eviction"))
        );
        assert_eq!(eviction["verbs"], json!(["create"]));
        let agg = aggregated(true);
        let pods = agg["items"][0]["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        let sub = pods["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "eviction")
            .unwrap();
        assert_eq!(
            sub["responseKind"],
            json!({"group": "policy", "version": "v1", "kind": "Eviction"})
        );
        assert!(resource_list("nope", "v1").is_none());
        let agg = aggregated(false);
        assert!(agg["items"].as_array().unwrap().iter().any(|g| g["metadata"]["name"] == "apps"));
        assert_eq!(aggregated(true)["items"][0]["metadata"]["name"], "");
    }
}
