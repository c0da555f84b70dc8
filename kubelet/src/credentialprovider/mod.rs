//! Image pull credentials, as upstream's `credentialprovider` keyring finds them: the pod's
//! image pull secrets first, then the node's own Docker-style config, matched by the registry
//! and path an image is pulled from. No IO but reading the node's config files under the paths
//! it is given.
//!
//! - [`config`]: `config.json` and `.dockercfg` contents;
//! - [`keyring`]: credentials by location and the lookup that matches them to an image;
//! - [`reference`]: the repository an image name stands for;
//! - [`node`]: the node's config files, re-read every five minutes;
//! - [`secrets`]: the keyring of a pod's pull secrets.

pub mod config;
pub mod keyring;
pub mod node;
pub mod reference;
pub mod secrets;

pub use config::Entry;
pub use keyring::Keyring;
pub use node::NodeKeyring;

/// The credentials to try, in order, for pulling `image`: those of the pod's pull secrets
/// (`pod`), then the node's (upstream's `UnionDockerKeyring`). Empty: pull without.
pub fn lookup(pod: Option<&Keyring>, node: &Keyring, image: &str) -> Vec<Entry> {
    let repository = reference::repository(image);
    let mut found = pod.map(|k| k.lookup(&repository)).unwrap_or_default();
    found.extend(node.lookup(&repository));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_secrets_are_tried_before_the_node_config() {
        let entry = |u: &str| Entry { username: u.into(), password: "p".into() };
        let pod = Keyring::from_config(&[("r.io".to_string(), entry("pod"))].into());
        let node = Keyring::from_config(
            &[("r.io".to_string(), entry("node")), ("*.io".to_string(), entry("any"))].into(),
        );
        let users = |pod: Option<&Keyring>, image: &str| -> Vec<String> {
            lookup(pod, &node, image).into_iter().map(|e| e.username).collect()
        };
        assert_eq!(users(Some(&pod), "r.io/app:1"), ["pod", "node", "any"]);
        assert_eq!(users(None, "r.io/app@sha256:ab"), ["node", "any"]);
        assert_eq!(users(Some(&pod), "busybox:1.35"), ["any"], "docker.io is a *.io");
        assert!(users(Some(&pod), "registry.example.com/app").is_empty());
    }
}
