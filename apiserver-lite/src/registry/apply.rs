//! Server-side apply over the store: the configuration checked as upstream checks it (its type,
//! fields the type does not have, list keys), merged into the live object by the field
//! manager, created when absent (the resource itself only), and then through the same rules as
//! any update.

use serde_json::{Value, json};

use super::{Registry, Track, WriteOptions, field_manager};
use crate::errors::ApiError;
use crate::managedfields::path::{Path, PathElement};
use crate::managedfields::{ApplyError, FieldManager, schema, typed};
use crate::objects;
use crate::resources::ResourceType;

/// One apply: who applies, and whether conflicts are overridden.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    pub manager: &'a str,
    pub force: bool,
    pub write: WriteOptions,
}

/// What an apply did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub object: Value,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// `ns/name; group/version, Kind=Kind`, as upstream names the applied object in its errors.
fn gvk_nn(config: &Value) -> String {
    let m = &config["metadata"];
    let api_version = config["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!(
        "{}/{}; {group}/{version}, Kind={}",
        m["namespace"].as_str().unwrap_or_default(),
        m["name"].as_str().unwrap_or_default(),
        config["kind"].as_str().unwrap_or_default()
    )
}

fn typed_error(config: &Value, detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "failed to create typed patch object ({}): {detail}",
        gvk_nn(config)
    ))
}

/// The error an apply answers with: 409 with each conflict as a cause, 400 otherwise.
pub fn apply_error(config: &Value, e: ApplyError) -> ApiError {
    match e {
        ApplyError::Conflicts(c) => ApiError {
            details: Some(json!({"causes": c.causes()})),
            ..ApiError::new(409, "Conflict", c.to_string())
        },
        ApplyError::BadRequest(m) => ApiError::bad_request(m),
        ApplyError::Typed(t) => typed_error(config, t),
        ApplyError::Managed(m) => ApiError::internal(ApplyError::Managed(m).to_string()),
    }
}

/// A decoder's dotted path (`spec.containers[0].comand`) as a field path through `v`
/// (`.spec.containers[name="web"].comand`).
fn field_path(v: &Value, dotted: &str) -> Path {
    let mut path = Path::default();
    let mut at = Some(v);
    for token in dotted.split('.') {
        let (name, indexes) = token.split_once('[').map_or((token, ""), |(n, rest)| (n, rest));
        path.0.push(PathElement::field(name));
        at = at.and_then(|v| v.get(name));
        for i in indexes.split('[').map(|s| s.trim_end_matches(']')).filter(|s| !s.is_empty()) {
            let i: usize = i.parse().unwrap_or_default();
            let items = at.and_then(Value::as_array);
            let item = items.and_then(|l| l.get(i));
            let pe = match (items, item) {
                (Some(l), Some(item)) => {
                    typed::item_element(schema::list_type(name, l.first()), i, item)
                        .unwrap_or_else(|_| PathElement::index(i))
                }
                _ => PathElement::index(i),
            };
            path.0.push(pe);
            at = item;
        }
    }
    path
}

/// Refuses a configuration that is no object of the type: upstream's typed conversion errors
/// (a wrong value type, a field the type does not have, list items without keys or twice).
fn check_config(r: &ResourceType, fm: &FieldManager, config: &Value) -> Result<(), ApiError> {
    fm.check_config(config).map_err(|e| apply_error(config, e))?;
    let (_, unknown) =
        objects::decode(r, config.clone()).map_err(|e| typed_error(config, e.message))?;
    if let Some(first) = unknown.first() {
        return Err(typed_error(
            config,
            format!("{}: field not declared in schema", field_path(config, first)),
        ));
    }
    typed::check(config).map_err(|e| typed_error(config, e))
}

impl Registry {
    /// Applies `config` to `name` (or its `status`/`scale` subresource, with a configuration of
    /// the parent's type), creating the object when it does not exist. `guard` decides on the
    /// (current, new) pair first, as for updates.
    #[allow(clippy::too_many_arguments)]
    pub async fn apply(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        name: &str,
        sub: Option<&str>,
        config: Value,
        opts: ApplyOptions<'_>,
        guard: impl Fn(Option<&Value>, &Value) -> Result<(), ApiError>,
    ) -> Result<Applied, ApiError> {
        let fm = field_manager(r, sub);
        check_config(r, &fm, &config)?;
        if let Some(given) =
            config["metadata"]["name"].as_str().filter(|n| !n.is_empty() && *n != name)
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let ApplyOptions { manager, force, write } = opts;
        if sub.is_none() && self.store.get(&r.key(ns, name)).is_none() {
            let mut new = fm
                .apply(&fm.empty_object(), &config, manager, force)
                .map_err(|e| apply_error(&config, e))?;
            new["metadata"]["name"] = json!(name);
            guard(None, &new)?;
            match self.create_tracked(r, ns, new, write, Track::Applied).await {
                Ok(c) => {
                    let (object, warnings) = (c.object, c.warnings);
                    return Ok(Applied { object, created: true, warnings });
                }
                // Created meanwhile: apply to what is there.
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => {}
                Err(e) => return Err(e),
            }
        }
        let (object, warnings) = self
            .update_tracked(r, ns, name, sub, write, Track::Applied, |old| {
                let new =
                    fm.apply(old, &config, manager, force).map_err(|e| apply_error(&config, e))?;
                guard(Some(old), &new)?;
                Ok(new)
            })
            .await?;
        Ok(Applied { object, created: false, warnings })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decoder_paths_become_field_paths_through_list_keys() {
        let v = json!({"spec": {"containers": [{"name": "web", "comand": ["x"]}]}});
        assert_eq!(
            field_path(&v, "spec.containers[0].comand").to_string(),
            r#".spec.containers[name="web"].comand"#
        );
        assert_eq!(field_path(&v, "extra").to_string(), ".extra");
        assert_eq!(field_path(&v, "spec.args[3]").to_string(), ".spec.args[3]");
    }

    #[test]
    fn errors_name_the_applied_object_as_upstream() {
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}});
        assert_eq!(
            typed_error(&config, ".spec.bogus: field not declared in schema").message,
            "failed to create typed patch object (default/web; apps/v1, Kind=Deployment): .spec.bogus: field not declared in schema"
        );
    }
}
