//! The pod's QoS class, computed as upstream does from cpu and memory requests and limits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use crate::quantity::Quantity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The name the API uses in `status.qosClass`.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The cgroup directory under `kubepods` (Guaranteed pods sit directly in it).
    pub fn cgroup_dir(self) -> Option<&'static str> {
        match self {
            QosClass::Guaranteed => None,
            QosClass::Burstable => Some("burstable"),
            QosClass::BestEffort => Some("besteffort"),
        }
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Positive cpu/memory quantities of one resource list; unparsable ones count as unset
/// (validation reports them).
fn positive(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<&'static str, Quantity> {
    let mut out = BTreeMap::new();
    for name in QOS_RESOURCES {
        let q = list.and_then(|l| l.get(name)).and_then(|q| Quantity::parse(&q.0).ok());
        if let Some(q) = q.filter(|q| q.cmp_value(Quantity::ZERO).is_gt()) {
            out.insert(name, q);
        }
    }
    out
}

/// Upstream's `GetPodQOS` over init and app containers. Requests default to limits, as the API
/// server's defaulting does before this is computed.
pub fn pod_qos(spec: &PodSpec) -> QosClass {
    let init = spec.init_containers.iter().flatten();
    let containers: Vec<&Container> = init.chain(spec.containers.iter()).collect();
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    for c in containers {
        let res = c.resources.as_ref();
        let lim = positive(res.and_then(|r| r.limits.as_ref()));
        let mut req = positive(res.and_then(|r| r.requests.as_ref()));
        for (name, q) in &lim {
            req.entry(name).or_insert(*q);
        }
        for (name, q) in req {
            let total = requests.entry(name).or_default();
            *total = total.saturating_add(q);
        }
        if !QOS_RESOURCES.iter().all(|r| lim.contains_key(r)) {
            guaranteed = false;
        }
        for (name, q) in lim {
            let total = limits.entry(name).or_default();
            *total = total.saturating_add(q);
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed
        && requests.len() == limits.len()
        && requests.iter().all(|(n, r)| limits.get(n) == Some(r))
    {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    use super::*;

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let list = |kv: &[(&str, &str)]| {
            (!kv.is_empty())
                .then(|| kv.iter().map(|(k, v)| (k.to_string(), Q(v.to_string()))).collect())
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn spec(containers: Vec<Container>) -> PodSpec {
        PodSpec { containers, ..Default::default() }
    }

    #[test]
    fn classes_as_upstream_computes_them() {
        let cases = [
            (vec![container(&[], &[])], QosClass::BestEffort),
            (vec![container(&[("cpu", "0")], &[])], QosClass::BestEffort),
            (vec![container(&[], &[("cpu", "1"), ("memory", "1Gi")])], QosClass::Guaranteed),
            (
                vec![container(
                    &[("cpu", "1000m"), ("memory", "1024Mi")],
                    &[("cpu", "1"), ("memory", "1Gi")],
                )],
                QosClass::Guaranteed,
            ),
            (
                vec![container(&[("cpu", "500m")], &[("cpu", "1"), ("memory", "1Gi")])],
                QosClass::Burstable,
            ),
            (vec![container(&[], &[("cpu", "1")])], QosClass::Burstable),
            (vec![container(&[("memory", "1Gi")], &[])], QosClass::Burstable),
            (
                vec![container(&[], &[("cpu", "1"), ("memory", "1Gi")]), container(&[], &[])],
                QosClass::Burstable,
            ),
            (vec![container(&[("ephemeral-storage", "1Gi")], &[])], QosClass::BestEffort),
        ];
        for (i, (containers, want)) in cases.into_iter().enumerate() {
            assert_eq!(pod_qos(&spec(containers)), want, "case {i}");
        }
    }
}
