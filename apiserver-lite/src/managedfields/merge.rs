//! The updater (structured-merge-diff's `merge.Updater`): who owns which fields after an update
//! or an apply, and the conflicts an apply runs into.
//!
//! - an update is made by the writer, whatever it touches: every manager loses the fields the
//!   update changed, and the writer gains them (added to what it held);
//! - an apply declares the writer's whole intent: its set becomes what the configuration sets,
//!   fields it held before and dropped are removed unless another manager holds them, and
//!   changing a field another manager holds is a conflict unless forced.

use std::collections::BTreeMap;

use serde_json::Value;

use super::conflict::{Conflict, Conflicts};
use super::set::FieldSet;
use super::typed::{self, Comparison};

/// One manager's fields, with the version they were written at and whether by apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedSet {
    pub set: FieldSet,
    pub api_version: String,
    pub applied: bool,
}

/// Managers by identifier (see [`super::entries::ManagerId`]).
pub type ManagedFields = BTreeMap<String, VersionedSet>;

/// What every write shares: the comparison from `live` to `new`, other managers' conflicts
/// (refused unless `force`), and the changed and removed fields taken from them.
fn update_inner(
    live: &Value,
    new: &Value,
    managers: &mut ManagedFields,
    workflow: &str,
    force: bool,
    ignored: &FieldSet,
) -> Result<Comparison, Conflicts> {
    let compare = typed::compare(live, new).without(ignored);
    if managers.keys().all(|m| m == workflow) {
        // No other manager: nothing to take fields from (every creation).
        managers.retain(|_, vs| !vs.set.is_empty());
        return Ok(compare);
    }
    let mut changed = compare.modified.clone();
    changed.extend(&compare.added);
    let mut conflicts = Vec::new();
    for (manager, vs) in managers.iter().filter(|(m, _)| m.as_str() != workflow) {
        for path in vs.set.intersection(&changed).paths() {
            conflicts.push(Conflict { manager: manager.clone(), path });
        }
    }
    if !force && !conflicts.is_empty() {
        return Err(Conflicts(conflicts));
    }
    for (manager, vs) in managers.iter_mut() {
        if manager != workflow {
            vs.set.remove(&changed);
            vs.set.remove(&compare.removed);
        }
    }
    managers.retain(|_, vs| !vs.set.is_empty());
    Ok(compare)
}

/// An update by `manager` from `live` to `new`.
pub fn update(
    live: &Value,
    new: &Value,
    version: &str,
    managers: &mut ManagedFields,
    manager: &str,
    ignored: &FieldSet,
) {
    let Ok(compare) = update_inner(live, new, managers, manager, true, ignored) else { return };
    let mut set = match managers.remove(manager) {
        Some(previous) => {
            let mut set = previous.set;
            set.remove(&compare.removed);
            set.extend(&compare.added);
            set
        }
        None => compare.added,
    };
    set.extend(&compare.modified);
    set.remove_recursive(ignored);
    if !set.is_empty() {
        managers.insert(
            manager.to_string(),
            VersionedSet { set, api_version: version.to_string(), applied: false },
        );
    }
}

/// An apply of `config` by `manager` to `live`: the new object, or the conflicts.
pub fn apply(
    live: &Value,
    config: &Value,
    version: &str,
    managers: &mut ManagedFields,
    manager: &str,
    force: bool,
    ignored: &FieldSet,
) -> Result<Value, Conflicts> {
    let mut new = typed::merge(live, config);
    let last = managers.get(manager).map(|vs| vs.set.clone());
    let mut set = typed::to_set(config);
    set.remove_recursive(ignored);
    let mut after = managers.clone();
    after.insert(
        manager.to_string(),
        VersionedSet { set, api_version: version.to_string(), applied: true },
    );
    if let Some(last) = last.filter(|l| !l.is_empty()) {
        let owned = after.values().fold(FieldSet::new(), |mut acc, vs| {
            acc.extend(&vs.set);
            acc
        });
        typed::prune(&mut new, &last, &owned);
    }
    update_inner(live, &new, &mut after, manager, force, ignored)?;
    *managers = after;
    Ok(new)
}

#[cfg(test)]
mod tests;
