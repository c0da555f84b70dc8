//! What a work queue holds: an object's namespace and name (upstream's `<namespace>/<name>`
//! key, `<name>` for cluster-scoped objects).

use std::fmt;

use kube::ResourceExt;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self { namespace: namespace.to_string(), name: name.to_string() }
    }

    /// A cluster-scoped object's key.
    pub fn cluster(name: &str) -> Self {
        Self::new("", name)
    }

    pub fn of<K: kube::Resource>(obj: &K) -> Self {
        Self { namespace: obj.namespace().unwrap_or_default(), name: obj.name_any() }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}
