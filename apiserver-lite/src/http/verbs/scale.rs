//! The `scale` subresource: read, replaced or patched through the kind's strategy's
//! [`Scale`] (applies go through [`write::apply`](super::write::apply) with [`config`]).

use api::validation::{ErrorList, FieldError, NEGATIVE_MSG, Path};
use hyper::Response;
use hyper::body::Incoming;
use serde_json::Value;

use super::super::body::{self, Body};
use super::{Call, patch_body};
use crate::errors::ApiError;
use crate::kinds::scale::Scale;
use crate::patch::{self, PatchType};
use crate::resources::{ResourceType, Subresource};

/// The `scale` mapping of `r` (routing serves `scale` only for kinds that have one).
pub(super) fn of(r: &ResourceType) -> Result<Scale, ApiError> {
    r.strategy.scale.ok_or_else(ApiError::method_not_allowed)
}

pub(in crate::http) fn get(c: &Call<'_>, n: &str) -> Result<Response<Body>, ApiError> {
    Ok(body::json(200, &(of(c.r)?.of)(&c.state.registry.get(c.r, c.ns, n)?)))
}

/// A replaced Scale (`pt` none) or a patched one: its replicas written into the object.
pub(in crate::http) async fn write(
    c: &Call<'_>,
    n: &str,
    pt: Option<PatchType>,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let scale = of(c.r)?;
    let raw = body::read(incoming).await?;
    let body = match pt {
        Some(_) => patch_body(&raw)?,
        None => body::parse(&raw, c.content_type)?,
    };
    let sub = Some(Subresource::Scale.as_str());
    let (obj, _) = c
        .state
        .registry
        .update_with_as(c.r, c.ns, n, sub, c.write, c.manager, |old| {
            let wanted = match pt {
                Some(pt) => patch::apply(pt, &(scale.of)(old), &body)?,
                None => body.clone(),
            };
            let replicas = wanted["spec"]["replicas"]
                .as_i64()
                .ok_or_else(|| ApiError::bad_request("scale spec.replicas is required"))?;
            if replicas < 0 {
                let mut errs = ErrorList::default();
                let path = Path::root("spec").child("replicas");
                errs.push(FieldError::invalid(&path, replicas, NEGATIVE_MSG));
                return Err(ApiError::invalid_scale(n, &errs));
            }
            Ok((scale.with_replicas)(old, replicas))
        })
        .await?;
    Ok(body::json(200, &(scale.of)(&obj)))
}

/// An applied `autoscaling/v1` Scale as a configuration of its parent: its name and replicas.
pub(super) fn config(r: &ResourceType, name: &str, scale: &Value) -> Result<Value, ApiError> {
    let (api_version, kind) = (scale["apiVersion"].as_str(), scale["kind"].as_str());
    if (api_version, kind) != (Some("autoscaling/v1"), Some("Scale")) {
        let v = api_version.unwrap_or_default();
        let (group, version) = v.split_once('/').unwrap_or(("", v));
        return Err(ApiError::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={}",
            kind.unwrap_or_default()
        )));
    }
    Ok((of(r)?.config)(r, name, scale["spec"].get("replicas")))
}
