//! The Services' cluster IP allocator, as upstream's IPAddress allocator (1.33+): each address
//! handed out is a record of its own at `/registry/networking.k8s.io/ipaddresses/<ip>`
//! (upstream's `ipaddresses` key in etcd), created only where none is, so apiservers sharing a
//! store never give one address to two Services; released when its Service goes. Addresses come
//! from 10.96.0.0/16, upstream's default service range.

use serde_json::{Value, json};

use super::Registry;
use crate::errors::ApiError;
use crate::resources::SERVICES;
use crate::storage::memory::Mutation;
use api::validation::{ErrorList, FieldError, Path};

/// Where the address records live in the store, and under the etcd prefix.
pub const PREFIX: &str = "/registry/networking.k8s.io/ipaddresses/";
pub const ETCD_PATH: &str = "ipaddresses";

fn key(ip: &str) -> String {
    format!("{PREFIX}{ip}")
}

/// The addresses handed out, in order.
fn candidates() -> impl Iterator<Item = String> {
    (10u32..65_534).map(|n| format!("10.96.{}.{}", n >> 8, n & 0xff))
}

/// The record of `ip` held by Service `ns`/`name` (upstream's IPAddress object).
fn record(ip: &str, ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IPAddress",
        "metadata": {
            "name": ip,
            "labels": {
                "ipaddress.kubernetes.io/ip-family": "IPv4",
                "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
            },
        },
        "spec": { "parentRef": { "group": "", "resource": "services", "namespace": ns, "name": name } },
    })
}

/// `[]string{"10.96.0.10"}`, as Go prints the value upstream's message names.
struct GoStrings<'a>(&'a str);

impl api::validation::Value for GoStrings<'_> {
    fn render(&self) -> String {
        format!("[]string{{{:?}}}", self.0)
    }
}

/// Whether the record `value` is held by Service `ns`/`name`.
fn held_by(value: &[u8], ns: &str, name: &str) -> Result<bool, ApiError> {
    let holder: Value = super::parse(value)?;
    let parent = &holder["spec"]["parentRef"];
    Ok(parent["namespace"] == ns && parent["name"] == name)
}

/// The address a stored Service holds, with its namespace and name.
fn assigned(svc: &Value) -> Option<(&str, &str, &str)> {
    let ip = svc["spec"]["clusterIP"].as_str().filter(|ip| !ip.is_empty() && *ip != "None")?;
    Some((ip, svc["metadata"]["namespace"].as_str()?, svc["metadata"]["name"].as_str()?))
}

/// Whether a Service gets a cluster IP (not `ExternalName`, not headless).
fn wants_ip(svc: &Value) -> bool {
    svc["spec"]["type"].as_str().unwrap_or("ClusterIP") != "ExternalName"
        && svc["spec"]["clusterIP"].as_str() != Some("None")
}

impl Registry {
    /// Reserves the address `svc` asks for, or the first free one, for it; returns the address
    /// reserved (to release if the Service is not stored after all).
    pub(crate) async fn allocate_cluster_ip(
        &self,
        svc: &mut Value,
        ns: &str,
    ) -> Result<Option<String>, ApiError> {
        if !wants_ip(svc) {
            return Ok(None);
        }
        let name = svc["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if let Some(asked) = svc["spec"]["clusterIP"].as_str().filter(|ip| !ip.is_empty()) {
            let asked = asked.to_string();
            if self.reserve(&asked, ns, &name).await? {
                return Ok(Some(asked));
            }
            let mut errs = ErrorList::default();
            errs.push(FieldError::invalid(
                &Path::root("spec").child("clusterIPs"),
                GoStrings(&asked),
                format!("failed to allocate IP {asked}: provided IP is already allocated"),
            ));
            return Err(ApiError::invalid(&SERVICES, &name, &errs));
        }
        for ip in candidates() {
            if self.store.get(&key(&ip)).is_some() {
                continue;
            }
            if self.reserve(&ip, ns, &name).await? {
                svc["spec"]["clusterIP"] = json!(ip);
                svc["spec"]["clusterIPs"] = json!([ip]);
                return Ok(Some(ip));
            }
        }
        Err(ApiError::internal("failed to allocate a serviceIP: range is full"))
    }

    /// A dry run's address: the first free one, shown but not reserved (upstream's dry-run
    /// allocator).
    pub(crate) fn preview_cluster_ip(&self, svc: &mut Value) {
        if !wants_ip(svc) || svc["spec"]["clusterIP"].as_str().is_some_and(|ip| !ip.is_empty()) {
            return;
        }
        if let Some(ip) = candidates().find(|ip| self.store.get(&key(ip)).is_none()) {
            svc["spec"]["clusterIP"] = json!(ip);
            svc["spec"]["clusterIPs"] = json!([ip]);
        }
    }

    /// Creates the record of `ip` for `ns`/`name` unless another holds it; `true` if it is
    /// this Service's now.
    async fn reserve(&self, ip: &str, ns: &str, name: &str) -> Result<bool, ApiError> {
        let mut held_by_other = false;
        self.store
            .mutate::<ApiError, _>(&key(ip), |current, rev| {
                held_by_other = false;
                if let Some(c) = current {
                    held_by_other = !held_by(&c.value, ns, name)?;
                    return Ok(Mutation::Unchanged);
                }
                let mut r = record(ip, ns, name);
                r["metadata"]["resourceVersion"] = json!(rev.to_string());
                Ok(Mutation::Put(super::encode(&r)))
            })
            .await?;
        Ok(!held_by_other)
    }

    /// Releases the address a Service held (it was removed, or never stored).
    pub(crate) async fn release_cluster_ip(&self, ip: &str, ns: &str, name: &str) {
        let released = self
            .store
            .mutate::<ApiError, _>(&key(ip), |current, _| {
                let Some(c) = current else { return Ok(Mutation::Unchanged) };
                Ok(if held_by(&c.value, ns, name)? {
                    Mutation::Delete
                } else {
                    Mutation::Unchanged
                })
            })
            .await;
        if let Err(e) = released {
            tracing::warn!(ip, service = %format!("{ns}/{name}"), error = %e, "releasing a cluster IP");
        }
    }

    /// The address a removed Service held, released.
    pub(crate) async fn service_removed(&self, svc: &Value) {
        if let Some((ip, ns, name)) = assigned(svc) {
            self.release_cluster_ip(ip, ns, name).await;
        }
    }

    /// At start: every Service's address has its record (Services stored before records were
    /// kept get theirs), as upstream's repair loop. Only missing records are written: a start
    /// costs no write (and, over etcd, no read) per Service already recorded.
    pub async fn repair_cluster_ips(&self) -> Result<(), ApiError> {
        let (services, _) = self.store.list(&SERVICES.prefix(None));
        for (_, stored) in services {
            let svc: Value = super::parse(&stored.value)?;
            let Some((ip, ns, name)) = assigned(&svc) else { continue };
            let ours = match self.store.get(&key(ip)) {
                Some(record) => held_by(&record.value, ns, name)?,
                None => self.reserve(ip, ns, name).await?,
            };
            if !ours {
                tracing::warn!(ip, service = %format!("{ns}/{name}"), "a cluster IP held by two Services");
            }
        }
        Ok(())
    }
}
