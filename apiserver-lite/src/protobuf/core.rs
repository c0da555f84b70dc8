//! The core/v1 kinds besides pods and their templates: ServiceAccount (`kubectl create
//! serviceaccount`), Node (spec and the status a kubelet reports), Event and Endpoints, and the
//! object references and event sources other groups share.

use k8s_pb::api::core::v1 as core;

use super::meta::{micro_time, object_meta, quantities, time};
use super::pod::local_reference;
use super::{R, done, flag, list, nested, number, obj, plain, ptr, strings};

use std::mem::take;

/// `v1` `ObjectReference`.
pub(super) fn object_reference(mut r: core::ObjectReference) -> R {
    let v = obj([
        ("kind", plain(r.kind.take())),
        ("namespace", plain(r.namespace.take())),
        ("name", plain(r.name.take())),
        ("uid", plain(r.uid.take())),
        ("apiVersion", plain(r.api_version.take())),
        ("resourceVersion", plain(r.resource_version.take())),
        ("fieldPath", plain(r.field_path.take())),
    ]);
    done(&r, "ObjectReference")?;
    Ok(v)
}

/// `v1` `EventSource` (also the deprecated source of an `events.k8s.io` Event).
pub(super) fn event_source(mut s: core::EventSource) -> R {
    let v = obj([("component", plain(s.component.take())), ("host", plain(s.host.take()))]);
    done(&s, "EventSource")?;
    Ok(v)
}

pub(super) fn service_account(mut a: core::ServiceAccount) -> R {
    let v = obj([
        ("metadata", object_meta(a.metadata.take())?),
        ("secrets", list(take(&mut a.secrets), object_reference)?),
        ("imagePullSecrets", list(take(&mut a.image_pull_secrets), local_reference)?),
        ("automountServiceAccountToken", ptr(a.automount_service_account_token.take())),
    ]);
    done(&a, "ServiceAccount")?;
    Ok(v)
}

pub(super) fn node(mut n: core::Node) -> R {
    let v = obj([
        ("metadata", object_meta(n.metadata.take())?),
        ("spec", nested(n.spec.take(), node_spec)?),
        ("status", nested(n.status.take(), node_status)?),
    ]);
    done(&n, "Node")?;
    Ok(v)
}

fn node_spec(mut s: core::NodeSpec) -> R {
    let taints = list(take(&mut s.taints), |mut t| {
        let v = obj([
            ("key", plain(t.key.take())),
            ("value", plain(t.value.take())),
            ("effect", plain(t.effect.take())),
            ("timeAdded", time(t.time_added.take())),
        ]);
        done(&t, "Taint")?;
        Ok(v)
    })?;
    let v = obj([
        ("podCIDR", plain(s.pod_cidr.take())),
        ("podCIDRs", strings(take(&mut s.pod_cid_rs))),
        ("providerID", plain(s.provider_id.take())),
        ("unschedulable", flag(s.unschedulable.take())),
        ("taints", taints),
        ("configSource", nested(s.config_source.take(), node_config_source)?),
        ("externalID", plain(s.external_id.take())),
    ]);
    done(&s, "NodeSpec")?;
    Ok(v)
}

fn node_config_source(mut s: core::NodeConfigSource) -> R {
    let config_map = nested(s.config_map.take(), |mut c| {
        let v = obj([
            ("namespace", plain(c.namespace.take())),
            ("name", plain(c.name.take())),
            ("uid", plain(c.uid.take())),
            ("resourceVersion", plain(c.resource_version.take())),
            ("kubeletConfigKey", plain(c.kubelet_config_key.take())),
        ]);
        done(&c, "ConfigMapNodeConfigSource")?;
        Ok(v)
    })?;
    done(&s, "NodeConfigSource")?;
    Ok(obj([("configMap", config_map)]))
}

fn node_status(mut s: core::NodeStatus) -> R {
    let conditions = list(take(&mut s.conditions), |mut c| {
        let v = obj([
            ("type", plain(c.r#type.take())),
            ("status", plain(c.status.take())),
            ("lastHeartbeatTime", time(c.last_heartbeat_time.take())),
            ("lastTransitionTime", time(c.last_transition_time.take())),
            ("reason", plain(c.reason.take())),
            ("message", plain(c.message.take())),
        ]);
        done(&c, "NodeCondition")?;
        Ok(v)
    })?;
    let addresses = list(take(&mut s.addresses), |mut a| {
        let v = obj([("type", plain(a.r#type.take())), ("address", plain(a.address.take()))]);
        done(&a, "NodeAddress")?;
        Ok(v)
    })?;
    let daemon_endpoints = nested(s.daemon_endpoints.take(), |mut d| {
        let kubelet = nested(d.kubelet_endpoint.take(), |mut e| {
            // Go writes `Port` (capitalised, as upstream spells it) even when zero.
            let v = obj([("Port", ptr(e.port.take()))]);
            done(&e, "DaemonEndpoint")?;
            Ok(v)
        })?;
        done(&d, "NodeDaemonEndpoints")?;
        Ok(obj([("kubeletEndpoint", kubelet)]))
    })?;
    let images = list(take(&mut s.images), |mut i| {
        let v = obj([
            ("names", strings(take(&mut i.names))),
            ("sizeBytes", number(i.size_bytes.take())),
        ]);
        done(&i, "ContainerImage")?;
        Ok(v)
    })?;
    let attached = list(take(&mut s.volumes_attached), |mut a| {
        let v = obj([("name", plain(a.name.take())), ("devicePath", plain(a.device_path.take()))]);
        done(&a, "AttachedVolume")?;
        Ok(v)
    })?;
    let config = nested(s.config.take(), |mut c| {
        let v = obj([
            ("assigned", nested(c.assigned.take(), node_config_source)?),
            ("active", nested(c.active.take(), node_config_source)?),
            ("lastKnownGood", nested(c.last_known_good.take(), node_config_source)?),
            ("error", plain(c.error.take())),
        ]);
        done(&c, "NodeConfigStatus")?;
        Ok(v)
    })?;
    let handlers = list(take(&mut s.runtime_handlers), |mut h| {
        let features = nested(h.features.take(), |mut f| {
            let v = obj([
                ("recursiveReadOnlyMounts", ptr(f.recursive_read_only_mounts.take())),
                ("userNamespaces", ptr(f.user_namespaces.take())),
            ]);
            done(&f, "NodeRuntimeHandlerFeatures")?;
            Ok(v)
        })?;
        let v = obj([("name", plain(h.name.take())), ("features", features)]);
        done(&h, "NodeRuntimeHandler")?;
        Ok(v)
    })?;
    let features = nested(s.features.take(), |mut f| {
        let v = obj([("supplementalGroupsPolicy", ptr(f.supplemental_groups_policy.take()))]);
        done(&f, "NodeFeatures")?;
        Ok(v)
    })?;
    let v = obj([
        ("capacity", quantities(take(&mut s.capacity))),
        ("allocatable", quantities(take(&mut s.allocatable))),
        ("phase", plain(s.phase.take())),
        ("conditions", conditions),
        ("addresses", addresses),
        ("daemonEndpoints", daemon_endpoints),
        ("nodeInfo", nested(s.node_info.take(), node_system_info)?),
        ("images", images),
        ("volumesInUse", strings(take(&mut s.volumes_in_use))),
        ("volumesAttached", attached),
        ("config", config),
        ("runtimeHandlers", handlers),
        ("features", features),
        ("declaredFeatures", strings(take(&mut s.declared_features))),
    ]);
    done(&s, "NodeStatus")?;
    Ok(v)
}

fn node_system_info(mut i: core::NodeSystemInfo) -> R {
    let swap = nested(i.swap.take(), |mut w| {
        let v = obj([("capacity", ptr(w.capacity.take()))]);
        done(&w, "NodeSwapStatus")?;
        Ok(v)
    })?;
    let v = obj([
        ("machineID", plain(i.machine_id.take())),
        ("systemUUID", plain(i.system_uuid.take())),
        ("bootID", plain(i.boot_id.take())),
        ("kernelVersion", plain(i.kernel_version.take())),
        ("osImage", plain(i.os_image.take())),
        ("containerRuntimeVersion", plain(i.container_runtime_version.take())),
        ("kubeletVersion", plain(i.kubelet_version.take())),
        ("kubeProxyVersion", plain(i.kube_proxy_version.take())),
        ("operatingSystem", plain(i.operating_system.take())),
        ("architecture", plain(i.architecture.take())),
        ("swap", swap),
    ]);
    done(&i, "NodeSystemInfo")?;
    Ok(v)
}

/// `v1` `Event`, as client-go's core event recorder writes it.
pub(super) fn event(mut e: core::Event) -> R {
    let series = nested(e.series.take(), |mut s| {
        let v = obj([
            ("count", number(s.count.take())),
            ("lastObservedTime", micro_time(s.last_observed_time.take())),
        ]);
        done(&s, "EventSeries")?;
        Ok(v)
    })?;
    let v = obj([
        ("metadata", object_meta(e.metadata.take())?),
        ("involvedObject", nested(e.involved_object.take(), object_reference)?),
        ("reason", plain(e.reason.take())),
        ("message", plain(e.message.take())),
        ("source", nested(e.source.take(), event_source)?),
        ("firstTimestamp", time(e.first_timestamp.take())),
        ("lastTimestamp", time(e.last_timestamp.take())),
        ("count", number(e.count.take())),
        ("type", plain(e.r#type.take())),
        ("eventTime", micro_time(e.event_time.take())),
        ("series", series),
        ("action", plain(e.action.take())),
        ("related", nested(e.related.take(), object_reference)?),
        ("reportingComponent", plain(e.reporting_component.take())),
        ("reportingInstance", plain(e.reporting_instance.take())),
    ]);
    done(&e, "Event")?;
    Ok(v)
}

pub(super) fn endpoints(mut e: core::Endpoints) -> R {
    let v = obj([
        ("metadata", object_meta(e.metadata.take())?),
        ("subsets", list(take(&mut e.subsets), endpoint_subset)?),
    ]);
    done(&e, "Endpoints")?;
    Ok(v)
}

fn endpoint_subset(mut s: core::EndpointSubset) -> R {
    let ports = list(take(&mut s.ports), |mut p| {
        let v = obj([
            ("name", plain(p.name.take())),
            // Required: kept even when zero, so validation can say so.
            ("port", ptr(p.port.take())),
            ("protocol", plain(p.protocol.take())),
            ("appProtocol", ptr(p.app_protocol.take())),
        ]);
        done(&p, "EndpointPort")?;
        Ok(v)
    })?;
    let v = obj([
        ("addresses", list(take(&mut s.addresses), endpoint_address)?),
        ("notReadyAddresses", list(take(&mut s.not_ready_addresses), endpoint_address)?),
        ("ports", ports),
    ]);
    done(&s, "EndpointSubset")?;
    Ok(v)
}

fn endpoint_address(mut a: core::EndpointAddress) -> R {
    let v = obj([
        ("ip", plain(a.ip.take())),
        ("hostname", plain(a.hostname.take())),
        ("nodeName", ptr(a.node_name.take())),
        ("targetRef", nested(a.target_ref.take(), object_reference)?),
    ]);
    done(&a, "EndpointAddress")?;
    Ok(v)
}
