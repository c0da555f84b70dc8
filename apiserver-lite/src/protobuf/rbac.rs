//! The `rbac.authorization.k8s.io/v1` kinds `kubectl create role`, `clusterrole`, `rolebinding`
//! and `clusterrolebinding` send as protobuf.

use k8s_pb::api::rbac::v1 as rbac;
use serde_json::Value;

use super::meta::{label_selector, object_meta};
use super::{R, done, list, message, nested, obj, plain, strings};

/// The object's JSON; `kind` is one of the four (the caller matched it).
pub(super) fn decode(kind: &str, raw: &[u8]) -> R {
    match kind {
        "Role" => role(message(raw)),
        "ClusterRole" => cluster_role(message(raw)),
        "RoleBinding" => role_binding(message(raw)),
        _ => cluster_role_binding(message(raw)),
    }
}

fn rule(mut r: rbac::PolicyRule) -> R {
    let v = obj([
        (
            "verbs",
            Value::Array(std::mem::take(&mut r.verbs).into_iter().map(Value::String).collect()),
        ),
        ("apiGroups", strings(std::mem::take(&mut r.api_groups))),
        ("resources", strings(std::mem::take(&mut r.resources))),
        ("resourceNames", strings(std::mem::take(&mut r.resource_names))),
        ("nonResourceURLs", strings(std::mem::take(&mut r.non_resource_ur_ls))),
    ]);
    done(&r, "PolicyRule")?;
    Ok(v)
}

fn rules(rs: Vec<rbac::PolicyRule>) -> R {
    // Go writes `rules` even when empty (no omitempty).
    Ok(list(rs, rule)?.as_array().map_or(Value::Array(Vec::new()), |a| Value::Array(a.clone())))
}

fn role(m: R<rbac::Role>) -> R {
    let mut m = m?;
    let v = obj([
        ("metadata", object_meta(m.metadata.take())?),
        ("rules", rules(std::mem::take(&mut m.rules))?),
    ]);
    done(&m, "Role")?;
    Ok(v)
}

fn cluster_role(m: R<rbac::ClusterRole>) -> R {
    let mut m = m?;
    let aggregation = nested(m.aggregation_rule.take(), |mut a| {
        let selectors =
            list(std::mem::take(&mut a.cluster_role_selectors), |s| label_selector(Some(s)))?;
        done(&a, "AggregationRule")?;
        Ok(obj([("clusterRoleSelectors", selectors)]))
    })?;
    let v = obj([
        ("metadata", object_meta(m.metadata.take())?),
        ("rules", rules(std::mem::take(&mut m.rules))?),
        ("aggregationRule", aggregation),
    ]);
    done(&m, "ClusterRole")?;
    Ok(v)
}

fn subject(mut s: rbac::Subject) -> R {
    let v = obj([
        ("kind", plain(s.kind.take())),
        ("apiGroup", plain(s.api_group.take())),
        ("name", plain(s.name.take())),
        ("namespace", plain(s.namespace.take())),
    ]);
    done(&s, "Subject")?;
    Ok(v)
}

fn role_ref(r: Option<rbac::RoleRef>) -> R {
    nested(r, |mut r| {
        let v = obj([
            ("apiGroup", plain(r.api_group.take())),
            ("kind", plain(r.kind.take())),
            ("name", plain(r.name.take())),
        ]);
        done(&r, "RoleRef")?;
        Ok(v)
    })
}

fn role_binding(m: R<rbac::RoleBinding>) -> R {
    let mut m = m?;
    let v = obj([
        ("metadata", object_meta(m.metadata.take())?),
        ("subjects", list(std::mem::take(&mut m.subjects), subject)?),
        ("roleRef", role_ref(m.role_ref.take())?),
    ]);
    done(&m, "RoleBinding")?;
    Ok(v)
}

fn cluster_role_binding(m: R<rbac::ClusterRoleBinding>) -> R {
    let mut m = m?;
    let v = obj([
        ("metadata", object_meta(m.metadata.take())?),
        ("subjects", list(std::mem::take(&mut m.subjects), subject)?),
        ("roleRef", role_ref(m.role_ref.take())?),
    ]);
    done(&m, "ClusterRoleBinding")?;
    Ok(v)
}
