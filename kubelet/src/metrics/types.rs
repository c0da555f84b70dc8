//! The metric types, as component-base's: [`Counter`], [`Gauge`] and [`Histogram`], each
//! updated with atomic operations only, and [`Labeled`] families of them by label values (a short lock to
//! find or make a series; whoever records often keeps the series' `Arc` and updates it
//! lock-free). Each renders itself into a [`text::Family`](super::text::Family).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::text::{Buckets, Family, Kind};

/// client_golang's `DefBuckets`.
pub const DEF_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// client_golang's `ExponentialBuckets(start, factor, count)`, computed as Go does (each bound
/// the previous times the factor), so that the bounds print the same.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    let mut bounds = Vec::with_capacity(count);
    let mut next = start;
    for _ in 0..count {
        bounds.push(next);
        next *= factor;
    }
    bounds
}

/// A float kept in an `AtomicU64`'s bits.
#[derive(Debug, Default)]
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    fn add(&self, v: f64) {
        let _ = self.0.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            Some((f64::from_bits(bits) + v).to_bits())
        });
    }
}

/// A count that only goes up.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicF64);

impl Gauge {
    pub fn set(&self, v: f64) {
        self.0.set(v);
    }

    pub fn add(&self, v: f64) {
        self.0.add(v);
    }

    pub fn get(&self) -> f64 {
        self.0.get()
    }
}

/// Observations counted into fixed buckets, with their sum and count.
#[derive(Debug)]
pub struct Histogram {
    bounds: Arc<[f64]>,
    /// Per bucket, not cumulative (the last is `+Inf`'s own).
    counts: Box<[AtomicU64]>,
    sum: AtomicF64,
    count: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: Arc<[f64]>) -> Self {
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Self { bounds, counts, sum: AtomicF64::default(), count: AtomicU64::new(0) }
    }

    pub fn observe(&self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        if let Some(c) = self.counts.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.add(v);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn sum(&self) -> f64 {
        self.sum.get()
    }

    fn buckets(&self) -> Buckets {
        let mut running = 0;
        let cumulative = self
            .bounds
            .iter()
            .zip(self.counts.iter())
            .map(|(b, c)| {
                running += c.load(Ordering::Relaxed);
                (*b, running)
            })
            .collect();
        // The count is read after the buckets: a racing observation shows in it at worst,
        // never a bucket above the count.
        let count = self.count.load(Ordering::Relaxed).max(running);
        Buckets { cumulative, sum: self.sum.get(), count }
    }
}

/// What a family is made of, and how one series of it is written.
pub trait Metric: Send + Sync + std::fmt::Debug {
    const KIND: Kind;
    fn make(bounds: &Arc<[f64]>) -> Self;
    fn write(&self, family: &mut Family, labels: &[(&'static str, &str)]);
}

impl Metric for Counter {
    const KIND: Kind = Kind::Counter;
    fn make(_: &Arc<[f64]>) -> Self {
        Self::default()
    }
    #[allow(clippy::cast_precision_loss)]
    fn write(&self, family: &mut Family, labels: &[(&'static str, &str)]) {
        family.push(labels, self.get() as f64, None);
    }
}

impl Metric for Gauge {
    const KIND: Kind = Kind::Gauge;
    fn make(_: &Arc<[f64]>) -> Self {
        Self::default()
    }
    fn write(&self, family: &mut Family, labels: &[(&'static str, &str)]) {
        family.push(labels, self.get(), None);
    }
}

impl Metric for Histogram {
    const KIND: Kind = Kind::Histogram;
    fn make(bounds: &Arc<[f64]>) -> Self {
        Self::new(bounds.clone())
    }
    fn write(&self, family: &mut Family, labels: &[(&'static str, &str)]) {
        family.push_histogram(labels, self.buckets());
    }
}

/// A metric without labels: always written, as a plain component-base metric is.
#[derive(Debug)]
pub struct Plain<M> {
    name: &'static str,
    help: &'static str,
    pub metric: M,
}

impl<M: Metric> Plain<M> {
    pub fn new(name: &'static str, help: &'static str) -> Self {
        Self::with_buckets(name, help, &[])
    }

    pub fn with_buckets(name: &'static str, help: &'static str, bounds: &[f64]) -> Self {
        Self { name, help, metric: M::make(&Arc::from(bounds)) }
    }

    pub fn family(&self) -> Family {
        let mut f = Family::new(self.name, self.help, M::KIND);
        self.metric.write(&mut f, &[]);
        f
    }
}

impl<M> std::ops::Deref for Plain<M> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.metric
    }
}

/// A family of series by label values (component-base's `*Vec`): a series exists from its
/// first use until it is deleted, and only existing series are written.
#[derive(Debug)]
pub struct Labeled<M> {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    bounds: Arc<[f64]>,
    series: Mutex<BTreeMap<Vec<String>, Arc<M>>>,
}

impl<M: Metric> Labeled<M> {
    pub fn new(name: &'static str, help: &'static str, labels: &'static [&'static str]) -> Self {
        Self::with_buckets(name, help, labels, &[])
    }

    pub fn with_buckets(
        name: &'static str,
        help: &'static str,
        label_names: &'static [&'static str],
        bounds: &[f64],
    ) -> Self {
        Self {
            name,
            help,
            label_names,
            bounds: Arc::from(bounds),
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// The series for `values` (one per label name, in order), made on first use.
    pub fn with(&self, values: &[&str]) -> Arc<M> {
        debug_assert_eq!(values.len(), self.label_names.len(), "{}", self.name);
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let key: Vec<String> = values.iter().map(|v| (*v).to_string()).collect();
        series.entry(key).or_insert_with(|| Arc::new(M::make(&self.bounds))).clone()
    }

    /// The series for `values`, if it exists.
    pub fn get(&self, values: &[&str]) -> Option<Arc<M>> {
        let key: Vec<String> = values.iter().map(|v| (*v).to_string()).collect();
        self.series.lock().unwrap_or_else(PoisonError::into_inner).get(&key).cloned()
    }

    /// Forgets the series for `values` (component-base's `Delete`).
    pub fn delete(&self, values: &[&str]) {
        let key: Vec<String> = values.iter().map(|v| (*v).to_string()).collect();
        self.series.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
    }

    pub fn family(&self) -> Family {
        let mut f = Family::new(self.name, self.help, M::KIND);
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        for (values, m) in series.iter() {
            let labels: Vec<(&'static str, &str)> =
                self.label_names.iter().copied().zip(values.iter().map(String::as_str)).collect();
            m.write(&mut f, &labels);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::text::encode;

    #[test]
    fn exponential_buckets_are_upstream_runtime_operation_bounds() {
        let b = exponential_buckets(0.005, 2.5, 14);
        let printed: Vec<String> = b.iter().map(|f| super::super::text::go_float(*f)).collect();
        assert_eq!(printed[..4], ["0.005", "0.0125", "0.03125", "0.078125"]);
        assert_eq!(printed.len(), 14);
    }

    #[test]
    fn a_histogram_counts_each_observation_in_the_first_bucket_that_holds_it() {
        let h = Plain::<Histogram>::with_buckets("h", "H", &[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 3.0] {
            h.observe(v);
        }
        assert_eq!(
            encode(vec![h.family()]),
            "# HELP h H\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 3\n\
             h_bucket{le=\"+Inf\"} 4\nh_sum 6\nh_count 4\n"
        );
    }

    #[test]
    fn a_vec_writes_only_the_series_in_use_and_forgets_deleted_ones() {
        let v = Labeled::<Counter>::new("c_total", "C", &["a", "b"]);
        assert_eq!(encode(vec![v.family()]), "", "no series: no family");
        v.with(&["x", "y"]).inc();
        v.with(&["x", "y"]).inc();
        v.with(&["w", "z"]).inc();
        assert_eq!(
            encode(vec![v.family()]),
            "# HELP c_total C\n# TYPE c_total counter\nc_total{a=\"w\",b=\"z\"} 1\n\
             c_total{a=\"x\",b=\"y\"} 2\n"
        );
        v.delete(&["x", "y"]);
        assert_eq!(v.get(&["x", "y"]).map(|c| c.get()), None);
        let g = Plain::<Gauge>::new("g", "G");
        g.add(2.0);
        g.add(-0.5);
        assert_eq!(encode(vec![g.family()]), "# HELP g G\n# TYPE g gauge\ng 1.5\n");
    }
}
