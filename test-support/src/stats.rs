//! Samples, percentiles and the one-line verdicts every bench prints.
//!
//! One percentile definition serves every bench, so that their figures compare: the
//! **nearest rank**. The `p` quantile (0 to 1) of `n` sorted samples is the sample at rank
//! `ceil(p * n)` (1-based, at least 1): p50 of 1..=100 is 50, p99 is 99, p100 the maximum, and
//! every reported figure is a value that was measured, never an interpolation.

use std::time::{Duration, Instant};

/// The index (0-based) of the nearest-rank `p` quantile (0 to 1) among `len` sorted samples.
///
/// ```
/// use test_support::stats::nearest_rank_index;
/// assert_eq!(nearest_rank_index(100, 0.50), 49);
/// assert_eq!(nearest_rank_index(100, 0.99), 98);
/// assert_eq!(nearest_rank_index(3, 0.0), 0);
/// assert_eq!(nearest_rank_index(3, 1.0), 2);
/// ```
///
/// # Panics
///
/// When `len` is 0.
pub fn nearest_rank_index(len: usize, p: f64) -> usize {
    assert!(len > 0, "a percentile of no samples");
    ((len as f64 * p).ceil() as usize).clamp(1, len) - 1
}

/// The nearest-rank `p` quantile (0 to 1) of already sorted values (NaN when there are none).
///
/// ```
/// let sorted: Vec<f64> = (1..=10).map(f64::from).collect();
/// assert_eq!(test_support::stats::percentile_of_sorted(&sorted, 0.5), 5.0);
/// assert_eq!(test_support::stats::percentile_of_sorted(&sorted, 0.99), 10.0);
/// ```
pub fn percentile_of_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[nearest_rank_index(sorted.len(), p)]
}

/// The unit a bench prints its times in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds (in-process operations).
    Micros,
    /// Milliseconds (database round trips, fire lag).
    Millis,
}

impl Unit {
    fn scale(self) -> f64 {
        match self {
            Unit::Micros => 1e3,
            Unit::Millis => 1e6,
        }
    }

    /// `"µs"` or `"ms"`.
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Micros => "µs",
            Unit::Millis => "ms",
        }
    }
}

/// Timings of one operation, in nanoseconds.
///
/// ```
/// use test_support::{Samples, Unit};
/// let mut s = Samples::new("op");
/// for n in 1..=100 {
///     s.push_nanos(n as f64 * 1000.0);
/// }
/// assert_eq!(s.mean_in(Unit::Micros), 50.5);
/// assert_eq!(s.percentile_in(0.99, Unit::Micros), 99.0);
/// assert_eq!(s.percentile_in(0.50, Unit::Micros), 50.0);
/// ```
#[derive(Clone, Debug)]
pub struct Samples {
    label: String,
    nanos: Vec<f64>,
}

impl Samples {
    /// No samples yet.
    pub fn new(label: impl Into<String>) -> Self {
        Samples {
            label: label.into(),
            nanos: Vec::new(),
        }
    }

    /// The operation's name.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Adds one sample.
    pub fn push_nanos(&mut self, nanos: f64) {
        self.nanos.push(nanos);
    }

    /// Adds one sample.
    pub fn push(&mut self, elapsed: Duration) {
        self.push_nanos(elapsed.as_nanos() as f64);
    }

    /// Adds the time since `started` as one sample.
    pub fn record(&mut self, started: Instant) {
        self.push_nanos(started.elapsed().as_nanos() as f64);
    }

    /// Adds the time since `started`, divided by `ops`, as one sample: for operations too
    /// short to time one by one (reading the clock would be a sizeable part of them).
    pub fn record_batch(&mut self, started: Instant, ops: usize) {
        self.push_nanos(started.elapsed().as_nanos() as f64 / ops as f64);
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }

    /// The mean, in nanoseconds (NaN without samples).
    pub fn mean(&self) -> f64 {
        self.nanos.iter().sum::<f64>() / self.nanos.len() as f64
    }

    /// The `p` quantile (0 to 1, nearest rank), in nanoseconds (NaN without samples).
    pub fn percentile(&self, p: f64) -> f64 {
        if self.nanos.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.nanos.clone();
        sorted.sort_by(f64::total_cmp);
        percentile_of_sorted(&sorted, p)
    }

    /// The median (the nearest-rank p50), in nanoseconds.
    pub fn median(&self) -> f64 {
        self.percentile(0.50)
    }

    /// The largest sample, in nanoseconds.
    pub fn max(&self) -> f64 {
        self.nanos.iter().copied().fold(f64::NAN, f64::max)
    }

    /// The mean in `unit`.
    pub fn mean_in(&self, unit: Unit) -> f64 {
        self.mean() / unit.scale()
    }

    /// The `p` quantile in `unit`.
    pub fn percentile_in(&self, p: f64, unit: Unit) -> f64 {
        self.percentile(p) / unit.scale()
    }

    /// Prints `label  mean  p50  p99  max  (n)` on one line.
    pub fn print(&self, unit: Unit) {
        let u = unit.symbol();
        println!(
            "  {:<48} mean {:>9.3} {u}  p50 {:>9.3} {u}  p99 {:>9.3} {u}  max {:>9.3} {u}  (n = {})",
            self.label,
            self.mean_in(unit),
            self.percentile_in(0.50, unit),
            self.percentile_in(0.99, unit),
            self.max() / unit.scale(),
            self.len()
        );
    }
}

/// `"target met"`, `"TARGET MISSED"`, or, in a smoke run, `"(smoke run: not judged)"`.
///
/// ```
/// assert_eq!(test_support::stats::verdict(true, true), "target met");
/// assert_eq!(test_support::stats::verdict(false, true), "TARGET MISSED");
/// assert_eq!(test_support::stats::verdict(false, false), "(smoke run: not judged)");
/// ```
pub fn verdict(met: bool, judged: bool) -> &'static str {
    match (judged, met) {
        (false, _) => "(smoke run: not judged)",
        (true, true) => "target met",
        (true, false) => "TARGET MISSED",
    }
}

/// Prints the ratio of the means of `numerator` and `denominator` (and of their p50s and p99s)
/// against `target` (at most, on the mean), one line; returns whether the target is met.
///
/// ```
/// use test_support::Samples;
/// let (mut a, mut b) = (Samples::new("a"), Samples::new("b"));
/// a.push_nanos(110.0);
/// b.push_nanos(100.0);
/// assert!(test_support::stats::ratio_line("a / b", &a, &b, 1.15, true));
/// ```
pub fn ratio_line(
    what: &str,
    numerator: &Samples,
    denominator: &Samples,
    target: f64,
    judged: bool,
) -> bool {
    let Ratio { mean, p50, p99 } = Ratio::of(numerator, denominator);
    let met = mean <= target;
    println!(
        "ratio {what:<50} mean {mean:>6.3}  p50 {p50:>6.3}  p99 {p99:>6.3}  target <= {target:.2} on the mean: {}",
        verdict(met, judged)
    );
    met
}

/// How two sets of samples compare: the ratios of their means, medians and p99s.
///
/// ```
/// use test_support::{Samples, stats::Ratio};
/// let (mut a, mut b) = (Samples::new("a"), Samples::new("b"));
/// a.push_nanos(300.0);
/// b.push_nanos(100.0);
/// assert_eq!(Ratio::of(&a, &b), Ratio { mean: 3.0, p50: 3.0, p99: 3.0 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    /// Mean over mean.
    pub mean: f64,
    /// Median over median.
    pub p50: f64,
    /// p99 over p99.
    pub p99: f64,
}

impl Ratio {
    /// `numerator` against `denominator`.
    pub fn of(numerator: &Samples, denominator: &Samples) -> Self {
        Ratio {
            mean: numerator.mean() / denominator.mean(),
            p50: numerator.median() / denominator.median(),
            p99: numerator.percentile(0.99) / denominator.percentile(0.99),
        }
    }
}

/// Prints the ratios of `numerator` to `denominator` for context, with no target: one line.
///
/// ```
/// use test_support::Samples;
/// let (mut a, mut b) = (Samples::new("a"), Samples::new("b"));
/// a.push_nanos(110.0);
/// b.push_nanos(100.0);
/// let ratio = test_support::stats::comparison_line("a / b", &a, &b);
/// assert!((ratio.mean - 1.1).abs() < 1e-9);
/// ```
pub fn comparison_line(what: &str, numerator: &Samples, denominator: &Samples) -> Ratio {
    let ratio = Ratio::of(numerator, denominator);
    println!(
        "ratio {what:<50} mean {:>6.3}  p50 {:>6.3}  p99 {:>6.3}  (for comparison)",
        ratio.mean, ratio.p50, ratio.p99
    );
    ratio
}

/// `a`'s median minus `b`'s, in `unit`: what `a` adds to `b`, robust against the preemptions
/// that inflate means on a busy machine.
///
/// ```
/// use test_support::{Samples, Unit};
/// let (mut a, mut b) = (Samples::new("a"), Samples::new("b"));
/// a.push_nanos(5_000.0);
/// b.push_nanos(2_000.0);
/// assert_eq!(test_support::stats::median_difference(&a, &b, Unit::Micros), 3.0);
/// ```
pub fn median_difference(a: &Samples, b: &Samples, unit: Unit) -> f64 {
    (a.median() - b.median()) / unit.scale()
}

/// Prints [`median_difference`] on one line, labelled `what`; returns it.
///
/// ```
/// use test_support::{Samples, Unit};
/// let (mut a, mut b) = (Samples::new("a"), Samples::new("b"));
/// a.push_nanos(5_000.0);
/// b.push_nanos(2_000.0);
/// assert_eq!(test_support::stats::median_difference_line("a - b", &a, &b, Unit::Micros), 3.0);
/// ```
pub fn median_difference_line(what: &str, a: &Samples, b: &Samples, unit: Unit) -> f64 {
    let difference = median_difference(a, b, unit);
    println!("  {what:<58}{difference:>7.3} {}", unit.symbol());
    difference
}

/// Times `$batch` runs of `$body` (a block; it may `.await`) as one sample of `$samples` (a
/// [`Samples`]), kept only when `$keep` (false during warm-up). For operations too short to
/// time one by one: the sample is the batch's time divided by `$batch`.
///
/// ```
/// use test_support::{Samples, time_batch};
/// let mut samples = Samples::new("add");
/// let mut total = 0u64;
/// time_batch!(samples, 64, true, { total += 1; });
/// time_batch!(samples, 64, false, { total += 1; });
/// assert_eq!((samples.len(), total), (1, 128));
/// ```
#[macro_export]
macro_rules! time_batch {
    ($samples:expr, $batch:expr, $keep:expr, $body:block) => {{
        let started = ::std::time::Instant::now();
        for _ in 0..$batch $body
        if $keep {
            $samples.record_batch(started, $batch);
        }
    }};
}
