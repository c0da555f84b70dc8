//! The namespace controller, as upstream's: a Terminating namespace is emptied, then removed.

use std::sync::Arc;
use std::time::Duration;

use super::{DeleteOptions, Propagation, Registry, parse};
use crate::errors::ApiError;
use crate::list::ListOptions;
use crate::resources::{self, RESOURCES};
use crate::storage::memory::Mutation;

impl Registry {
    /// The namespace controller, as upstream's: namespaces marked Terminating are emptied, then
    /// removed. Runs until `stop`.
    pub async fn run_namespace_controller(
        self: Arc<Self>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let nsr = &resources::NAMESPACES;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
            let Ok(page) = self.list(nsr, None, &ListOptions::default()) else { continue };
            for item in page.items {
                let Ok(obj) = parse(&item) else { continue };
                if obj["status"]["phase"] == "Terminating" {
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    self.finalize_namespace(&name).await;
                }
            }
        }
    }

    /// One pass of emptying a Terminating namespace; removes it once empty.
    async fn finalize_namespace(&self, ns: &str) {
        {
            let mut left = 0;
            for r in RESOURCES.iter().filter(|r| r.namespaced && r.is_stored()) {
                let Ok(page) = self.list(r, Some(ns), &ListOptions::default()) else { continue };
                for item in page.items {
                    left += 1;
                    let Ok(obj) = parse(&item) else { continue };
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    // As upstream's namespace controller: dependents go in the background.
                    let opts = DeleteOptions {
                        propagation: Some(Propagation::Background),
                        ..DeleteOptions::default()
                    };
                    if obj["metadata"]["deletionTimestamp"].is_null()
                        && let Err(e) = self.delete(r, Some(ns), &name, &opts, false).await
                    {
                        tracing::debug!(namespace = ns, name, error = %e, "deleting namespace content");
                    }
                }
            }
            if left > 0 {
                return;
            }
        }
        let nsr = &resources::NAMESPACES;
        let key = nsr.key(None, ns);
        let result = self
            .store
            .mutate::<ApiError, _>(&key, |cur, _| {
                Ok(if cur.is_some() { Mutation::Delete } else { Mutation::Unchanged })
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(namespace = ns, error = %e, "removing the namespace");
        }
    }
}
