//! The apiserver's identity Lease, as upstream's: each apiserver keeps a Lease
//! `apiserver-<hash>` in `kube-system`, labelled `apiserver.kubernetes.io/identity:
//! kube-apiserver`, renewed every 10 s and valid an hour, so clients and the other apiservers
//! sharing the store can see which apiservers are running. Identity Leases that expired are
//! removed (once an hour, by whichever apiserver gets there first).
//!
//! Upstream hashes the host name alone; two apiservers on one host (as `local-up --etcd`
//! runs) would share one Lease, so the hash here covers the host name and the serving port.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::errors::ApiError;
use crate::objects::FieldValidation;
use crate::registry::{DeleteOptions, ListOptions, Registry, WriteOptions};
use crate::resources::LEASES;
use crate::selectors::LabelSelector;

/// The label that marks identity Leases, and its value for this component.
pub const LABEL: &str = "apiserver.kubernetes.io/identity";
pub const COMPONENT: &str = "kube-apiserver";
pub const NAMESPACE: &str = "kube-system";
/// How long a Lease is valid without renewal.
pub const DURATION_SECONDS: i64 = 3600;
/// How often it is renewed.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// How often expired identity Leases are looked for.
pub const GC_PERIOD: Duration = Duration::from_secs(3600);

/// This apiserver's Lease name: `apiserver-` and 26 lowercase base32 characters of a hash of
/// the host name and port.
pub fn lease_name(host: &str, port: u16) -> String {
    let digest = Sha256::digest(format!("{host}:{port}").as_bytes());
    format!("apiserver-{}", base32_lower(&digest[..16]))
}

fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
}

fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Keeps this apiserver's Lease until `stop`, and removes expired identity Leases.
pub async fn run(
    registry: std::sync::Arc<Registry>,
    host: String,
    port: u16,
    stop: CancellationToken,
) {
    let name = lease_name(&host, port);
    let holder = format!("{name}_{}", crate::objects::new_uid());
    let mut renew = tokio::time::interval(RENEW_INTERVAL);
    let mut gc = tokio::time::interval(GC_PERIOD);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = renew.tick() => {
                if let Err(e) = keep(&registry, &name, &holder, &host).await {
                    tracing::warn!(lease = %name, error = %e, "renewing the apiserver identity lease");
                }
            }
            _ = gc.tick() => remove_expired(&registry, jiff::Timestamp::now()).await,
        }
    }
}

/// Creates or renews the Lease.
pub async fn keep(
    registry: &Registry,
    name: &str,
    holder: &str,
    host: &str,
) -> Result<(), ApiError> {
    let now = micro_time(jiff::Timestamp::now());
    let w = WriteOptions { dry_run: false, validation: FieldValidation::Ignore };
    let renewed = registry
        .update_with(&LEASES, Some(NAMESPACE), name, None, w, |old| {
            let mut lease = old.clone();
            lease["spec"]["holderIdentity"] = json!(holder);
            lease["spec"]["leaseDurationSeconds"] = json!(DURATION_SECONDS);
            lease["spec"]["renewTime"] = json!(now);
            Ok(lease)
        })
        .await;
    match renewed {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "labels": { LABEL: COMPONENT, "kubernetes.io/hostname": host },
                },
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": DURATION_SECONDS,
                    "acquireTime": now,
                    "renewTime": now,
                },
            });
            match registry.create(&LEASES, Some(NAMESPACE), lease, w).await {
                Ok(_) => Ok(()),
                // Made meanwhile (a restart racing its own previous run): renewed next tick.
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Whether an identity Lease has gone unrenewed past its duration at `now`.
pub fn expired(lease: &Value, now: jiff::Timestamp) -> bool {
    let spec = &lease["spec"];
    let Some(renewed) = spec["renewTime"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok())
    else {
        return false;
    };
    let duration = spec["leaseDurationSeconds"].as_i64().unwrap_or(DURATION_SECONDS);
    renewed + jiff::SignedDuration::from_secs(duration) < now
}

/// Deletes the expired identity Leases in `kube-system` (others' Leases are left alone).
pub async fn remove_expired(registry: &Registry, now: jiff::Timestamp) {
    let Ok(labels) = LabelSelector::parse(&format!("{LABEL}={COMPONENT}")) else { return };
    let options = ListOptions { labels, ..ListOptions::default() };
    let Ok(page) = registry.list(&LEASES, Some(NAMESPACE), &options) else { return };
    let leases = page.items.iter().filter_map(|b| serde_json::from_slice::<Value>(b).ok());
    for lease in leases.filter(|l| expired(l, now)) {
        let name = lease["metadata"]["name"].as_str().unwrap_or_default();
        match registry
            .delete(&LEASES, Some(NAMESPACE), name, &DeleteOptions::default(), false)
            .await
        {
            Ok(_) => tracing::info!(lease = name, "removed an expired apiserver identity lease"),
            Err(e) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(lease = name, error = %e, "removing an expired identity lease")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_name_is_stable_per_host_and_port_and_a_valid_name() {
        let a = lease_name("node-1", 6443);
        assert_eq!(a, lease_name("node-1", 6443));
        assert_ne!(a, lease_name("node-1", 6444));
        assert_ne!(a, lease_name("node-2", 6443));
        assert!(a.starts_with("apiserver-") && a.len() == "apiserver-".len() + 26, "{a}");
        assert!(a.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }

    #[test]
    fn base32_is_rfc4648_lowercase_without_padding() {
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
        assert_eq!(base32_lower(b""), "");
    }

    #[test]
    fn a_lease_expires_when_unrenewed_past_its_duration() {
        let now: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().unwrap();
        let lease = |renewed: &str| json!({ "spec": { "renewTime": renewed, "leaseDurationSeconds": 3600 } });
        assert!(expired(&lease("2026-11-27T08:59:59.000000Z"), now));
        assert!(!expired(&lease("2026-11-27T09:30:00.000000Z"), now));
        assert!(!expired(&json!({ "spec": {} }), now), "never renewed: not ours to judge");
    }
}
