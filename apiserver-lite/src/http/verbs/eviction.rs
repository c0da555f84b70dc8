//! `pods/eviction`: the body read as an Eviction, admitted (a node evicts only its own pods),
//! checked against the URL, then the pod read and deleted as [`crate::eviction`] plans it,
//! a conflicting delete of a pod evicted before any budget tried again as upstream does.

use hyper::Response;
use hyper::body::Incoming;

use super::super::body::{self, Body};
use super::{Call, with_warnings};
use crate::errors::ApiError;
use crate::eviction::{self, RETRY};
use crate::objects;
use crate::resources;

pub(in crate::http) async fn create(
    c: &Call<'_>,
    n: &str,
    incoming: Incoming,
) -> Result<Response<Body>, ApiError> {
    let pods = &resources::PODS;
    let ns = c.ns.unwrap_or_default();
    let body = body::parse(&body::read(incoming).await?, c.content_type)?;
    let (mut request, warnings) = eviction::decode(body, c.write.validation)?;
    let name_of_body = objects::untyped(&request)?;
    c.restriction.admit_eviction(ns, n, &name_of_body)?;
    eviction::check_target(&mut request, ns, n)?;
    let options = eviction::propagate_dry_run(&request, c.write.dry_run)?;
    let mut tries = 0;
    loop {
        tries += 1;
        let pod = c.state.registry.get(pods, Some(ns), n)?;
        let plan = eviction::plan(&pod, &options)?;
        match c.state.registry.delete(pods, Some(ns), n, &plan.delete, false).await {
            Ok(_) => break,
            Err(e) if e.code == 409 && plan.retry_conflicts && tries < RETRY.tries => {
                tokio::time::sleep(RETRY.every).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(with_warnings(body::json(201, &eviction::success()), &warnings))
}
