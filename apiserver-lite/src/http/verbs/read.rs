//! get, list and watch.

use hyper::Response;
use serde_json::{Value, json};

use super::super::body::{self, Body};
use super::super::watch::{self, WatchFormat};
use super::{Call, forbidden_option, list_options, selection};
use crate::errors::ApiError;
use crate::registry::{ListOptions, WatchOptions, WatchStart};
use crate::request::Query;
use crate::resources::ResourceType;
use crate::table::{self, IncludeObject};

/// The object (or its status: the same object), or its Table.
pub(in crate::http) fn get(c: &Call<'_>, n: &str) -> Result<Response<Body>, ApiError> {
    let (r, q) = (c.r, c.q);
    let obj = c.state.registry.get(r, c.ns, n)?;
    if table::wants_table(c.accept) {
        let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
        return Ok(body::json(
            200,
            &table::table(r, &[obj], IncludeObject::parse(q.get("includeObject")), meta, true),
        ));
    }
    Ok(body::json(200, &obj))
}

/// A page of the collection, or its Table.
pub(in crate::http) fn list(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (r, q) = (c.r, c.q);
    let page = c.state.registry.list(r, c.ns, &list_options(r, q)?)?;
    let mut meta = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(page.remaining.unwrap_or(0));
    }
    if table::wants_table(c.accept) {
        let objects: Vec<Value> =
            page.items.iter().filter_map(|b| serde_json::from_slice(b).ok()).collect();
        let t = table::table(r, &objects, IncludeObject::parse(q.get("includeObject")), meta, true);
        return Ok(body::json(200, &t));
    }
    // Items are written as stored: no re-encoding of the whole collection.
    let mut out = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
        r.list_kind(),
        r.group_version(),
        meta
    )
    .into_bytes();
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    Ok(body::bytes_response(200, "application/json", out))
}

/// A watch from where the query says, streamed.
pub(in crate::http) fn watch(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let (r, q, registry) = (c.r, c.q, &c.state.registry);
    let start = if q.flag("sendInitialEvents") {
        WatchStart::InitialEvents
    } else {
        match q.get("resourceVersion").filter(|v| !v.is_empty() && *v != "0") {
            None => WatchStart::Now,
            Some(v) => WatchStart::After(
                v.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}")))?,
            ),
        }
    };
    let opts = WatchOptions {
        start,
        list: watch_selection(r, q)?,
        bookmarks: q.flag("allowWatchBookmarks"),
    };
    let stream = registry.watch(r, c.ns, opts)?;
    let timeout = match q.number("timeoutSeconds")? {
        Some(s) if s > 0 => std::time::Duration::from_secs(s.unsigned_abs()),
        _ => watch::default_timeout(),
    };
    let fmt = WatchFormat {
        table: table::wants_table(c.accept).then(|| IncludeObject::parse(q.get("includeObject"))),
        bookmarks: q.flag("allowWatchBookmarks"),
        timeout,
    };
    let store = registry.store.clone();
    Ok(watch::respond(r, stream, fmt, move || store.revision()))
}

/// A watch's options: only the selectors; where it starts is its [`WatchStart`]. A match on
/// the resource version belongs to WatchList requests (`sendInitialEvents`), as upstream checks.
fn watch_selection(r: &ResourceType, q: &Query) -> Result<ListOptions, ApiError> {
    let rv_match = q.get("resourceVersionMatch").filter(|m| !m.is_empty());
    match (q.flag("sendInitialEvents"), rv_match) {
        (false, Some(_)) => {
            return Err(forbidden_option(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        (true, m) if m != Some("NotOlderThan") => {
            return Err(forbidden_option(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        _ => {}
    }
    selection(r, q)
}
