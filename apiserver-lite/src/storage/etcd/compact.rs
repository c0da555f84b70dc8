//! Compaction, as upstream's: every interval each apiserver tries to claim the round with a
//! transaction on `compact_rev_key` (outside the prefix, shared by every apiserver on the etcd
//! cluster) conditioned on the key's version it last saw; the one that wins records the
//! revision the previous round saw and compacts etcd to it, so at least one interval of history
//! always remains. The others learn the new version and the compacted revision. Every store
//! then forgets its history before that revision: watches and lists from there are `410`.

use etcd_client::{CompactionOptions, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use super::follow::Following;
use crate::storage::memory::Shared;
use crate::storage::{Revision, StorageError};

/// The key the apiservers sharing an etcd cluster coordinate compaction on (upstream's).
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// What the last round saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    /// The version of [`COMPACT_REV_KEY`].
    version: i64,
    /// etcd's revision then: the next round compacts to it.
    revision: Revision,
}

impl Following {
    /// One round; returns the revision compacted to, if any.
    pub(in crate::storage) async fn compact(&self, shared: &Shared) -> Result<(), StorageError> {
        let mut round = self.round.lock().await;
        let error = |e: etcd_client::Error| self.remote.error(e);
        let mut client = self.remote.client();
        let txn = Txn::new()
            .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, round.version)])
            .and_then([TxnOp::put(COMPACT_REV_KEY, round.revision.to_string(), None)])
            .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
        let r = client.txn(txn).await.map_err(error)?;
        let now = r.header().map_or(0, etcd_client::ResponseHeader::revision);
        let compacted = if r.succeeded() {
            let target = round.revision;
            *round = Round { version: round.version + 1, revision: now };
            if target == 0 {
                return Ok(()); // the first round only records where it stands
            }
            match client.compact(target, Some(CompactionOptions::new())).await {
                Ok(_) => tracing::info!(revision = target, "etcd: compacted"),
                // Another apiserver got there first.
                Err(e) if is_compacted(&e) => {}
                Err(e) => return Err(error(e)),
            }
            target
        } else {
            let seen = r.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| {
                    let at = std::str::from_utf8(kv.value()).ok().and_then(|v| v.parse().ok());
                    (kv.version(), at.unwrap_or(0))
                }),
                _ => None,
            });
            let (version, at) = seen.unwrap_or((0, 0));
            *round = Round { version, revision: now };
            at
        };
        if compacted > 0 {
            shared.write().forget_before(compacted);
        }
        Ok(())
    }
}

/// etcd's answer to compacting a revision already compacted.
fn is_compacted(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if s.code() == tonic::Code::OutOfRange)
}
