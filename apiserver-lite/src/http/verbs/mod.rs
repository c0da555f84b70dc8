//! One handler per verb over a stored resource type, each handed the request's [`Call`] (what
//! [`handle`](super::resource::handle)'s prelude worked out once: the resource, namespace,
//! query, content types, write options, field manager, the user and their NodeRestriction):
//!
//! - [`read`]: get, list and watch;
//! - [`write`]: create, update, patch and apply (of the object or its `status`);
//! - [`delete`]: delete and deletecollection;
//! - [`scale`]: the `scale` subresource, through the kind's strategy;
//! - [`binding`]: a pod bound to a node (`pods/binding`);
//! - [`eviction`]: a pod evicted (`pods/eviction`).

pub(super) mod binding;
pub(super) mod delete;
pub(super) mod eviction;
pub(super) mod read;
pub(super) mod scale;
pub(super) mod write;

use api::validation::{ErrorList, FieldError, Path};
use hyper::Response;
use hyper::header::HeaderValue;
use serde_json::{Value, json};

use super::ApiState;
use super::body::Body;
use crate::admission::node_restriction::NodeRestriction;
use crate::auth::User;
use crate::errors::ApiError;
use crate::registry::{ListAt, ListOptions, WriteOptions};
use crate::request::Query;
use crate::resources::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};

/// What every verb's handler needs of the request, worked out once.
pub(in crate::http) struct Call<'a> {
    pub state: &'a ApiState,
    pub user: &'a User,
    pub r: &'static ResourceType,
    pub ns: Option<&'a str>,
    pub q: &'a Query,
    /// The `Accept` header (a Table is asked for there).
    pub accept: &'a str,
    pub content_type: Option<&'a str>,
    pub write: WriteOptions,
    /// `fieldManager`, else the User-Agent up to its first slash.
    pub manager: &'a str,
    pub restriction: NodeRestriction<'a>,
}

pub(in crate::http) fn with_warnings(
    mut resp: Response<Body>,
    warnings: &[String],
) -> Response<Body> {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {:?}", w)) {
            resp.headers_mut().append("Warning", v);
        }
    }
    resp
}

fn success(r: &ResourceType, name: &str, uid: &Value) -> Value {
    let mut details = json!({"name": name, "kind": r.name, "uid": uid});
    if !r.group.is_empty() {
        details["group"] = json!(r.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// A list's options: selectors, paging, and the revision it reads.
fn list_options(r: &ResourceType, q: &Query) -> Result<ListOptions, ApiError> {
    if q.flag("sendInitialEvents") {
        return Err(forbidden_option(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    let limit =
        q.number("limit")?.filter(|l| *l > 0).map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let continue_from = q.get("continue").filter(|c| !c.is_empty()).map(str::to_string);
    let at = ListAt::parse(
        q.get("resourceVersion"),
        q.get("resourceVersionMatch"),
        limit.is_some(),
        continue_from.is_some(),
    )?;
    Ok(ListOptions { limit, continue_from, at, ..selection(r, q)? })
}

fn selection(r: &ResourceType, q: &Query) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        labels: LabelSelector::parse(q.get("labelSelector").unwrap_or_default())?,
        fields: FieldSelector::parse(q.get("fieldSelector").unwrap_or_default(), r)?,
        ..ListOptions::default()
    })
}

fn forbidden_option(field: &str, detail: &str) -> ApiError {
    let mut errors = ErrorList::default();
    errors.push(FieldError::forbidden(&Path::root(field), detail));
    ApiError::invalid_list_options(&errors)
}

/// A JSON patch body, refused in upstream's words.
fn patch_body(raw: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(raw)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))
}
