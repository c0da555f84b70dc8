//! ControllerRevisions: metadata rules only. Stored as sent: they are not decoded as their
//! type (as before the strategies; their `data` is an arbitrary object).

use super::{Strategy, untyped};
use crate::table::printers;

pub const STRATEGY: Strategy =
    Strategy { decode: untyped, printer: printers::controller_revision, ..Strategy::PLAIN };
