//! A pod's (or template's) volumes as kubectl describes them, one block per volume with its
//! source's type and fields. The sources are the ones apiserver-lite accepts; any other is
//! `<unknown>`, as kubectl prints a source it does not know.

use serde_json::Value;

use super::quantity::Quantity;
use super::writer::{LEVEL_0, LEVEL_1, LEVEL_2, LEVEL_3, PrefixWriter};
use super::{fields, flag, has, int, items, s};

/// `describeVolumes`.
pub fn describe_volumes(w: &mut PrefixWriter, volumes: &[Value], space: &str) {
    if volumes.is_empty() {
        w.write(LEVEL_0, &format!("{space}Volumes:\t<none>\n"));
        return;
    }
    w.write(LEVEL_0, &format!("{space}Volumes:\n"));
    let indent = if space.is_empty() { "" } else { " " };
    for v in volumes {
        w.write(LEVEL_1, &format!("{indent}{}:\n", s(v, "/name")));
        let src = |k: &str| v.get(k).filter(|x| !x.is_null());
        if let Some(h) = src("hostPath") {
            let t = match s(h, "/type") {
                "" if !has(h, "/type") => "<none>",
                t => t,
            };
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tHostPath (bare host directory volume)\n    Path:\t{}\n    HostPathType:\t{t}\n",
                    s(h, "/path")
                ),
            );
        } else if let Some(e) = src("emptyDir") {
            let limit = e
                .get("sizeLimit")
                .and_then(Quantity::of)
                .filter(|q| q.nanos() > 0)
                .map_or_else(|| "<unset>".to_string(), |q| q.to_string());
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n    Medium:\t{}\n    SizeLimit:\t{limit}\n",
                    s(e, "/medium")
                ),
            );
        } else if let Some(sec) = src("secret") {
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tSecret (a volume populated by a Secret)\n    SecretName:\t{}\n    Optional:\t{}\n",
                    s(sec, "/secretName"),
                    flag(sec, "/optional")
                ),
            );
        } else if let Some(cm) = src("configMap") {
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tConfigMap (a volume populated by a ConfigMap)\n    Name:\t{}\n    Optional:\t{}\n",
                    s(cm, "/name"),
                    flag(cm, "/optional")
                ),
            );
        } else if let Some(nfs) = src("nfs") {
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tNFS (an NFS mount that lasts the lifetime of a pod)\n    Server:\t{}\n    Path:\t{}\n    ReadOnly:\t{}\n",
                    s(nfs, "/server"),
                    s(nfs, "/path"),
                    flag(nfs, "/readOnly")
                ),
            );
        } else if let Some(c) = src("persistentVolumeClaim") {
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)\n    ClaimName:\t{}\n    ReadOnly:\t{}\n",
                    s(c, "/claimName"),
                    flag(c, "/readOnly")
                ),
            );
        } else if let Some(e) = src("ephemeral") {
            w.write(LEVEL_2, "Type:\tEphemeralVolume (an inline specification for a volume that gets created and deleted with the pod)\n");
            if let Some(t) = e.get("volumeClaimTemplate").filter(|t| !t.is_null()) {
                w.nested(LEVEL_2, |w| claim_template(w, t));
            }
        } else if let Some(d) = src("downwardAPI") {
            w.write(
                LEVEL_2,
                "Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n",
            );
            for i in items(d, "/items") {
                if has(i, "/fieldRef") {
                    w.write(
                        LEVEL_3,
                        &format!("{} -> {}\n", s(i, "/fieldRef/fieldPath"), s(i, "/path")),
                    );
                }
                if has(i, "/resourceFieldRef") {
                    let r = s(i, "/resourceFieldRef/resource");
                    w.write(LEVEL_3, &format!("{r} -> {}\n", s(i, "/path")));
                }
            }
        } else if let Some(p) = src("projected") {
            w.write(
                LEVEL_2,
                "Type:\tProjected (a volume that contains injected data from multiple sources)\n",
            );
            for source in items(p, "/sources") {
                if let Some(sec) = source.get("secret").filter(|x| !x.is_null()) {
                    w.write(
                        LEVEL_2,
                        &format!(
                            "SecretName:\t{}\n    Optional:\t{}\n",
                            s(sec, "/name"),
                            flag(sec, "/optional")
                        ),
                    );
                } else if has(source, "/downwardAPI") {
                    w.write(LEVEL_2, "DownwardAPI:\ttrue\n");
                } else if let Some(cm) = source.get("configMap").filter(|x| !x.is_null()) {
                    w.write(
                        LEVEL_2,
                        &format!(
                            "ConfigMapName:\t{}\n    Optional:\t{}\n",
                            s(cm, "/name"),
                            flag(cm, "/optional")
                        ),
                    );
                } else if has(source, "/serviceAccountToken") {
                    let secs = int(source, "/serviceAccountToken/expirationSeconds");
                    w.write(LEVEL_2, &format!("TokenExpirationSeconds:\t{secs}\n"));
                }
            }
        } else if let Some(c) = src("csi") {
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tCSI (a Container Storage Interface (CSI) volume source)\n    Driver:\t{}\n    FSType:\t{}\n    ReadOnly:\t{}\n",
                    s(c, "/driver"),
                    s(c, "/fsType"),
                    flag(c, "/readOnly")
                ),
            );
            csi_attributes(w, c.get("volumeAttributes"));
        } else if let Some(i) = src("image") {
            w.write(
                LEVEL_2,
                &format!(
                    "Type:\tImage (a container image or OCI artifact)\n    Reference:\t{}\n    PullPolicy:\t{}\n",
                    s(i, "/reference"),
                    s(i, "/pullPolicy")
                ),
            );
        } else {
            w.write(LEVEL_1, "<unknown>\n");
        }
    }
}

fn csi_attributes(w: &mut PrefixWriter, attrs: Option<&Value>) {
    w.write(LEVEL_2, "VolumeAttributes:\t");
    let m = fields::string_map(attrs);
    if m.is_empty() {
        w.line("<none>");
        return;
    }
    for (i, (k, v)) in m.iter().enumerate() {
        if i != 0 {
            w.write(LEVEL_2, "");
            w.write(LEVEL_2, "\t");
        }
        let line = format!("{k}={v}");
        if line.len() > 140 {
            let mut end = 140;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            w.write(LEVEL_2, &format!("{}...\n", &line[..end]));
        } else {
            w.write(LEVEL_2, &format!("{line}\n"));
        }
    }
}

/// `printPersistentVolumeClaim` of an ephemeral volume's claim template (not a full claim).
fn claim_template(w: &mut PrefixWriter, t: &Value) {
    let class = t
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
        .unwrap_or_else(|| s(t, "/spec/storageClassName"));
    w.write(LEVEL_0, &format!("StorageClass:\t{class}\n"));
    w.write(LEVEL_0, &format!("Volume:\t{}\n", s(t, "/spec/volumeName")));
    fields::labels_multiline(w, "Labels", t.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", t.pointer("/metadata/annotations"));
    // A template has no status: a named volume shows a zero capacity, as kubectl's.
    let capacity = if s(t, "/spec/volumeName").is_empty() { "" } else { "0" };
    w.write(LEVEL_0, &format!("Capacity:\t{capacity}\n"));
    w.write(LEVEL_0, "Access Modes:\t\n");
    let mode = s(t, "/spec/volumeMode");
    if has(t, "/spec/volumeMode") {
        w.write(LEVEL_0, &format!("VolumeMode:\t{mode}\n"));
    }
    if let Some(d) = t.pointer("/spec/dataSource").filter(|d| !d.is_null()) {
        w.write(LEVEL_0, "DataSource:\n");
        if has(d, "/apiGroup") {
            w.write(LEVEL_1, &format!("APIGroup:\t{}\n", s(d, "/apiGroup")));
        }
        w.write(LEVEL_1, &format!("Kind:\t{}\n", s(d, "/kind")));
        w.write(LEVEL_1, &format!("Name:\t{}\n", s(d, "/name")));
    }
}
