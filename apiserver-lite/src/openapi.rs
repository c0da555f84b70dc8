//! OpenAPI v3, as upstream serves it. `/openapi/v3` lists one document per served group
//! version, each at a `serverRelativeURL` carrying the document's hash. A document has a path
//! per kind, with its operations (each tagged `x-kubernetes-group-version-kind`, and with the
//! `fieldValidation` parameter kubectl looks for before it trusts the server to validate), and
//! under `components.schemas` the kinds' schemas with every schema they reference, from
//! k8s-openapi's (upstream's own descriptions), shaped as upstream's: a reference with a
//! description beside it is an `allOf` of the reference. The top-level schema of a kind
//! carries `x-kubernetes-group-version-kind` as upstream's does (that is how `kubectl explain`
//! finds it), and does not require `metadata`, which k8s-openapi's types always have.
//!
//! A PATCH operation has no request body. kubectl's client-side apply reads a body offering
//! `application/strategic-merge-patch+json` as leave to build its patches from these schemas,
//! which lack upstream's patch merge keys; without one it uses its compiled-in types, as it
//! always has against this server.
//!
//! The documents depend on the binary alone: built on the first request, then kept serialized.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

use crate::discovery::KUBE_MINOR;
use crate::resources::{self, Backing, RESOURCES};

/// A kind's schema, added to a generator's definitions; the reference to it is returned.
pub type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

/// [`SchemaOf`] for a typed object.
pub fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// Where a document's schemas are, as its references name them.
const SCHEMAS: &str = "#/components/schemas/";

/// The served documents, serialized.
#[derive(Debug)]
pub struct Documents {
    root: Bytes,
    /// By `api/v1` or `apis/<group>/<version>`.
    by_path: BTreeMap<String, Bytes>,
}

/// `api/<version>` for the core group, `apis/<group>/<version>` for the others.
fn path_of(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

impl Documents {
    /// The documents, built on first use.
    pub fn get() -> &'static Documents {
        static DOCUMENTS: OnceLock<Documents> = OnceLock::new();
        DOCUMENTS.get_or_init(Documents::build)
    }

    fn build() -> Documents {
        let mut paths = serde_json::Map::new();
        let mut by_path = BTreeMap::new();
        for (g, v) in resources::group_versions() {
            let Some(doc) = document(g, v) else { continue };
            let key = path_of(g, v);
            let bytes = Bytes::from(doc.to_string());
            let url = format!("/openapi/v3/{key}?hash={}", hash(&bytes));
            paths.insert(key.clone(), json!({"serverRelativeURL": url}));
            by_path.insert(key, bytes);
        }
        let root = Bytes::from(json!({"paths": paths}).to_string());
        Documents { root, by_path }
    }

    /// `/openapi/v3`.
    pub fn root(&self) -> Bytes {
        self.root.clone()
    }

    /// The document of a group version, if it is served.
    pub fn group_version(&self, group: &str, version: &str) -> Option<Bytes> {
        self.by_path.get(&path_of(group, version)).cloned()
    }
}

/// A stable hash of a document, for `serverRelativeURL`'s `hash=` (FNV-1a).
fn hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// The OpenAPI v3 document of a group version; `None` if none of its kinds is served.
pub fn document(group: &str, version: &str) -> Option<Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut paths = serde_json::Map::new();
    // The definition of each kind's schema, and the kind's group-version-kind.
    let mut kinds: Vec<(String, Value)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| r.group == group && r.version == version) {
        let base = format!("/{}", path_of(group, version));
        let path = match (r.backing != Backing::Review, r.namespaced) {
            (false, _) => format!("{base}/{}", r.name),
            (true, true) => format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.name),
            (true, false) => format!("{base}/{}/{{name}}", r.name),
        };
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ]);
        let op = |verb: &str| json!({"operationId": format!("{verb}{}", r.kind), "x-kubernetes-action": verb, "x-kubernetes-group-version-kind": gvk, "parameters": params, "responses": {"200": {"description": "OK"}}});
        let ops = match r.backing {
            Backing::Store => {
                json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")})
            }
            Backing::Review => json!({"post": op("post")}),
            Backing::Metrics => json!({"get": op("get")}),
        };
        paths.insert(path, ops);
        if let Some(schema_of) = r.strategy.schema {
            let reference = schema_of(&mut generator);
            let name =
                reference.get("$ref").and_then(Value::as_str).and_then(|s| s.strip_prefix(SCHEMAS));
            if let Some(name) = name {
                kinds.push((name.to_owned(), gvk));
            }
        }
    }
    if paths.is_empty() {
        return None;
    }
    let mut schemas = generator.take_definitions(true);
    for (name, gvk) in kinds {
        if let Some(Value::Object(schema)) = schemas.get_mut(&name) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
            // k8s-openapi's objects always have metadata; upstream's schemas do not require it.
            if let Some(Value::Array(required)) = schema.get_mut("required") {
                required.retain(|f| f != "metadata");
                if required.is_empty() {
                    schema.remove("required");
                }
            }
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBE_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests;
