//! Resource amounts as the scheduler and the kubelet's admission count them: a pod's effective requests (upstream's
//! `resource.PodRequests`: the larger of the app containers' sum and each init container, with
//! sidecars counted alongside, plus overhead) and node allocatable, in millicores and bytes.
//!
//! Scoring uses "non-zero" requests: a container that sets no cpu or memory request counts as
//! upstream's defaults (100m, 200Mi), so best-effort pods still spread. Filtering never does.

use std::collections::BTreeMap;

use crate::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// Upstream's `DefaultMilliCPURequest`: what scoring counts for a container with no cpu request.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Upstream's `DefaultMemoryRequest` (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// An amount of each resource: cpu in millicores, the rest in units (bytes, devices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Extended resources and hugepages, by name.
    pub scalar: BTreeMap<String, i64>,
}

type ResourceList = BTreeMap<String, ApiQuantity>;

fn clamp(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// A quantity's value in the unit the scheduler counts `name` in; unparsable quantities count
/// as zero (the apiserver's validation rejects them before a scheduler sees them).
fn amount(name: &str, q: &ApiQuantity) -> i64 {
    let Ok(q) = Quantity::parse(&q.0) else { return 0 };
    if name == CPU { clamp(q.milli_value()) } else { clamp(q.value()) }
}

impl Resource {
    /// The resources of a list (requests, overhead, allocatable); `pods` is not a resource here.
    pub fn from_list(list: Option<&ResourceList>) -> Self {
        let mut r = Resource::default();
        for (name, q) in list.into_iter().flatten() {
            let v = amount(name, q);
            match name.as_str() {
                CPU => r.milli_cpu = v,
                MEMORY => r.memory = v,
                EPHEMERAL_STORAGE => r.ephemeral_storage = v,
                PODS => {}
                other => {
                    r.scalar.insert(other.to_string(), v);
                }
            }
        }
        r
    }

    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_add(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
    }

    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.saturating_sub(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = e.saturating_sub(*v);
        }
    }

    /// Each resource the larger of the two.
    pub fn max_with(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

fn requests(c: &Container) -> Option<&ResourceList> {
    c.resources.as_ref().and_then(|r| r.requests.as_ref())
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Upstream's aggregation over containers, given how one container's requests count.
fn aggregate(spec: &PodSpec, per_container: impl Fn(&Container) -> Resource) -> Resource {
    let mut reqs = Resource::default();
    for c in &spec.containers {
        reqs.add(&per_container(c));
    }
    // Init containers run one at a time, each beside the sidecars started before it; sidecars
    // keep running beside the app containers.
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let mut r = per_container(c);
        if is_sidecar(c) {
            reqs.add(&r);
            sidecars.add(&r);
            r = sidecars.clone();
        } else {
            r.add(&sidecars);
        }
        init_max.max_with(&r);
    }
    reqs.max_with(&init_max);
    reqs
}

/// The pod-level requests (`spec.resources`), which replace the containers' cpu and memory.
fn pod_level(spec: &PodSpec, reqs: &mut Resource) {
    let Some(list) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) else { return };
    if let Some(q) = list.get(CPU) {
        reqs.milli_cpu = amount(CPU, q);
    }
    if let Some(q) = list.get(MEMORY) {
        reqs.memory = amount(MEMORY, q);
    }
}

/// What the pod requests, for filtering and for `BalancedAllocation`.
pub fn pod_requests(spec: &PodSpec) -> Resource {
    let mut reqs = aggregate(spec, |c| Resource::from_list(requests(c)));
    pod_level(spec, &mut reqs);
    reqs.add(&Resource::from_list(spec.overhead.as_ref()));
    reqs
}

/// What a pod's containers may use at most, as upstream's `resource.PodLimits` for its pod
/// cgroup: the larger of the app containers' sum and each init container (sidecars alongside),
/// pod-level limits (`spec.resources.limits`) in place of the containers', overhead added to
/// each resource that has a limit. `cpu_declared`/`memory_declared`: every container (init ones
/// included) sets that limit, or the pod does; without it the pod as a whole is unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLimits {
    pub limits: Resource,
    pub cpu_declared: bool,
    pub memory_declared: bool,
}

fn limits(c: &Container) -> Option<&ResourceList> {
    c.resources.as_ref().and_then(|r| r.limits.as_ref())
}

pub fn pod_limits(spec: &PodSpec) -> PodLimits {
    let mut out = PodLimits {
        limits: aggregate(spec, |c| Resource::from_list(limits(c))),
        cpu_declared: true,
        memory_declared: true,
    };
    for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
        let own = Resource::from_list(limits(c));
        out.cpu_declared &= own.milli_cpu != 0;
        out.memory_declared &= own.memory != 0;
    }
    if let Some(list) = spec.resources.as_ref().and_then(|r| r.limits.as_ref()) {
        if let Some(q) = list.get(CPU).filter(|q| amount(CPU, q) != 0) {
            out.limits.milli_cpu = amount(CPU, q);
            out.cpu_declared = true;
        }
        if let Some(q) = list.get(MEMORY).filter(|q| amount(MEMORY, q) != 0) {
            out.limits.memory = amount(MEMORY, q);
            out.memory_declared = true;
        }
    }
    let overhead = Resource::from_list(spec.overhead.as_ref());
    if out.limits.milli_cpu != 0 {
        out.limits.milli_cpu = out.limits.milli_cpu.saturating_add(overhead.milli_cpu);
    }
    if out.limits.memory != 0 {
        out.limits.memory = out.limits.memory.saturating_add(overhead.memory);
    }
    out
}

/// What the pod requests for `LeastAllocated` scoring: missing cpu/memory requests count as
/// upstream's defaults.
pub fn pod_non_zero_requests(spec: &PodSpec) -> Resource {
    let mut reqs = aggregate(spec, |c| {
        let list = requests(c);
        let mut r = Resource::from_list(list);
        if list.and_then(|l| l.get(CPU)).is_none() {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if list.and_then(|l| l.get(MEMORY)).is_none() {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
        r
    });
    pod_level(spec, &mut reqs);
    reqs.add(&Resource::from_list(spec.overhead.as_ref()));
    reqs
}

/// The number of pods a node allows (`status.allocatable.pods`; 0 when unset, as upstream).
pub fn allowed_pods(list: Option<&ResourceList>) -> i64 {
    list.and_then(|l| l.get(PODS)).map(|q| amount(PODS, q)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    pub fn list(pairs: &[(&str, &str)]) -> ResourceList {
        pairs.iter().map(|(k, v)| ((*k).to_string(), ApiQuantity((*v).to_string()))).collect()
    }

    fn container(reqs: &[(&str, &str)], sidecar: bool) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: (!reqs.is_empty()).then(|| list(reqs)),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    fn limited(lims: &[(&str, &str)], sidecar: bool) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: (!lims.is_empty()).then(|| list(lims)),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn pod_limits_sum_the_apps_take_the_larger_init_and_are_undeclared_when_one_container_has_none()
    {
        let spec = PodSpec {
            containers: vec![
                limited(&[("cpu", "500m"), ("memory", "64Mi")], false),
                limited(&[("cpu", "250m"), ("memory", "32Mi")], false),
            ],
            init_containers: Some(vec![limited(&[("cpu", "2"), ("memory", "16Mi")], false)]),
            overhead: Some(list(&[("memory", "1Mi")])),
            ..Default::default()
        };
        let l = pod_limits(&spec);
        assert_eq!((l.limits.milli_cpu, l.limits.memory), (2000, 97 << 20));
        assert!(l.cpu_declared && l.memory_declared);

        let mut partly = spec.clone();
        partly.containers.push(limited(&[("cpu", "100m")], false));
        let l = pod_limits(&partly);
        assert!(l.cpu_declared && !l.memory_declared, "one container sets no memory limit");

        let mut pod_level = partly.clone();
        pod_level.resources = Some(ResourceRequirements {
            limits: Some(list(&[("memory", "1Gi")])),
            ..Default::default()
        });
        let l = pod_limits(&pod_level);
        assert!(l.memory_declared, "the pod's own limit bounds it");
        assert_eq!(l.limits.memory, (1 << 30) + (1 << 20), "overhead added to the pod-level limit");

        let none =
            pod_limits(&PodSpec { containers: vec![limited(&[], false)], ..Default::default() });
        assert_eq!((none.limits.milli_cpu, none.limits.memory), (0, 0));
        assert!(!none.cpu_declared && !none.memory_declared);
    }

    #[test]
    fn requests_are_the_larger_of_app_sum_and_each_init_container_plus_overhead() {
        let cases: Vec<(&str, PodSpec, (i64, i64))> = vec![
            (
                "apps summed",
                PodSpec {
                    containers: vec![
                        container(&[("cpu", "100m"), ("memory", "1Mi")], false),
                        container(&[("cpu", "200m")], false),
                    ],
                    ..Default::default()
                },
                (300, 1 << 20),
            ),
            (
                "a big init container wins per resource",
                PodSpec {
                    containers: vec![container(&[("cpu", "100m"), ("memory", "10Mi")], false)],
                    init_containers: Some(vec![container(&[("cpu", "1")], false)]),
                    ..Default::default()
                },
                (1000, 10 << 20),
            ),
            (
                "sidecars run beside later init containers and the apps",
                PodSpec {
                    containers: vec![container(&[("cpu", "100m")], false)],
                    init_containers: Some(vec![
                        container(&[("cpu", "50m")], true),
                        container(&[("cpu", "500m")], false),
                    ]),
                    ..Default::default()
                },
                (550, 0),
            ),
            (
                "overhead is added",
                PodSpec {
                    containers: vec![container(&[("cpu", "100m")], false)],
                    overhead: Some(list(&[("cpu", "10m"), ("memory", "5Mi")])),
                    ..Default::default()
                },
                (110, 5 << 20),
            ),
        ];
        for (what, spec, (cpu, mem)) in cases {
            let r = pod_requests(&spec);
            assert_eq!((r.milli_cpu, r.memory), (cpu, mem), "{what}");
        }
    }

    #[test]
    fn non_zero_requests_default_only_missing_cpu_and_memory() {
        let spec = PodSpec {
            containers: vec![container(&[], false), container(&[("cpu", "0")], false)],
            ..Default::default()
        };
        let r = pod_non_zero_requests(&spec);
        assert_eq!(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST, "an explicit 0 stays 0");
        assert_eq!(r.memory, 2 * DEFAULT_MEMORY_REQUEST);
        assert!(pod_requests(&spec).is_zero());
    }

    #[test]
    fn node_lists_count_pods_apart_and_extended_resources_as_scalars() {
        let l = list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110"), ("example.com/gpu", "2")]);
        let r = Resource::from_list(Some(&l));
        assert_eq!((r.milli_cpu, r.memory), (4000, 8 << 30));
        assert_eq!(r.scalar.get("example.com/gpu"), Some(&2));
        assert_eq!(allowed_pods(Some(&l)), 110);
        assert_eq!(allowed_pods(None), 0);
    }
}
