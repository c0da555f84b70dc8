//! Where objects live in etcd: upstream's key layout (`/registry/pods/<ns>/<name>`, nodes under
//! `minions/`, services under `services/specs/`), mapped to and from the store's own keys
//! (`/registry/<group>/<resource>/…`, which keep the RBAC kinds under one prefix).

/// The routes between the store's key prefixes and etcd's.
#[derive(Debug, Clone)]
pub struct KeyLayout {
    /// The etcd prefix every key is under (`--etcd-prefix`), without a trailing slash.
    prefix: String,
    /// (store prefix, etcd path below the prefix), each ending in `/`.
    routes: Vec<(String, String)>,
}

impl KeyLayout {
    /// `routes`: each store prefix (`/registry/core/nodes/`) with the path upstream keeps that
    /// resource under (`minions`).
    pub fn new(prefix: &str, routes: impl IntoIterator<Item = (String, String)>) -> Self {
        let prefix = prefix.trim_end_matches('/').to_string();
        let routes = routes
            .into_iter()
            .map(|(store, etcd)| {
                let etcd = format!("{}/", etcd.trim_matches('/'));
                (store, etcd)
            })
            .collect();
        Self { prefix, routes }
    }

    /// Everything this layout covers in etcd (`/registry/`).
    pub fn etcd_prefix(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// The etcd key of a store key; `None` for a key no route covers.
    pub fn to_etcd(&self, key: &str) -> Option<String> {
        self.routes.iter().find_map(|(store, etcd)| {
            key.strip_prefix(store.as_str()).map(|rest| format!("{}/{etcd}{rest}", self.prefix))
        })
    }

    /// The store key of an etcd key; `None` for keys that are not this server's (another
    /// prefix, or a resource it does not serve).
    pub fn from_etcd(&self, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')?;
        // The longest matching path wins (`services/endpoints/` over a `services/` route).
        self.routes
            .iter()
            .filter_map(|(store, etcd)| rest.strip_prefix(etcd.as_str()).map(|r| (store, etcd, r)))
            .max_by_key(|(_, etcd, _)| etcd.len())
            .filter(|(_, _, name)| !name.is_empty())
            .map(|(store, _, name)| format!("{store}{name}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> KeyLayout {
        KeyLayout::new(
            "/registry",
            [
                ("/registry/core/pods/".to_string(), "pods".to_string()),
                ("/registry/core/nodes/".to_string(), "minions".to_string()),
                ("/registry/core/services/".to_string(), "services/specs".to_string()),
                ("/registry/core/endpoints/".to_string(), "services/endpoints".to_string()),
                ("/registry/rbac.authorization.k8s.io/roles/".to_string(), "roles".to_string()),
            ],
        )
    }

    #[test]
    fn store_keys_map_to_upstreams_layout_and_back() {
        let l = layout();
        for (store, etcd) in [
            ("/registry/core/pods/default/web", "/registry/pods/default/web"),
            ("/registry/core/nodes/n1", "/registry/minions/n1"),
            (
                "/registry/core/services/default/kubernetes",
                "/registry/services/specs/default/kubernetes",
            ),
            (
                "/registry/core/endpoints/default/kubernetes",
                "/registry/services/endpoints/default/kubernetes",
            ),
            ("/registry/rbac.authorization.k8s.io/roles/ns/r", "/registry/roles/ns/r"),
        ] {
            assert_eq!(l.to_etcd(store).as_deref(), Some(etcd));
            assert_eq!(l.from_etcd(etcd.as_bytes()).as_deref(), Some(store));
        }
    }

    #[test]
    fn keys_that_are_not_ours_map_to_nothing() {
        let l = layout();
        assert_eq!(l.to_etcd("/registry/apps/deployments/d/x"), None);
        for foreign in [
            &b"/registry/deployments/default/x"[..],
            b"/other/pods/default/x",
            b"/registrypods/x",
            b"/registry/pods/",
            b"compact_rev_key",
            b"/registry/pods/\xff",
        ] {
            assert_eq!(l.from_etcd(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn a_custom_prefix_is_honoured_with_or_without_a_trailing_slash() {
        let a = KeyLayout::new("/cluster-a/", [("/registry/core/pods/".into(), "pods".into())]);
        assert_eq!(a.to_etcd("/registry/core/pods/ns/p").as_deref(), Some("/cluster-a/pods/ns/p"));
        assert_eq!(a.etcd_prefix(), "/cluster-a/");
        assert_eq!(a.from_etcd(b"/registry/pods/ns/p"), None);
    }
}
