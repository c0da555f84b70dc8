//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection` with a
//! `LeaseLock`, shared by the scheduler (`kube-system/kube-scheduler`) and the controller-manager
//! (`kube-system/kube-controller-manager`): of several instances only the lease holder acts.
//!
//! - A candidate takes the lease when it does not exist, has no holder, or has not changed for
//!   `leaseDurationSeconds` *as measured on the candidate's own clock* since it last saw it
//!   change (client-go's `observedTime`; clocks of different machines are never compared).
//! - Writes are optimistic (`resourceVersion`), so of two candidates only one wins.
//! - The leader renews every retry period; if it cannot renew within the renew deadline it has
//!   lost the lease ([`LeaderError::Lost`]) and must stop at once (upstream's components exit).
//! - On a clean stop it releases the lease (empty holder), so a successor need not wait.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Flags of upstream's `--leader-elect-*` family.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    pub namespace: String,
    pub name: String,
    /// `<hostname>_<uuid>`, as upstream's.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// Upstream's validation of the `--leader-elect-*` durations.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline")]
    LeaseNotLongerThanRenewDeadline,
    #[error("--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period")]
    RenewDeadlineTooShort,
}

impl ElectionConfig {
    /// Upstream's rules: lease duration > renew deadline > 1.2 × retry period.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanRenewDeadline);
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err(ConfigError::RenewDeadlineTooShort);
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("leaderelection lost: lease {namespace}/{name} not renewed within {deadline:?}")]
    Lost { namespace: String, name: String, deadline: Duration },
}

/// Upstream's holder identity: the hostname, `_`, and a random (v4) UUID.
pub fn identity(hostname: &str) -> String {
    let b: [u8; 16] = rand::rng().random();
    let hex = |r: std::ops::Range<usize>| r.map(|i| format!("{:02x}", b[i])).collect::<String>();
    format!(
        "{hostname}_{}-{}-4{}-{:x}{}-{}",
        hex(0..4),
        hex(4..6),
        &hex(6..8)[1..],
        8 | (b[8] & 0x3),
        &hex(8..10)[1..],
        hex(10..16)
    )
}

/// Whether `me` may write the lease now: it is mine, or free, or expired as observed locally.
pub fn can_take(me: &str, current: &LeaseSpec, observed_at: Instant, now: Instant) -> bool {
    let holder = current.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == me {
        return true;
    }
    let duration = Duration::from_secs(
        u64::try_from(current.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
    );
    observed_at + duration <= now
}

/// The record `me` writes over `current` (`None`: the lease is being created).
pub fn next_spec(
    me: &str,
    current: Option<&LeaseSpec>,
    duration: Duration,
    now: jiff::Timestamp,
) -> LeaseSpec {
    let seconds = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX).max(1);
    let mine = current.is_some_and(|c| c.holder_identity.as_deref() == Some(me));
    let (acquire_time, transitions) = match current {
        None => (Some(MicroTime(now)), 0),
        Some(c) if mine => (c.acquire_time.clone(), c.lease_transitions.unwrap_or(0)),
        Some(c) => (Some(MicroTime(now)), c.lease_transitions.unwrap_or(0) + 1),
    };
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(seconds),
        acquire_time,
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    }
}

/// A candidate for one lease.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: ElectionConfig,
    /// The record last seen and when it was first seen (the local clock).
    observed: Option<(LeaseSpec, Instant)>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, config: ElectionConfig) -> Self {
        Self { api: Api::namespaced(client, &config.namespace), config, observed: None }
    }

    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// client-go's `tryAcquireOrRenew`: one read and at most one write.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let me = self.config.identity.clone();
        let now = Instant::now();
        let current = self.api.get_opt(&self.config.name).await?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(next_spec(
                    &me,
                    None,
                    self.config.lease_duration,
                    jiff::Timestamp::now(),
                )),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => {
                    self.observed = l.spec.map(|s| (s, now));
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        match &self.observed {
            Some((seen, _)) if *seen == spec => {}
            _ => self.observed = Some((spec.clone(), now)),
        }
        let observed_at = self.observed.as_ref().map_or(now, |(_, at)| *at);
        if !can_take(&me, &spec, observed_at, now) {
            return Ok(false);
        }
        lease.spec =
            Some(next_spec(&me, Some(&spec), self.config.lease_duration, jiff::Timestamp::now()));
        match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
            Ok(l) => {
                self.observed = l.spec.map(|s| (s, now));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn attempt(&mut self, within: Duration) -> bool {
        match tokio::time::timeout(within, self.try_acquire_or_renew()).await {
            Ok(Ok(won)) => won,
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.lease_name(), error = %e, "error retrieving or updating the lease");
                false
            }
            Err(_) => false,
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Tries every retry period (with client-go's 1.2 jitter) until the lease is ours; false if
    /// `stop` came first.
    pub async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "attempting to acquire leader lease");
        loop {
            if self.attempt(self.config.renew_deadline).await {
                tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "successfully acquired lease");
                return true;
            }
            let jitter = rand::rng().random_range(0.0..1.2);
            let wait = self.config.retry_period.mul_f64(1.0 + jitter);
            tokio::select! {
                () = stop.cancelled() => return false,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Renews every retry period until `stop` (Ok) or until a renewal round fails for the
    /// whole renew deadline (Err).
    pub async fn keep(&mut self, stop: &CancellationToken) -> Result<(), LeaderError> {
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(LeaderError::Lost {
                        namespace: self.config.namespace.clone(),
                        name: self.config.name.clone(),
                        deadline: self.config.renew_deadline,
                    });
                }
                if self.attempt(left).await {
                    break;
                }
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = tokio::time::sleep(self.config.retry_period.min(left)) => {}
                }
            }
        }
    }

    /// Gives the lease up (client-go's `release`): empty holder, so a successor takes it at once.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else { return };
        let Some(spec) = lease.spec.as_mut() else { return };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
            Ok(_) => tracing::info!(lease = %self.lease_name(), "released the lease"),
            Err(e) => tracing::warn!(lease = %self.lease_name(), error = %e, "releasing the lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(seconds),
            lease_transitions: Some(3),
            acquire_time: Some(MicroTime(jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_taken_only_when_mine_free_or_unchanged_for_its_duration() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let cases = [
            ("mine", held_by("me", 15), t0, t0, true),
            ("free", held_by("", 15), t0, t0, true),
            ("held, fresh", held_by("other", 15), t0, t0 + s(14), false),
            ("held, expired on my clock", held_by("other", 15), t0, t0 + s(15), true),
            ("held, seen changing recently", held_by("other", 15), t0 + s(10), t0 + s(20), false),
        ];
        for (what, spec, observed, now, want) in cases {
            assert_eq!(can_take("me", &spec, observed, now), want, "{what}");
        }
    }

    #[test]
    fn renewals_keep_acquire_time_and_takeovers_count_transitions() {
        let now = jiff::Timestamp::from_second(1000).unwrap_or_default();
        let d = Duration::from_secs(15);
        let created = next_spec("me", None, d, now);
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.lease_duration_seconds, Some(15));

        let renewed = next_spec("me", Some(&held_by("me", 15)), d, now);
        assert_eq!(renewed.lease_transitions, Some(3));
        assert_eq!(renewed.acquire_time, Some(MicroTime(jiff::Timestamp::UNIX_EPOCH)));
        assert_eq!(renewed.renew_time, Some(MicroTime(now)));

        let taken = next_spec("me", Some(&held_by("other", 15)), d, now);
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(now)));
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
    }

    #[test]
    fn durations_are_validated_as_upstreams() {
        let s = Duration::from_secs;
        let config = |lease, renew, retry| ElectionConfig {
            namespace: "kube-system".into(),
            name: "x".into(),
            identity: "me".into(),
            lease_duration: s(lease),
            renew_deadline: s(renew),
            retry_period: s(retry),
        };
        assert_eq!(config(15, 10, 2).validate(), Ok(()));
        assert_eq!(config(10, 10, 2).validate(), Err(ConfigError::LeaseNotLongerThanRenewDeadline));
        assert_eq!(config(15, 2, 2).validate(), Err(ConfigError::RenewDeadlineTooShort));
    }

    #[test]
    fn identities_are_hostname_underscore_uuid() {
        let id = identity("host-1");
        let (host, uuid) = id.split_once('_').unwrap_or_default();
        assert_eq!(host, "host-1");
        let groups: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(groups, vec![8, 4, 4, 4, 12], "{uuid}");
        assert_eq!(uuid.as_bytes()[14], b'4', "version 4: {uuid}");
        assert_ne!(identity("h"), identity("h"));
    }
}
