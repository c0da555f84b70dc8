//! Pod templates and specs: containers (ports, env, resources, mounts, probes, lifecycle,
//! security context), the common volume sources, tolerations, the pod security context.
//! Anything else a pod spec can hold (affinity, topology spread, the other volume types, …) is
//! refused by the leftover check, with the advice to send JSON.

use k8s_pb::api::core::v1 as core;
use serde_json::Value;

use super::meta::{int_or_string, object_meta, quantities, quantity};
use super::{R, done, flag, list, nested, number, obj, plain, ptr, string_map, strings};

use std::mem::take;

pub(super) fn pod_template(t: Option<core::PodTemplateSpec>) -> R {
    nested(t, |mut t| {
        let v = obj([
            ("metadata", object_meta(t.metadata.take())?),
            ("spec", nested(t.spec.take(), pod_spec)?),
        ]);
        done(&t, "PodTemplateSpec")?;
        Ok(v)
    })
}

pub(super) fn pod_spec(mut s: core::PodSpec) -> R {
    let v = obj([
        ("volumes", list(take(&mut s.volumes), volume)?),
        ("initContainers", list(take(&mut s.init_containers), container)?),
        ("containers", list(take(&mut s.containers), container)?),
        ("restartPolicy", plain(s.restart_policy.take())),
        ("terminationGracePeriodSeconds", ptr(s.termination_grace_period_seconds.take())),
        ("activeDeadlineSeconds", ptr(s.active_deadline_seconds.take())),
        ("dnsPolicy", plain(s.dns_policy.take())),
        ("nodeSelector", string_map(take(&mut s.node_selector))),
        ("serviceAccountName", plain(s.service_account_name.take())),
        ("serviceAccount", plain(s.service_account.take())),
        ("automountServiceAccountToken", ptr(s.automount_service_account_token.take())),
        ("nodeName", plain(s.node_name.take())),
        ("hostNetwork", flag(s.host_network.take())),
        ("hostPID", flag(s.host_pid.take())),
        ("hostIPC", flag(s.host_ipc.take())),
        ("shareProcessNamespace", ptr(s.share_process_namespace.take())),
        ("securityContext", nested(s.security_context.take(), pod_security_context)?),
        ("imagePullSecrets", list(take(&mut s.image_pull_secrets), local_reference)?),
        ("hostname", plain(s.hostname.take())),
        ("subdomain", plain(s.subdomain.take())),
        ("schedulerName", plain(s.scheduler_name.take())),
        ("tolerations", list(take(&mut s.tolerations), toleration)?),
        ("priorityClassName", plain(s.priority_class_name.take())),
        ("priority", ptr(s.priority.take())),
        ("runtimeClassName", ptr(s.runtime_class_name.take())),
        ("enableServiceLinks", ptr(s.enable_service_links.take())),
        ("preemptionPolicy", ptr(s.preemption_policy.take())),
        ("setHostnameAsFQDN", ptr(s.set_hostname_as_fqdn.take())),
        ("hostUsers", ptr(s.host_users.take())),
    ]);
    done(&s, "PodSpec")?;
    Ok(v)
}

pub(super) fn local_reference(mut r: core::LocalObjectReference) -> R {
    let v = obj([("name", plain(r.name.take()))]);
    done(&r, "LocalObjectReference")?;
    Ok(v)
}

fn toleration(mut t: core::Toleration) -> R {
    let v = obj([
        ("key", plain(t.key.take())),
        ("operator", plain(t.operator.take())),
        ("value", plain(t.value.take())),
        ("effect", plain(t.effect.take())),
        ("tolerationSeconds", ptr(t.toleration_seconds.take())),
    ]);
    done(&t, "Toleration")?;
    Ok(v)
}

fn pod_security_context(mut c: core::PodSecurityContext) -> R {
    let v = obj([
        ("runAsUser", ptr(c.run_as_user.take())),
        ("runAsGroup", ptr(c.run_as_group.take())),
        ("runAsNonRoot", ptr(c.run_as_non_root.take())),
        (
            "supplementalGroups",
            if c.supplemental_groups.is_empty() {
                Value::Null
            } else {
                take(&mut c.supplemental_groups).into()
            },
        ),
        ("fsGroup", ptr(c.fs_group.take())),
        ("fsGroupChangePolicy", ptr(c.fs_group_change_policy.take())),
    ]);
    done(&c, "PodSecurityContext")?;
    Ok(v)
}

fn security_context(mut c: core::SecurityContext) -> R {
    let capabilities = nested(c.capabilities.take(), |mut k| {
        let v = obj([("add", strings(take(&mut k.add))), ("drop", strings(take(&mut k.drop)))]);
        done(&k, "Capabilities")?;
        Ok(v)
    })?;
    let v = obj([
        ("capabilities", capabilities),
        ("privileged", ptr(c.privileged.take())),
        ("runAsUser", ptr(c.run_as_user.take())),
        ("runAsGroup", ptr(c.run_as_group.take())),
        ("runAsNonRoot", ptr(c.run_as_non_root.take())),
        ("readOnlyRootFilesystem", ptr(c.read_only_root_filesystem.take())),
        ("allowPrivilegeEscalation", ptr(c.allow_privilege_escalation.take())),
        ("procMount", ptr(c.proc_mount.take())),
    ]);
    done(&c, "SecurityContext")?;
    Ok(v)
}

pub(super) fn container(mut c: core::Container) -> R {
    let resources = nested(c.resources.take(), |mut r| {
        let v = obj([
            ("limits", quantities(take(&mut r.limits))),
            ("requests", quantities(take(&mut r.requests))),
        ]);
        done(&r, "ResourceRequirements")?;
        Ok(v)
    })?;
    let v = obj([
        ("name", plain(c.name.take())),
        ("image", plain(c.image.take())),
        ("command", strings(take(&mut c.command))),
        ("args", strings(take(&mut c.args))),
        ("workingDir", plain(c.working_dir.take())),
        ("ports", list(take(&mut c.ports), port)?),
        ("envFrom", list(take(&mut c.env_from), env_from)?),
        ("env", list(take(&mut c.env), env)?),
        ("resources", resources),
        ("restartPolicy", ptr(c.restart_policy.take())),
        ("volumeMounts", list(take(&mut c.volume_mounts), volume_mount)?),
        ("livenessProbe", nested(c.liveness_probe.take(), probe)?),
        ("readinessProbe", nested(c.readiness_probe.take(), probe)?),
        ("startupProbe", nested(c.startup_probe.take(), probe)?),
        ("lifecycle", nested(c.lifecycle.take(), lifecycle)?),
        ("terminationMessagePath", plain(c.termination_message_path.take())),
        ("terminationMessagePolicy", plain(c.termination_message_policy.take())),
        ("imagePullPolicy", plain(c.image_pull_policy.take())),
        ("securityContext", nested(c.security_context.take(), security_context)?),
        ("stdin", flag(c.stdin.take())),
        ("stdinOnce", flag(c.stdin_once.take())),
        ("tty", flag(c.tty.take())),
    ]);
    done(&c, "Container")?;
    Ok(v)
}

fn port(mut p: core::ContainerPort) -> R {
    let v = obj([
        ("name", plain(p.name.take())),
        ("hostPort", number(p.host_port.take())),
        // Required: kept even when zero, so validation can say so.
        ("containerPort", ptr(p.container_port.take())),
        ("protocol", plain(p.protocol.take())),
        ("hostIP", plain(p.host_ip.take())),
    ]);
    done(&p, "ContainerPort")?;
    Ok(v)
}

fn key_ref(
    name: Option<core::LocalObjectReference>,
    key: Option<String>,
    optional: Option<bool>,
) -> R {
    Ok(obj([
        ("name", nested(name, |mut r| Ok(plain(r.name.take())))?),
        ("key", plain(key)),
        ("optional", ptr(optional)),
    ]))
}

fn env(mut e: core::EnvVar) -> R {
    let value_from = nested(e.value_from.take(), |mut s| {
        let v = obj([
            (
                "fieldRef",
                nested(s.field_ref.take(), |mut f| {
                    let v = obj([
                        ("apiVersion", plain(f.api_version.take())),
                        ("fieldPath", plain(f.field_path.take())),
                    ]);
                    done(&f, "ObjectFieldSelector")?;
                    Ok(v)
                })?,
            ),
            (
                "resourceFieldRef",
                nested(s.resource_field_ref.take(), |mut f| {
                    let v = obj([
                        ("containerName", plain(f.container_name.take())),
                        ("resource", plain(f.resource.take())),
                        ("divisor", quantity(f.divisor.take())),
                    ]);
                    done(&f, "ResourceFieldSelector")?;
                    Ok(v)
                })?,
            ),
            (
                "configMapKeyRef",
                nested(s.config_map_key_ref.take(), |mut k| {
                    let v =
                        key_ref(k.local_object_reference.take(), k.key.take(), k.optional.take())?;
                    done(&k, "ConfigMapKeySelector")?;
                    Ok(v)
                })?,
            ),
            (
                "secretKeyRef",
                nested(s.secret_key_ref.take(), |mut k| {
                    let v =
                        key_ref(k.local_object_reference.take(), k.key.take(), k.optional.take())?;
                    done(&k, "SecretKeySelector")?;
                    Ok(v)
                })?,
            ),
        ]);
        done(&s, "EnvVarSource")?;
        Ok(v)
    })?;
    let v = obj([
        ("name", plain(e.name.take())),
        ("value", plain(e.value.take())),
        ("valueFrom", value_from),
    ]);
    done(&e, "EnvVar")?;
    Ok(v)
}

fn env_from(mut e: core::EnvFromSource) -> R {
    let v = obj([
        ("prefix", plain(e.prefix.take())),
        (
            "configMapRef",
            nested(e.config_map_ref.take(), |mut r| {
                let name =
                    nested(r.local_object_reference.take(), |mut l| Ok(plain(l.name.take())))?;
                let v = obj([("name", name), ("optional", ptr(r.optional.take()))]);
                done(&r, "ConfigMapEnvSource")?;
                Ok(v)
            })?,
        ),
        (
            "secretRef",
            nested(e.secret_ref.take(), |mut r| {
                let name =
                    nested(r.local_object_reference.take(), |mut l| Ok(plain(l.name.take())))?;
                let v = obj([("name", name), ("optional", ptr(r.optional.take()))]);
                done(&r, "SecretEnvSource")?;
                Ok(v)
            })?,
        ),
    ]);
    done(&e, "EnvFromSource")?;
    Ok(v)
}

fn volume_mount(mut m: core::VolumeMount) -> R {
    let v = obj([
        ("name", plain(m.name.take())),
        ("readOnly", flag(m.read_only.take())),
        ("recursiveReadOnly", ptr(m.recursive_read_only.take())),
        ("mountPath", plain(m.mount_path.take())),
        ("subPath", plain(m.sub_path.take())),
        ("mountPropagation", ptr(m.mount_propagation.take())),
        ("subPathExpr", plain(m.sub_path_expr.take())),
    ]);
    done(&m, "VolumeMount")?;
    Ok(v)
}

fn handler_parts(
    exec: Option<core::ExecAction>,
    http_get: Option<core::HttpGetAction>,
    tcp: Option<core::TcpSocketAction>,
) -> R<[(&'static str, Value); 3]> {
    let exec = nested(exec, |mut e| {
        let v = obj([("command", strings(take(&mut e.command)))]);
        done(&e, "ExecAction")?;
        Ok(v)
    })?;
    let http = nested(http_get, |mut h| {
        let headers = list(take(&mut h.http_headers), |mut x| {
            let v = obj([("name", plain(x.name.take())), ("value", plain(x.value.take()))]);
            done(&x, "HTTPHeader")?;
            Ok(v)
        })?;
        let v = obj([
            ("path", plain(h.path.take())),
            ("port", int_or_string(h.port.take())),
            ("host", plain(h.host.take())),
            ("scheme", plain(h.scheme.take())),
            ("httpHeaders", headers),
        ]);
        done(&h, "HTTPGetAction")?;
        Ok(v)
    })?;
    let tcp = nested(tcp, |mut t| {
        let v = obj([("port", int_or_string(t.port.take())), ("host", plain(t.host.take()))]);
        done(&t, "TCPSocketAction")?;
        Ok(v)
    })?;
    Ok([("exec", exec), ("httpGet", http), ("tcpSocket", tcp)])
}

fn probe(mut p: core::Probe) -> R {
    let mut h = p.handler.take().unwrap_or_default();
    let [exec, http, tcp] = handler_parts(h.exec.take(), h.http_get.take(), h.tcp_socket.take())?;
    done(&h, "ProbeHandler")?;
    let v = obj([
        exec,
        http,
        tcp,
        ("initialDelaySeconds", number(p.initial_delay_seconds.take())),
        ("timeoutSeconds", number(p.timeout_seconds.take())),
        ("periodSeconds", number(p.period_seconds.take())),
        ("successThreshold", number(p.success_threshold.take())),
        ("failureThreshold", number(p.failure_threshold.take())),
        ("terminationGracePeriodSeconds", ptr(p.termination_grace_period_seconds.take())),
    ]);
    done(&p, "Probe")?;
    Ok(v)
}

fn lifecycle(mut l: core::Lifecycle) -> R {
    let handler = |h: Option<core::LifecycleHandler>| {
        nested(h, |mut h| {
            let [exec, http, tcp] =
                handler_parts(h.exec.take(), h.http_get.take(), h.tcp_socket.take())?;
            done(&h, "LifecycleHandler")?;
            Ok(obj([exec, http, tcp]))
        })
    };
    let v = obj([
        ("postStart", handler(l.post_start.take())?),
        ("preStop", handler(l.pre_stop.take())?),
        ("stopSignal", ptr(l.stop_signal.take())),
    ]);
    done(&l, "Lifecycle")?;
    Ok(v)
}

fn key_to_path(mut k: core::KeyToPath) -> R {
    let v = obj([
        ("key", plain(k.key.take())),
        ("path", plain(k.path.take())),
        ("mode", ptr(k.mode.take())),
    ]);
    done(&k, "KeyToPath")?;
    Ok(v)
}

fn volume(mut v: core::Volume) -> R {
    let mut src = v.volume_source.take().unwrap_or_default();
    let host_path = nested(src.host_path.take(), |mut h| {
        let v = obj([("path", plain(h.path.take())), ("type", ptr(h.r#type.take()))]);
        done(&h, "HostPathVolumeSource")?;
        Ok(v)
    })?;
    let empty_dir = nested(src.empty_dir.take(), |mut e| {
        let v =
            obj([("medium", plain(e.medium.take())), ("sizeLimit", quantity(e.size_limit.take()))]);
        done(&e, "EmptyDirVolumeSource")?;
        Ok(v)
    })?;
    let secret = nested(src.secret.take(), |mut s| {
        let v = obj([
            ("secretName", plain(s.secret_name.take())),
            ("items", list(take(&mut s.items), key_to_path)?),
            ("defaultMode", ptr(s.default_mode.take())),
            ("optional", ptr(s.optional.take())),
        ]);
        done(&s, "SecretVolumeSource")?;
        Ok(v)
    })?;
    let config_map = nested(src.config_map.take(), |mut c| {
        let name = nested(c.local_object_reference.take(), |mut l| Ok(plain(l.name.take())))?;
        let v = obj([
            ("name", name),
            ("items", list(take(&mut c.items), key_to_path)?),
            ("defaultMode", ptr(c.default_mode.take())),
            ("optional", ptr(c.optional.take())),
        ]);
        done(&c, "ConfigMapVolumeSource")?;
        Ok(v)
    })?;
    let pvc = nested(src.persistent_volume_claim.take(), |mut p| {
        let v = obj([
            ("claimName", plain(p.claim_name.take())),
            ("readOnly", flag(p.read_only.take())),
        ]);
        done(&p, "PersistentVolumeClaimVolumeSource")?;
        Ok(v)
    })?;
    done(&src, "VolumeSource")?;
    let out = obj([
        ("name", plain(v.name.take())),
        ("hostPath", host_path),
        ("emptyDir", empty_dir),
        ("secret", secret),
        ("configMap", config_map),
        ("persistentVolumeClaim", pvc),
    ]);
    done(&v, "Volume")?;
    Ok(out)
}
