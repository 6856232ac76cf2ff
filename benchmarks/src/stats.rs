//! Samples, percentiles and the one-line verdicts every bench prints.

use std::time::Instant;

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
/// use benchmarks::{Samples, Unit};
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
        let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
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
            "  {:<40} mean {:>9.3} {u}  p50 {:>9.3} {u}  p99 {:>9.3} {u}  max {:>9.3} {u}  (n = {})",
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
/// assert_eq!(benchmarks::stats::verdict(true, true), "target met");
/// assert_eq!(benchmarks::stats::verdict(false, true), "TARGET MISSED");
/// assert_eq!(benchmarks::stats::verdict(false, false), "(smoke run: not judged)");
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
/// use benchmarks::Samples;
/// let (mut a, mut b) = (Samples::new("a"), Samples::new("b"));
/// a.push_nanos(110.0);
/// b.push_nanos(100.0);
/// assert!(benchmarks::stats::ratio_line("a / b", &a, &b, 1.15, true));
/// ```
pub fn ratio_line(
    what: &str,
    numerator: &Samples,
    denominator: &Samples,
    target: f64,
    judged: bool,
) -> bool {
    let mean = numerator.mean() / denominator.mean();
    let p50 = numerator.percentile(0.50) / denominator.percentile(0.50);
    let p99 = numerator.percentile(0.99) / denominator.percentile(0.99);
    let met = mean <= target;
    println!(
        "ratio {what:<44} mean {mean:>6.3}  p50 {p50:>6.3}  p99 {p99:>6.3}  target <= {target:.2} on the mean: {}",
        verdict(met, judged)
    );
    met
}
