//! What the server serves, from its aggregated discovery (`/api` and `/apis` as
//! `APIGroupDiscoveryList`), cached on disk as kubectl caches it (under
//! `~/.kube/cache/discovery/<host_port>/`, six hours), and the lookup of a type as a user types it
//! (`pods`, `pod`, `po`, `Pod`, `deployments.apps`, `deploy.v1.apps`), as kubectl's RESTMapper.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::errors::{CliError, Result};

/// How long a cached discovery document is trusted.
const CACHE_TTL: Duration = Duration::from_secs(6 * 3600);

/// `Accept` for aggregated discovery.
pub const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// One served resource (a row of `kubectl api-resources`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resource {
    pub group: String,
    pub version: String,
    /// The plural, lower-case name in URLs (`pods`).
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub verbs: Vec<String>,
    pub categories: Vec<String>,
    pub subresources: Vec<String>,
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`: kubectl's name of the type in messages and `-o name`.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `pod` or `deployment.apps`: the prefix of `-o name` and of `created`/`deleted` lines.
    pub fn group_kind_lower(&self) -> String {
        let kind = self.kind.to_lowercase();
        if self.group.is_empty() { kind } else { format!("{kind}.{}", self.group) }
    }

    /// The URL of the collection (in `namespace` if namespaced) or of one object.
    pub fn url(&self, namespace: Option<&str>, name: Option<&str>) -> String {
        let mut url = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if self.namespaced
            && let Some(ns) = namespace
        {
            url.push_str("/namespaces/");
            url.push_str(ns);
        }
        url.push('/');
        url.push_str(&self.plural);
        if let Some(n) = name {
            url.push('/');
            url.push_str(n);
        }
        url
    }

    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb)
    }
}

/// Every resource the server serves, in discovery order (the core group first, then groups in
/// the server's preference order; within a group the preferred version first).
#[derive(Debug, Clone, Default)]
pub struct Resources {
    pub resources: Vec<Arc<Resource>>,
}

impl Resources {
    /// The resource `arg` names (`pods`, `po`, `Pod`, `deployments.apps`, `deploy.v1.apps`).
    pub fn lookup(&self, arg: &str) -> Option<Arc<Resource>> {
        let arg = arg.to_lowercase();
        // `name.version.group` or `name.group` (the group may itself hold dots).
        let candidates = |name: &str, version: Option<&str>, group: Option<&str>| {
            self.named(name)
                .into_iter()
                .filter(|r| {
                    version.is_none_or(|v| r.version == v) && group.is_none_or(|g| r.group == g)
                })
                .collect::<Vec<_>>()
        };
        let exact = candidates(&arg, None, None);
        if let Some(r) = self.preferred(exact) {
            return Some(r);
        }
        let (name, rest) = arg.split_once('.')?;
        if let Some((version, group)) = rest.split_once('.')
            && let Some(r) = self.preferred(candidates(name, Some(version), Some(group)))
        {
            return Some(r);
        }
        self.preferred(candidates(name, None, Some(rest)))
    }

    /// Every resource `name` names (its plural, singular, kind or a short name, in any case),
    /// in discovery order: kubectl's `ResourcesFor` of a bare resource name.
    pub fn named(&self, name: &str) -> Vec<Arc<Resource>> {
        let name = name.to_lowercase();
        self.resources
            .iter()
            .filter(|r| {
                r.plural == name
                    || r.singular == name
                    || r.kind.to_lowercase() == name
                    || r.short_names.contains(&name)
            })
            .cloned()
            .collect()
    }

    /// The other resources a bare short name could also mean, after the one it means (the
    /// first in discovery order): kubectl's shortcut expander warns of each. None for a name
    /// with a group, or one that is some resource's plural or singular.
    pub fn also_matched(&self, arg: &str) -> Vec<String> {
        let arg = arg.to_lowercase();
        if arg.contains('.') || self.resources.iter().any(|r| r.plural == arg || r.singular == arg)
        {
            return Vec::new();
        }
        let mut matched: Vec<String> = Vec::new();
        for r in self.resources.iter().filter(|r| r.short_names.contains(&arg)) {
            let name = r.group_resource();
            if !matched.contains(&name) {
                matched.push(name);
            }
        }
        matched.split_off(matched.len().min(1))
    }

    /// Among matches, the first in discovery order (the core group, then the server's order).
    fn preferred(&self, matches: Vec<Arc<Resource>>) -> Option<Arc<Resource>> {
        matches.into_iter().next()
    }

    /// The resource of an object's `apiVersion` and `kind`.
    pub fn for_kind(&self, api_version: &str, kind: &str) -> Option<Arc<Resource>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .cloned()
    }

    /// The resource kubectl's discovery RESTMapper maps `apiVersion`/`kind` to: the kind as
    /// served, or all in lower case (it registers both).
    pub fn mapping(&self, api_version: &str, kind: &str) -> Option<Arc<Resource>> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.for_kind(api_version, kind).or_else(|| {
            self.resources
                .iter()
                .find(|r| r.group == group && r.version == version && r.kind.to_lowercase() == kind)
                .cloned()
        })
    }

    /// The resources of every group and version, from aggregated discovery documents.
    pub fn from_aggregated(docs: &[GroupDiscoveryList]) -> Resources {
        let mut resources = Vec::new();
        for doc in docs {
            for group in &doc.items {
                for version in &group.versions {
                    for r in &version.resources {
                        let kind =
                            r.response_kind.as_ref().map(|k| k.kind.clone()).unwrap_or_default();
                        resources.push(Arc::new(Resource {
                            group: group.metadata.name.clone(),
                            version: version.version.clone(),
                            plural: r.resource.clone(),
                            singular: r
                                .singular_resource
                                .clone()
                                .unwrap_or_else(|| kind.to_lowercase()),
                            kind,
                            namespaced: r.scope == "Namespaced",
                            short_names: r.short_names.clone(),
                            verbs: r.verbs.clone(),
                            categories: r.categories.clone(),
                            subresources: r
                                .subresources
                                .iter()
                                .map(|s| s.subresource.clone())
                                .collect(),
                        }));
                    }
                }
            }
        }
        Resources { resources }
    }
}

/// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`: the fields read here.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GroupDiscoveryList {
    #[serde(default)]
    pub items: Vec<GroupDiscovery>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GroupDiscovery {
    #[serde(default)]
    pub metadata: GroupName,
    #[serde(default)]
    pub versions: Vec<VersionDiscovery>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GroupName {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VersionDiscovery {
    pub version: String,
    #[serde(default)]
    pub resources: Vec<ResourceDiscovery>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDiscovery {
    pub resource: String,
    #[serde(default)]
    pub singular_resource: Option<String>,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub response_kind: Option<GroupVersionKind>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub short_names: Vec<String>,
    #[serde(default)]
    pub categories: Vec<String>,
    #[serde(default)]
    pub subresources: Vec<SubresourceDiscovery>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SubresourceDiscovery {
    pub subresource: String,
}

/// The on-disk cache of one server's discovery.
#[derive(Debug, Clone)]
pub struct DiskCache {
    path: PathBuf,
}

impl DiskCache {
    /// The cache file for `server` (`host:port`) under kubectl's cache directory.
    pub fn for_server(server: &str) -> Option<DiskCache> {
        let home = std::env::var_os("HOME")?;
        let dir: String = server
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' })
            .collect();
        let path = PathBuf::from(home)
            .join(".kube/cache/discovery")
            .join(dir)
            .join("kubectl-lite-aggregated.json");
        Some(DiskCache { path })
    }

    /// The cached resources, if present and fresh.
    pub fn read(&self) -> Option<Resources> {
        let meta = std::fs::metadata(&self.path).ok()?;
        let age = SystemTime::now().duration_since(meta.modified().ok()?).ok()?;
        if age > CACHE_TTL {
            return None;
        }
        let rows: Vec<Resource> = serde_json::from_slice(&std::fs::read(&self.path).ok()?).ok()?;
        Some(Resources { resources: rows.into_iter().map(Arc::new).collect() })
    }

    /// Writes the cache (best effort, as kubectl: a read-only home only costs a refetch).
    pub fn write(&self, resources: &Resources) {
        let Some(dir) = self.path.parent() else { return };
        let rows: Vec<&Resource> = resources.resources.iter().map(|r| r.as_ref()).collect();
        let Ok(bytes) = serde_json::to_vec(&rows) else { return };
        let tmp = self.path.with_extension("tmp");
        let _ = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
    }

    pub fn invalidate(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The error kubectl gives for a type the server does not serve.
pub fn unknown(arg: &str) -> CliError {
    CliError::UnknownResource(arg.to_string())
}

/// The RESTMapper's words for a kind no served version has (`NoKindMatchError`).
pub fn no_kind_match(api_version: &str, kind: &str) -> String {
    format!("no matches for kind \"{kind}\" in version \"{api_version}\"")
}

/// A type argument's lookup, refreshing a stale cache once on a miss as kubectl does.
pub type Lookup = Result<Arc<Resource>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn resources() -> Resources {
        let doc: GroupDiscoveryList = serde_json::from_value(serde_json::json!({"items": [
            {"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
                {"resource": "pods", "singularResource": "pod", "scope": "Namespaced",
                 "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                 "verbs": ["get", "list"], "shortNames": ["po"], "subresources": [{"subresource": "status"}]},
                {"resource": "nodes", "singularResource": "node", "scope": "Cluster",
                 "responseKind": {"group": "", "version": "v1", "kind": "Node"}, "shortNames": ["no"]},
                {"resource": "events", "singularResource": "event", "scope": "Namespaced",
                 "responseKind": {"group": "", "version": "v1", "kind": "Event"}, "shortNames": ["ev"]}
            ]}]},
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                {"resource": "deployments", "singularResource": "deployment", "scope": "Namespaced",
                 "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "shortNames": ["deploy"]}
            ]}]},
            {"metadata": {"name": "events.k8s.io"}, "versions": [{"version": "v1", "resources": [
                {"resource": "events", "singularResource": "event", "scope": "Namespaced",
                 "responseKind": {"group": "events.k8s.io", "version": "v1", "kind": "Event"}, "shortNames": ["ev"]}
            ]}]}
        ]}))
        .unwrap();
        Resources::from_aggregated(&[doc])
    }

    #[test]
    fn a_type_is_found_by_plural_singular_short_name_and_kind() {
        let r = resources();
        for arg in ["pods", "pod", "po", "Pod", "PODS"] {
            assert_eq!(r.lookup(arg).unwrap().plural, "pods", "{arg}");
        }
        assert_eq!(r.lookup("deploy").unwrap().group, "apps");
        assert!(r.lookup("nope").is_none());
    }

    #[test]
    fn a_group_suffix_picks_among_groups_and_the_core_group_wins_otherwise() {
        let r = resources();
        assert_eq!(r.lookup("events").unwrap().group, "");
        assert_eq!(r.lookup("events.events.k8s.io").unwrap().group, "events.k8s.io");
        assert_eq!(r.lookup("deployments.v1.apps").unwrap().kind, "Deployment");
        assert_eq!(r.lookup("deployments.apps").unwrap().kind, "Deployment");
        assert!(r.lookup("deployments.batch").is_none());
    }

    #[test]
    fn a_short_name_of_several_groups_names_the_lower_priority_ones() {
        let r = resources();
        assert_eq!(r.also_matched("ev"), ["events.events.k8s.io"]);
        assert_eq!(r.also_matched("EV"), ["events.events.k8s.io"]);
        for unambiguous in ["events", "event", "po", "ev.events.k8s.io", "nope"] {
            assert!(r.also_matched(unambiguous).is_empty(), "{unambiguous}");
        }
    }

    #[test]
    fn a_kind_maps_as_served_or_all_in_lower_case() {
        let r = resources();
        assert_eq!(r.mapping("apps/v1", "Deployment").unwrap().plural, "deployments");
        assert_eq!(r.mapping("apps/v1", "deployment").unwrap().plural, "deployments");
        assert!(r.mapping("apps/v1", "DEPLOYMENT").is_none());
        assert!(r.mapping("apps/v2", "Deployment").is_none());
        assert!(r.for_kind("apps/v1", "deployment").is_none());
    }

    #[test]
    fn urls_are_namespaced_only_for_namespaced_types() {
        let r = resources();
        let pods = r.lookup("pods").unwrap();
        assert_eq!(pods.url(Some("a"), Some("x")), "/api/v1/namespaces/a/pods/x");
        assert_eq!(pods.url(None, None), "/api/v1/pods");
        let nodes = r.lookup("nodes").unwrap();
        assert_eq!(nodes.url(Some("a"), Some("n")), "/api/v1/nodes/n");
        let d = r.lookup("deploy").unwrap();
        assert_eq!(d.url(Some("a"), None), "/apis/apps/v1/namespaces/a/deployments");
        assert_eq!(d.group_kind_lower(), "deployment.apps");
    }
}
