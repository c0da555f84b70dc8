use super::*;

fn pod(uid: &str) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    Arc::new(p)
}

fn terminate(secs: u64) -> Work {
    Work::Terminate { pod: Some(pod("a")), grace: Some(Duration::from_secs(secs)) }
}

/// The size of the future a function returns, without calling it.
fn future_size<A, B, C, F>(_: impl FnOnce(A, B, C) -> F) -> usize {
    std::mem::size_of::<F>()
}

#[test]
fn an_idle_worker_is_small() {
    let size = future_size(run_worker);
    assert!(size < 1024, "a worker task's future is {size} bytes");
}

#[test]
fn the_state_machine_syncs_then_terminates_then_removes() {
    let s = WorkerState::Syncing;
    let (s, a) = step(s, Input::Work(Work::Sync(pod("a"))));
    assert!(matches!((s, a), (WorkerState::Syncing, Action::Sync(_))));
    let (s, a) = step(s, Input::Synced { finished: false });
    assert_eq!((s, a), (WorkerState::Syncing, Action::Nothing));
    let g = Some(Duration::from_secs(30));
    let (s, a) = step(s, Input::Work(terminate(30)));
    assert_eq!(s, WorkerState::Terminating { grace: g });
    assert!(matches!(a, Action::Kill { grace, hooks: true, .. } if grace == g));
    assert_eq!(step(s, Input::Work(Work::Sync(pod("a")))).1, Action::Nothing, "no syncs");
    assert_eq!(step(s, Input::Work(terminate(30))).1, Action::Nothing, "same grace: keep going");
    assert_eq!(step(s, Input::Work(terminate(60))).1, Action::Nothing, "grace never grows");
    let (s2, a) = step(s, Input::Work(terminate(1)));
    assert_eq!(s2, WorkerState::Terminating { grace: Some(Duration::from_secs(1)) });
    assert!(
        matches!(a, Action::Kill { grace: Some(d), hooks: false, .. } if d == Duration::from_secs(1)),
        "a shorter grace restarts the kill without running preStop hooks again"
    );
    let (s, a) = step(s2, Input::Killed);
    assert_eq!((s, a), (WorkerState::Terminated, Action::Remove));
}

#[test]
fn a_finished_pod_releases_its_resources_and_is_removed_when_terminated() {
    let (s, a) = step(WorkerState::Syncing, Input::Synced { finished: true });
    assert_eq!((s, a), (WorkerState::Terminated, Action::Release));
    assert_eq!(step(s, Input::Work(Work::Sync(pod("a")))).1, Action::Nothing, "never again");
    assert_eq!(step(s, Input::Work(terminate(30))), (WorkerState::Terminated, Action::Remove));
}

#[test]
fn terminations_preempt_syncs_and_shorter_graces_preempt_terminations() {
    assert!(preempts(WorkerState::Syncing, &terminate(30)));
    assert!(!preempts(WorkerState::Syncing, &Work::Sync(pod("a"))));
    let t30 = WorkerState::Terminating { grace: Some(Duration::from_secs(30)) };
    assert!(preempts(t30, &terminate(1)));
    assert!(!preempts(t30, &terminate(30)));
    assert!(!preempts(t30, &Work::Sync(pod("a"))));
    let own = WorkerState::Terminating { grace: None };
    assert!(preempts(own, &terminate(5)), "any given grace is shorter than the recorded ones");
    assert!(!preempts(WorkerState::Terminated, &terminate(1)));
}

#[test]
fn the_mailbox_keeps_the_latest_sync_but_never_drops_a_kill() {
    let m = Mailbox::default();
    m.put(Work::Sync(pod("1")));
    m.put(Work::Sync(pod("2")));
    assert!(
        matches!(m.pending.lock().unwrap().clone(), Some(Work::Sync(p)) if p.metadata.uid.as_deref() == Some("2"))
    );
    m.put(terminate(30));
    m.put(Work::Sync(pod("3")));
    m.put(terminate(5));
    m.put(terminate(10));
    assert!(
        matches!(m.pending.lock().unwrap().clone(), Some(Work::Terminate { grace: Some(d), .. }) if d == Duration::from_secs(5))
    );
}

#[tokio::test(start_paused = true)]
async fn a_termination_cancels_a_sync_in_progress_but_a_sync_waits() {
    let m = Arc::new(Mailbox::default());
    let never = std::future::pending::<()>();
    let putter = {
        let m = m.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            m.put(Work::Sync(pod("a")));
            tokio::time::sleep(Duration::from_secs(1)).await;
            m.put(terminate(30));
        })
    };
    let started = Instant::now();
    assert_eq!(m.preemptible(WorkerState::Syncing, never).await, None);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "the sync was not cancelled, the kill was"
    );
    putter.await.unwrap();
    assert!(matches!(m.take().await, Work::Terminate { .. }));

    // An action that ends on its own returns its output, and later work waits in the mailbox.
    m.put(Work::Sync(pod("b")));
    let done = async { 7 };
    assert_eq!(m.preemptible(WorkerState::Syncing, done).await, Some(7));
    assert!(matches!(m.take().await, Work::Sync(_)));
}

#[tokio::test(start_paused = true)]
async fn a_shorter_grace_cancels_a_termination_in_progress() {
    let m = Arc::new(Mailbox::default());
    let state = WorkerState::Terminating { grace: Some(Duration::from_secs(30)) };
    let putter = {
        let m = m.clone();
        tokio::spawn(async move {
            m.put(terminate(30));
            tokio::time::sleep(Duration::from_secs(3)).await;
            m.put(terminate(1));
        })
    };
    let started = Instant::now();
    let thirty_seconds = tokio::time::sleep(Duration::from_secs(30));
    assert_eq!(m.preemptible(state, thirty_seconds).await, None);
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    putter.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_work_queue_releases_pods_when_due() {
    let q = WorkQueue::default();
    q.enqueue("a", Duration::from_secs(10));
    q.enqueue("b", Duration::from_secs(1));
    q.enqueue("a", Duration::from_secs(2));
    assert!(q.take_due(Instant::now()).is_empty());
    tokio::time::advance(Duration::from_secs(2)).await;
    let mut due = q.take_due(Instant::now());
    due.sort();
    assert_eq!(due, ["a", "b"]);
    assert!(q.take_due(Instant::now() + Duration::from_secs(100)).is_empty());
}

fn evict() -> Work {
    let failure = PodFailure {
        reason: "Evicted".into(),
        message: "low on memory".into(),
        disruption: Some("TerminationByKubelet".into()),
    };
    Work::Fail { pod: pod("a"), failure, grace: Duration::from_secs(1) }
}

#[test]
fn an_eviction_fails_a_syncing_pod_which_then_finishes_and_a_deletion_still_wins() {
    let (s, a) = step(WorkerState::Syncing, Input::Work(evict()));
    assert_eq!(s, WorkerState::Syncing);
    assert!(matches!(a, Action::Fail { grace, .. } if grace == Duration::from_secs(1)));
    assert_eq!(
        step(s, Input::Synced { finished: true }),
        (WorkerState::Terminated, Action::Release)
    );
    let terminating = WorkerState::Terminating { grace: Some(Duration::from_secs(30)) };
    assert_eq!(step(terminating, Input::Work(evict())).1, Action::Nothing, "already stopping");
    assert!(preempts(WorkerState::Syncing, &evict()), "an eviction cancels a sync in progress");
    // Coalescing: the eviction beats a sync; a termination beats the eviction.
    assert!(matches!(Work::merge(Some(evict()), Work::Sync(pod("a"))), Work::Fail { .. }));
    assert!(matches!(Work::merge(Some(Work::Sync(pod("a"))), evict()), Work::Fail { .. }));
    assert!(matches!(Work::merge(Some(terminate(5)), evict()), Work::Terminate { .. }));
    assert!(matches!(Work::merge(Some(evict()), terminate(5)), Work::Terminate { .. }));
}
