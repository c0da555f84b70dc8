//! `POST …/serviceaccounts/<name>/token`: the body decoded (JSON, YAML or kubectl's protobuf),
//! the request authorized (a node only for the accounts of pods bound to it), admitted (a
//! node's token only bound to a pod of its own: NodeRestriction), and a token issued by
//! [`serviceaccount::token_request`].

use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response};

use super::ApiState;
use super::body::{self, Body};
use crate::admission::node_restriction::NodeRestriction;
use crate::auth::User;
use crate::errors::ApiError;
use crate::objects::{self, FieldValidation};
use crate::request::{Query, ResourceRequest};
use crate::serviceaccount::token_request;

pub(super) async fn create(
    state: &ApiState,
    user: &User,
    req: Request<Incoming>,
    rr: &ResourceRequest,
    q: &Query,
) -> Result<Response<Body>, ApiError> {
    let (Some(ns), Some(name)) = (rr.namespace.as_deref(), rr.name.as_deref()) else {
        return Err(ApiError::path_not_found());
    };
    if req.method() != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    let issuer = state.tokens.as_ref().ok_or_else(ApiError::path_not_found)?;
    let content_type =
        req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let raw = body::read(req.into_body()).await?;
    let body = body::parse(&raw, content_type.as_deref())?;
    let validation = FieldValidation::parse(q.get("fieldValidation"))?;
    let (request, mut warnings) = token_request::decode(body, validation)?;
    state.authz.authorize(user, "create", rr.resource, Some(ns), Some(name), Some("token"))?;
    NodeRestriction::new(&state.registry, user).admit_token(rr.resource, ns, name, &request)?;
    let now = jiff::Timestamp::now().as_second();
    let registry: &crate::registry::Registry = &state.registry;
    let (answer, more) =
        token_request::create(issuer, registry, ns, name, request, now, objects::new_uid())?;
    warnings.extend(more);
    let answer = serde_json::to_value(answer).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(super::verbs::with_warnings(body::json(201, &answer), &warnings))
}
