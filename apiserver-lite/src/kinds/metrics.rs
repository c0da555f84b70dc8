//! NodeMetrics and PodMetrics (`metrics.k8s.io/v1beta1`): computed from the scraped usage
//! ([`crate::metrics`]), never decoded from a body nor stored; the plain strategy (name and
//! namespace field selectors, the plain Table printer).

use super::Strategy;

pub const STRATEGY: Strategy = Strategy::PLAIN;
