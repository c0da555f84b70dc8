//! One page of a collection, at the revision its options or its continue token say.

use super::{Registry, parse};
use crate::errors::ApiError;
use crate::list::{ContinueToken, ListAt, ListOptions, ListPage, Snapshot};
use crate::resources::ResourceType;
use crate::storage::{Revision, Stored};

impl Registry {
    /// One page of the collection (all namespaces when `ns` is `None`). The first page reads
    /// the state `opts.at` asks for; later pages read the first page's revision.
    pub fn list(
        &self,
        r: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        let prefix = r.prefix(ns);
        let token = opts.continue_from.as_deref().map(ContinueToken::decode).transpose()?;
        let current = self.store.revision();
        let (entries, revision) = match (&token, opts.at) {
            (None, ListAt::Latest) => self.store.list(&prefix),
            (None, ListAt::NotOlderThan(min)) if min > current => {
                return Err(ApiError::too_large_resource_version(min, current));
            }
            (None, ListAt::NotOlderThan(_)) => self.store.list(&prefix),
            (None, ListAt::Exact(at)) if at > current => {
                return Err(ApiError::too_large_resource_version(at, current));
            }
            (None, ListAt::Exact(at)) => {
                let entries = self.store.list_at(&prefix, None, at).map_err(|e| {
                    ApiError::gone(format!("too old resource version: {at} ({})", e.oldest))
                })?;
                (entries, at)
            }
            (Some(t), _) => self.continue_list(&prefix, t)?,
        };
        let mut items = Vec::new();
        let mut last_key = None;
        let mut remaining = 0usize;
        for (key, stored) in entries {
            if opts.filtering() && !opts.matches(&parse(&stored.value)?) {
                continue;
            }
            if opts.limit.is_some_and(|l| items.len() >= l) {
                remaining += 1;
                continue;
            }
            last_key = Some(key);
            items.push(stored.value);
        }
        let more = remaining > 0;
        Ok(ListPage {
            items,
            revision,
            continue_token: more
                .then(|| {
                    let snapshot = Snapshot::At(revision);
                    last_key.map(|after_key| ContinueToken { snapshot, after_key }.encode())
                })
                .flatten(),
            remaining: more.then_some(remaining),
        })
    }

    /// The entries after a continue token's key, and the revision they are at: the token's
    /// snapshot, or the newest state for a token that said so. A snapshot no longer kept is
    /// 410 Expired carrying a token for the rest at the newest state.
    fn continue_list(
        &self,
        prefix: &str,
        t: &ContinueToken,
    ) -> Result<(Vec<(String, Stored)>, Revision), ApiError> {
        let after = t.after_key.as_str();
        match t.snapshot {
            Snapshot::Newest => {
                let (mut entries, revision) = self.store.list(prefix);
                entries.retain(|(k, _)| k.as_str() > after);
                Ok((entries, revision))
            }
            Snapshot::At(at) => match self.store.list_at(prefix, Some(after), at) {
                Ok(entries) => Ok((entries, at)),
                Err(e) => {
                    let next =
                        ContinueToken { snapshot: Snapshot::Newest, after_key: after.into() };
                    Err(ApiError::expired_continue(
                        format!(
                            "the continue token's resource version {at} is older than the oldest kept ({}), so it cannot continue a consistent list: start a new list without it, or continue with the token in this answer to read the rest as it is now (objects written since the first page may then be missing or appear)",
                            e.oldest
                        ),
                        next.encode(),
                    ))
                }
            },
        }
    }
}
