//! Request bodies in (size-limited, JSON or YAML, a missing Content-Type read as JSON) and
//! responses out.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::errors::{ApiError, MAX_BODY};

pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A JSON response.
pub fn json(code: u16, v: &Value) -> Response<Body> {
    bytes_response(code, "application/json", serde_json::to_vec(v).unwrap_or_default())
}

pub fn bytes_response(code: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

pub fn error(e: &ApiError) -> Response<Body> {
    json(e.code, &e.status())
}

/// Reads the whole body, refusing more than the limit (413).
pub async fn read(body: Incoming) -> Result<Bytes, ApiError> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => {
            let bytes = c.to_bytes();
            crate::audit::request_bytes(&bytes);
            Ok(bytes)
        }
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(ApiError::too_large())
        }
        Err(e) => Err(ApiError::bad_request(format!("reading the request body: {e}"))),
    }
}

/// Parses a body by its Content-Type: JSON (also when absent), YAML; protobuf and anything else
/// are refused with 415.
pub fn parse(bytes: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
    let parsed = decode(bytes, content_type)?;
    crate::audit::request_object(&parsed);
    Ok(parsed)
}

fn decode(bytes: &[u8], content_type: Option<&str>) -> Result<Value, ApiError> {
    let ct =
        content_type.unwrap_or("application/json").split(';').next().unwrap_or_default().trim();
    match ct {
        "" | "application/json" | "*/*" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}"))),
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| ApiError::bad_request("the request body is not UTF-8"))?;
            serde_yaml_ng::from_str(text).map_err(|e| {
                ApiError::bad_request(format!("the request body is not valid YAML: {e}"))
            })
        }
        crate::protobuf::CONTENT_TYPE => crate::protobuf::decode(bytes),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}
