//! Each built-in kind's behaviour in one place, as upstream's REST strategies
//! (`pkg/registry/<group>/<kind>/strategy.go`) hold it: decoding into the typed object, its
//! OpenAPI schema, defaulting, what a create and an update prepare, validation of creates,
//! updates and status updates, the selectable fields, the Table printer, the scale subresource
//! and what a delete does. A [`ResourceType`] row points at its kind's [`Strategy`]; the shared lifecycle
//! ([`crate::objects`], [`crate::registry`], [`crate::http`]) asks the strategy and never
//! matches on a kind's name.
//!
//! A strategy is a struct of function pointers rather than a trait object: every strategy is
//! a `const` built from [`Strategy::PLAIN`] with only what the kind does differently, so a
//! kind's file reads as the list of its differences, the resource table stays a `const`, and
//! no kind needs a type of its own.
//!
//! One room per kind: [`pod`], [`namespace`], [`node`], [`event`] (both `Event` APIs),
//! [`service`], [`endpoints`], [`config_map`], [`secret`], [`service_account`],
//! [`deployment`], [`replica_set`], [`daemon_set`], [`controller_revision`], [`job`],
//! [`cron_job`], [`lease`], [`role`], [`cluster_role`], [`role_binding`],
//! [`cluster_role_binding`], [`review`] (the review kinds, answered and never stored), and
//! [`metrics`] (NodeMetrics and PodMetrics, computed from scraped usage);
//! [`scale`]: the `autoscaling/v1` Scale of a kind with replicas.

pub mod cluster_role;
pub mod cluster_role_binding;
pub mod config_map;
pub mod controller_revision;
pub mod cron_job;
pub mod daemon_set;
pub mod deployment;
pub mod endpoints;
pub mod event;
pub mod job;
pub mod lease;
pub mod metrics;
pub mod namespace;
pub mod node;
pub mod pod;
pub mod replica_set;
pub mod review;
pub mod role;
pub mod role_binding;
pub mod scale;
pub mod secret;
pub mod service;
pub mod service_account;

#[cfg(test)]
mod tests;

use api::validation::ErrorList;
use serde_json::Value;

use crate::errors::ApiError;
use crate::objects;
use crate::registry::Propagation;
use crate::resources::ResourceType;
use crate::selectors::Source;
use crate::table::printers::{self, Row};

/// Decodes an object as the kind's typed object: the decoded JSON and the unknown fields.
pub type Decode = fn(&ResourceType, Value) -> Result<(Value, Vec<String>), ApiError>;
/// Changes an object in place (defaults, preparation).
pub type Mutate = fn(&mut Value) -> Result<(), ApiError>;
/// A create's validation errors.
pub type Validate = fn(&ResourceType, &Value) -> Result<ErrorList, ApiError>;
/// An update's validation errors, from the (old, new) pair.
pub type ValidateUpdate = fn(&ResourceType, &Value, &Value) -> Result<ErrorList, ApiError>;
/// A Table row of an object at a time.
pub type Printer = fn(&Value, jiff::Timestamp) -> Row;

/// One selectable field: the name a field selector uses, and where it is read.
pub type Field = (&'static str, Source);

/// What a delete does before the object goes (upstream's `BeforeDelete` and the storage's
/// own deletion rules).
#[derive(Debug, Clone, Copy)]
pub enum Deletion {
    /// Removed at once (finalizers aside).
    Immediate,
    /// Marked with a grace period first (`CheckGracefulDelete`): the period from the requested
    /// one and the object.
    Graceful(fn(&Value, Option<i64>) -> i64),
    /// Marked Terminating, emptied by the namespace controller, then removed.
    Terminate,
}

/// How a kind behaves; see the module's documentation.
#[derive(Debug, Clone, Copy)]
pub struct Strategy {
    /// Decoding into the typed object (unknown fields reported) and back; the kinds whose
    /// defaults are made on the typed object apply them here, as upstream's codec defaults
    /// what it decodes, so a write converts once.
    pub decode: Decode,
    /// The typed object's OpenAPI schema (`kubectl explain`); `None` for kinds without a
    /// typed object here.
    pub schema: Option<crate::openapi::SchemaOf>,
    /// Upstream's defaulting of the versioned type, where it is made on the JSON form (the
    /// typed kinds' is in `decode`); it runs right after decoding.
    pub defaults: Mutate,
    /// `PrepareForCreate` beyond metadata: no status from the client, an initial status, a
    /// generated selector.
    pub prepare_for_create: Mutate,
    /// `PrepareForUpdate` of the main resource beyond what every kind does (status kept,
    /// generation): the kind's own bookkeeping.
    pub prepare_for_update: fn(&Value, &mut Value),
    /// Whether a change of the annotations is a change of what is wanted (the generation goes
    /// up): Deployments copy theirs to their ReplicaSets.
    pub annotations_are_spec: bool,
    pub validate: Validate,
    pub validate_update: ValidateUpdate,
    /// `ValidateUpdate` of the `status` subresource's strategy.
    pub validate_status_update: ValidateUpdate,
    /// The fields a field selector may name besides `metadata.name` and `metadata.namespace`
    /// (`GetAttrs`/`ToSelectableFields`).
    pub fields: &'static [Field],
    /// kubectl's columns (upstream's `printers.go` handler for the kind).
    pub printer: Printer,
    /// The `scale` subresource, for kinds that have one.
    pub scale: Option<scale::Scale>,
    pub deletion: Deletion,
    /// The garbage collector's propagation when a delete names none.
    pub default_propagation: Propagation,
    /// Whether a delete answers with the object rather than a `Status` (`ReturnDeletedObject`).
    pub returns_deleted_object: bool,
}

fn no_change(_: &mut Value) -> Result<(), ApiError> {
    Ok(())
}

fn nothing_more(_: &Value, _: &mut Value) {}

fn meta_update(r: &ResourceType, _: &Value, new: &Value) -> Result<ErrorList, ApiError> {
    Ok(objects::validate_meta(r, new))
}

fn meta_only(r: &ResourceType, obj: &Value) -> Result<ErrorList, ApiError> {
    Ok(objects::validate_meta(r, obj))
}

pub(super) fn untyped(_: &ResourceType, obj: Value) -> Result<(Value, Vec<String>), ApiError> {
    Ok((obj, Vec::new()))
}

impl Strategy {
    /// A kind with metadata rules only: no defaults, no status, the name and age columns,
    /// removed at once. Every strategy starts from it.
    pub const PLAIN: Strategy = Strategy {
        decode: untyped,
        schema: None,
        defaults: no_change,
        prepare_for_create: no_change,
        prepare_for_update: nothing_more,
        annotations_are_spec: false,
        validate: meta_only,
        validate_update: meta_update,
        validate_status_update: meta_update,
        fields: &[],
        printer: printers::plain,
        scale: None,
        deletion: Deletion::Immediate,
        default_propagation: Propagation::Background,
        returns_deleted_object: false,
    };
}
