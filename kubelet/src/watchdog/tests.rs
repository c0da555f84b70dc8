use std::sync::Mutex;

use super::*;

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<Notification>>);

impl Notifier for Recorder {
    fn notify(&self, n: &Notification) -> std::io::Result<()> {
        self.0.lock().unwrap().push(n.clone());
        Ok(())
    }
}

impl Recorder {
    fn pings(&self) -> usize {
        self.0.lock().unwrap().iter().filter(|n| **n == Notification::Watchdog).count()
    }
}

#[test]
fn the_sync_loop_threshold_is_upstreams_twice_the_resync_at_least_five_minutes() {
    assert_eq!(SyncLoopHealth::new(Duration::from_secs(60)).threshold, Duration::from_secs(300));
    assert_eq!(SyncLoopHealth::new(Duration::from_secs(600)).threshold, Duration::from_secs(1200));
}

#[tokio::test(start_paused = true)]
async fn pings_stop_while_the_sync_loop_is_stalled_and_resume_when_it_goes_round() {
    let health = Arc::new(SyncLoopHealth::new(Duration::from_secs(60)));
    let recorder = Arc::new(Recorder::default());
    let dog = Watchdog::new(Duration::from_secs(60), health.clone(), recorder.clone());
    assert_eq!(dog.interval, Duration::from_secs(30), "half of WATCHDOG_USEC");
    let stop = CancellationToken::new();
    let task = tokio::spawn(dog.run(stop.clone()));

    // A loop that goes round every second: a ping every 30 s, the first at once.
    for _ in 0..120 {
        health.iterated();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(recorder.pings(), 5, "at 0, 30, 60, 90 and 120 s");

    // The loop stalls (last round at 119 s): pings go on while within the 5-minute threshold
    // (the ticks at 150 … 390 s), then stop.
    tokio::time::sleep(Duration::from_secs(20 * 60)).await;
    let after_stall = recorder.pings();
    assert_eq!(after_stall, 5 + 9);
    assert!(health.check().unwrap_err().contains("sync Loop took longer than expected"));
    tokio::time::sleep(Duration::from_secs(10 * 60)).await;
    assert_eq!(recorder.pings(), after_stall, "no ping while stalled");

    // It goes round again: pings resume at the next tick.
    health.iterated();
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(recorder.pings(), after_stall + 1);
    stop.cancel();
    task.await.unwrap();
}
