//! The capture of a run's `tracing` events: a dispatcher that passes every call on to the one
//! that was current where the run started and keeps a copy of the run's events in the run's
//! own buffer ([`RunLogSink`]), written with its end row.
//!
//! Decisions, and why:
//! - **A scoped dispatcher, not a layer to add.** A newcomer's runs have their lines without
//!   any setup (even without a subscriber at all), and the service's output stays its own:
//!   every span and event is passed on to the dispatcher current at the run's start, whose ids
//!   are used, and an event reaches it exactly when its own `enabled` says so. The cost is the
//!   one thing a tee cannot pass on: a downcast of the current dispatcher (the trait's method
//!   is `unsafe`, and this crate forbids unsafe code) — documented on the builder.
//! - **One dispatcher per scheduler, one buffer per run.** `Dispatch::new` re-registers every
//!   callsite's interest, so it is made once, at start; each run's buffer is a task-local
//!   ([`RUN_LOG`]) set while the run's body is polled (and around a blocking body), so
//!   two concurrent runs never see each other's buffer. Per fire: one buffer, allocated at its
//!   first line; per event: a lock of the run's own mutex and the line written into the
//!   buffer (no allocation once the buffer's scratch has grown).
//! - **Interest follows the user's dispatcher**: ours answers each callsite with what the
//!   user's says, widened to "sometimes" only for an event at the captured level the user's
//!   would never see, so the rest of the program filters exactly as before. The max level hint
//!   is the captured level: it raises tracing's global fast-path level to it at most.
//! - Disabled (or without history), none of this exists: no dispatcher, no task-local.

use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};

use lock_cluster::{RunLog, RunLogWriter};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

use super::run_logs::RunLogs;
use crate::clock::DatabaseClock;

tokio::task_local! {
    /// The buffer of the run being polled on this thread.
    static RUN_LOG: Arc<RunLogSink>;
}

thread_local! {
    /// The user's dispatcher's answer to this thread's last `enabled` call through ours:
    /// `(callsite address, answer)`, read back by the `event` that follows it.
    static LAST_ENABLED: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// One scheduler's capture: its dispatcher and bounds, made at start when run logs and
/// history are on.
#[derive(Clone)]
pub(super) struct RunLogCapture {
    dispatch: Dispatch,
    logs: RunLogs,
    level: Level,
    clock: DatabaseClock,
    /// A service without any subscriber: a second, never current, copy of ours, so that
    /// tracing-core's list of dispatchers is longer than one (with ours alone it asks the
    /// thread's current dispatcher for a new callsite's interest, not every registered one,
    /// and would miss ours). Answering as ours does, it changes no callsite's interest.
    _second: Option<Dispatch>,
}

impl RunLogCapture {
    /// The capture for `logs`, None when disabled.
    pub(super) fn new(logs: RunLogs, clock: DatabaseClock) -> Option<Self> {
        let level = logs.min_level()?;
        let fallback = tracing::dispatcher::get_default(Dispatch::clone);
        let second = (!tracing::dispatcher::has_been_set()).then(|| {
            Dispatch::new(Tee {
                level,
                fallback: fallback.clone(),
            })
        });
        Some(RunLogCapture {
            dispatch: Dispatch::new(Tee { level, fallback }),
            logs,
            level,
            clock,
            _second: second,
        })
    }

    /// The buffer of one run starting now, passing calls on to the current dispatcher.
    pub(super) fn start_run(&self) -> Arc<RunLogSink> {
        Arc::new(RunLogSink {
            dispatch: self.dispatch.clone(),
            inner: tracing::dispatcher::get_default(Dispatch::clone),
            level: self.level,
            clock: self.clock.clone(),
            writer: Mutex::new(RunLogWriter::new(
                self.logs.max_lines_kept(),
                self.logs.max_bytes_kept(),
            )),
        })
    }
}

/// One run's buffer, and the dispatcher its events go on to.
pub(super) struct RunLogSink {
    /// Ours, made current while the run is polled.
    dispatch: Dispatch,
    /// The one current where the run started.
    inner: Dispatch,
    level: Level,
    clock: DatabaseClock,
    writer: Mutex<RunLogWriter>,
}

impl RunLogSink {
    /// `future`, with this buffer current (and ours the current dispatcher) while it is polled.
    /// (Not an `async fn`: that would hold `future` twice in its state, and a run's future
    /// is large.)
    pub(super) fn capture<F: Future>(
        self: Arc<Self>,
        future: F,
    ) -> impl Future<Output = F::Output> {
        use tracing::instrument::WithSubscriber;
        let dispatch = self.dispatch.clone();
        RUN_LOG.scope(self, future.with_subscriber(dispatch))
    }

    /// `body` on a blocking body's thread, with this buffer current.
    pub(super) fn capture_blocking<R>(self: Arc<Self>, body: impl FnOnce() -> R) -> R {
        let dispatch = self.dispatch.clone();
        RUN_LOG.sync_scope(self, || tracing::dispatcher::with_default(&dispatch, body))
    }

    /// The lines since the last take (an attempt's), leaving the buffer empty for the next.
    pub(super) fn take(&self) -> Option<RunLog> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn keeps(&self, meta: &Metadata<'_>) -> bool {
        meta.is_event() && *meta.level() <= self.level
    }

    fn record(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let at = self.clock.now();
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        writer.line(at, meta.level().as_str(), meta.target(), |message| {
            event.record(&mut Fields(message));
        });
    }
}

/// The dispatcher of the capture: passes everything on, keeps copies of events.
struct Tee {
    level: Level,
    /// Where calls go outside a run (a span made in a run and closed after it).
    fallback: Dispatch,
}

impl Tee {
    /// `f` with the run's sink when a run is polled on this thread.
    fn inner<R>(&self, f: impl Fn(&Dispatch) -> R) -> R {
        RUN_LOG
            .try_with(|sink| f(&sink.inner))
            .unwrap_or_else(|_| f(&self.fallback))
    }
}

fn callsite_key(meta: &Metadata<'_>) -> usize {
    std::ptr::from_ref(meta).addr()
}

impl Subscriber for Tee {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        let theirs = self.fallback.register_callsite(meta);
        let ours = meta.is_event() && *meta.level() <= self.level;
        if ours && theirs.is_never() {
            Interest::sometimes()
        } else {
            theirs
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::from_level(self.level))
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        match RUN_LOG.try_with(|sink| {
            let theirs = sink.inner.enabled(meta);
            LAST_ENABLED.set((callsite_key(meta), theirs));
            theirs || sink.keeps(meta)
        }) {
            Ok(enabled) => enabled,
            Err(_) => self.fallback.enabled(meta),
        }
    }

    fn event(&self, event: &Event<'_>) {
        let passed = RUN_LOG.try_with(|sink| {
            let meta = event.metadata();
            if sink.keeps(meta) {
                sink.record(event);
            }
            let (key, theirs) = LAST_ENABLED.replace((0, false));
            // An `always` callsite comes without an `enabled` call first: ask.
            let theirs = if key == callsite_key(meta) {
                theirs
            } else {
                sink.inner.enabled(meta)
            };
            if theirs {
                sink.inner.event(event);
            }
        });
        if passed.is_err() {
            self.fallback.event(event);
        }
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.inner(|d| d.new_span(span))
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.inner(|d| d.record(span, values))
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.inner(|d| d.record_follows_from(span, follows))
    }

    fn enter(&self, span: &Id) {
        self.inner(|d| d.enter(span))
    }

    fn exit(&self, span: &Id) {
        self.inner(|d| d.exit(span))
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.inner(|d| d.clone_span(id))
    }

    fn try_close(&self, id: Id) -> bool {
        self.inner(|d| d.try_close(id.clone()))
    }

    fn current_span(&self) -> tracing_core::span::Current {
        self.inner(|d| d.current_span())
    }
}

/// An event's message, then its other fields as `key=value`, into the line being written.
struct Fields<'a>(&'a mut String);

impl Fields<'_> {
    fn separate(&mut self) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.separate();
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.separate();
        let _ = match field.name() {
            "message" => write!(self.0, "{value:?}"),
            name => write!(self.0, "{name}={value:?}"),
        };
    }
}
