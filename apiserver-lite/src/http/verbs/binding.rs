//! `pods/binding`: the scheduler's assignment of a pod to a node.

use hyper::Response;
use hyper::body::Incoming;

use super::super::body::{self, Body};
use super::{Call, success};
use crate::binding::Binding;
use crate::errors::ApiError;
use crate::objects;
use crate::resources::{self, Subresource};

pub(in crate::http) async fn create(
    c: &Call<'_>,
    n: &str,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let body = body::parse(&body::read(incoming).await?, c.content_type)?;
    let binding = Binding::parse(&body)?;
    let pods = &resources::PODS;
    let now = objects::now_rfc3339();
    let sub = Some(Subresource::Binding.as_str());
    let (bound, _) = c
        .state
        .registry
        .update_with(pods, c.ns, n, sub, c.write, |old| binding.assign(pods, old, &now))
        .await?;
    Ok(body::json(201, &success(pods, n, &bound["metadata"]["uid"])))
}
