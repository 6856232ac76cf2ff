//! Batching: the acquires (and releases) of one instance that come due within a short window
//! go to the provider in one [`acquire_many`](crate::LockProvider::acquire_many) (or
//! [`release_many`](crate::LockProvider::release_many)) round trip.
//!
//! A thousand jobs due at the same second used to cost a thousand statements per instance;
//! batched, the first request opens a batch, every request arriving while the batch is open
//! joins it, and one call decides them all. The batch goes when a whole window (1 ms) passes
//! without a new request, when it holds [`max_batch`](crate::LockProvider::max_batch)
//! requests, or at the latest 50 windows after it opened. Each caller still gets its own outcome, and everything after the provider's answer
//! (lost-grant recovery, metrics, the body) is per fire as before, so every path that goes
//! through the executor (scheduled fires, catch-up runs, shards) is batched without knowing.
//!
//! Only providers that say they batch (`max_batch() > 1`) get batches; a batch of one is sent
//! as a plain `acquire` or `release`, so a lone fire costs what it did before plus the window.
//! Two requests for one name never share a batch: the second opens the next one.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use super::later;
use crate::{AcquireOutcome, Lease, LockError, LockProvider, LockRequest};

type Instant = tokio::time::Instant;

/// The default window of [`LockingTaskExecutor::with_batch_window`](super::LockingTaskExecutor::with_batch_window):
/// how long the first request of a batch waits for others due at the same instant.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(1);

/// The longest a batch stays open, in windows, while fires keep joining it.
pub const MAX_WINDOWS: u32 = 50;

/// The window of releases, in acquire windows: a release waits at most this many windows (5 ms
/// at the default) past `max(the body's end, lock_at_least_for)` for others to join it. The
/// bodies of one burst end over tens of milliseconds on a busy host; with the acquire's 1 ms
/// they released in dozens of statements a second per instance, with 5 ms in a handful. The
/// lock is held those few milliseconds longer, which no fire of a cron schedule (one a second
/// at most) can see.
pub const RELEASE_WINDOWS: u32 = 5;

/// Where a batched call tells each item's answer, by the item's index.
pub type Tell<O> = Arc<dyn Fn(usize, O) + Send + Sync>;

/// What one batched call sends: a request (or a lease to release) and its own reply.
pub trait Batched: Send + 'static {
    /// What the items are sent to: a lock provider for acquires and releases, or a store of
    /// another crate's (the scheduler's run history).
    type Target: ?Sized + Send + Sync + 'static;
    /// What the caller gets back.
    type Out: Send + 'static;
    /// The lock name: two items of one name never share a batch.
    fn name(&self) -> &Arc<str>;
    /// Sends one item alone.
    fn send_one(
        target: Arc<Self::Target>,
        item: Self,
    ) -> BoxFuture<'static, Result<Self::Out, LockError>>;
    /// Sends several in one call; `Err` applies to all of them.
    fn send_many(
        target: Arc<Self::Target>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<Self::Out>, LockError>>
    where
        Self: Sized;
    /// Sends several in one call, telling each item's answer (by its index) as soon as the
    /// provider has it; `Err` applies to the items not told. The default tells them all when
    /// [`send_many`](Self::send_many) returns.
    fn send_many_each(
        target: Arc<Self::Target>,
        items: Vec<Self>,
        tell: Tell<Self::Out>,
    ) -> BoxFuture<'static, Result<(), LockError>>
    where
        Self: Sized,
    {
        Box::pin(async move {
            for (at, out) in Self::send_many(target, items)
                .await?
                .into_iter()
                .enumerate()
            {
                tell(at, out);
            }
            Ok(())
        })
    }
    /// The operation's name, for errors.
    const OPERATION: &'static str;
    /// The latest this item may be sent, joining at `now` a batch whose window is `window`.
    fn deadline(&self, now: Instant, window: Duration) -> Instant;
    /// The earliest its batch is sent unless it fills up first: a write nobody waits for (a
    /// run's history start row) may leave the database to what is due sooner. None: as soon
    /// as a window passes without a new item.
    fn not_before(&self) -> Option<Instant> {
        None
    }
    /// How many items `target` takes in one call (1: it does not batch these).
    fn max(target: &Self::Target) -> usize;
    /// `target`, for errors (`LockProvider::describe`).
    fn describe(target: &Self::Target) -> String;
}

impl Batched for LockRequest {
    type Target = dyn LockProvider;
    type Out = AcquireOutcome;
    fn max(provider: &dyn LockProvider) -> usize {
        provider.max_batch()
    }
    fn describe(provider: &dyn LockProvider) -> String {
        provider.describe()
    }
    fn name(&self) -> &Arc<str> {
        &self.name
    }
    fn send_one(
        provider: Arc<dyn LockProvider>,
        item: Self,
    ) -> BoxFuture<'static, Result<AcquireOutcome, LockError>> {
        Box::pin(async move { provider.acquire(&item).await })
    }
    fn send_many(
        provider: Arc<dyn LockProvider>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<AcquireOutcome>, LockError>> {
        Box::pin(async move { provider.acquire_many(&items).await })
    }
    /// The grants a provider decides first reach their fires first.
    fn send_many_each(
        provider: Arc<dyn LockProvider>,
        items: Vec<Self>,
        tell: Tell<AcquireOutcome>,
    ) -> BoxFuture<'static, Result<(), LockError>> {
        Box::pin(async move { provider.acquire_many_each(&items, &*tell).await })
    }
    const OPERATION: &'static str = "acquire";
    fn deadline(&self, now: Instant, window: Duration) -> Instant {
        later(now, window.saturating_mul(MAX_WINDOWS))
    }
}

/// A lease to release, its `lock_at_least_for`, when its acquire was sent, and until when it
/// may wait for the releases of its burst.
pub(super) struct Release(
    pub(super) Lease,
    pub(super) Duration,
    pub(super) Instant,
    pub(super) Option<Instant>,
);

impl Batched for Release {
    type Target = dyn LockProvider;
    type Out = bool;
    fn max(provider: &dyn LockProvider) -> usize {
        provider.max_batch()
    }
    fn describe(provider: &dyn LockProvider) -> String {
        provider.describe()
    }
    fn name(&self) -> &Arc<str> {
        self.0.shared_name()
    }
    fn send_one(
        provider: Arc<dyn LockProvider>,
        item: Self,
    ) -> BoxFuture<'static, Result<bool, LockError>> {
        Box::pin(async move { provider.release(&item.0, item.1).await })
    }
    fn send_many(
        provider: Arc<dyn LockProvider>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<bool>, LockError>> {
        Box::pin(async move {
            let pairs: Vec<(Lease, Duration)> = items.into_iter().map(|r| (r.0, r.1)).collect();
            provider.release_many(&pairs).await
        })
    }
    const OPERATION: &'static str = "release";
    /// A release may wait while `lock_at_least_for` keeps the lock anyway (its lease began
    /// after the acquire was sent), until its linger (a scheduled fire's release waits for the
    /// others of its instant, as far as no next fire can see), and otherwise one window: a
    /// lock is never held more than a window past what those and the body's end ask.
    fn deadline(&self, now: Instant, window: Duration) -> Instant {
        let deadline = later(now, window).max(later(self.2, self.1));
        self.3.map_or(deadline, |linger| deadline.max(linger))
    }
}

type Reply<T> = oneshot::Sender<Result<<T as Batched>::Out, LockError>>;

/// The batch being filled.
struct Open<T: Batched> {
    /// Which batch this is: the timer of an earlier batch (sent early, full) leaves it alone.
    generation: u64,
    /// When the last item joined: the batch goes once none has joined for a window.
    last_joined: Instant,
    /// The earliest deadline of its items: the batch goes then at the latest.
    deadline: Instant,
    /// The latest `not_before` of its items: the batch goes no sooner unless full.
    not_before: Option<Instant>,
    items: Vec<T>,
    replies: Vec<Reply<T>>,
    names: HashSet<Arc<str>, foldhash::fast::RandomState>,
}

struct State<T: Batched> {
    open: Option<Open<T>>,
    next_generation: u64,
}

/// Collects items for `window`, then sends them in one call; shared by clones of an executor.
pub struct Coalescer<T: Batched> {
    provider: Arc<T::Target>,
    window: Duration,
    max: usize,
    state: Mutex<State<T>>,
}

impl<T: Batched> Coalescer<T> {
    /// A coalescer on `provider`, or `None` when the provider does not batch or the window is
    /// zero (batching off).
    pub fn new(provider: &Arc<T::Target>, window: Duration) -> Option<Arc<Self>> {
        let max = T::max(provider.as_ref());
        (max > 1 && !window.is_zero()).then(|| {
            Arc::new(Coalescer {
                provider: provider.clone(),
                window,
                max,
                state: Mutex::new(State {
                    open: None,
                    next_generation: 0,
                }),
            })
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `item` with the others of its window and waits for its own answer. Dropping the
    /// returned future does not withdraw the item: the batch is sent anyway (the executor reads
    /// a lock back after an acquire whose answer it did not wait for).
    pub async fn submit(self: &Arc<Self>, item: T) -> Result<T::Out, LockError> {
        self.enqueue(item).await
    }

    /// [`submit`](Self::submit), with `item` joining its batch now, before the answer is
    /// awaited: a caller that needs the answer only later (the scheduler's history start row,
    /// whose id the run's end needs) spends no task on the wait. Must be called inside a tokio
    /// runtime (it may spawn the batch's sender).
    pub fn enqueue(
        self: &Arc<Self>,
        item: T,
    ) -> impl Future<Output = Result<T::Out, LockError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let name = item.name().clone();
        let (timer, full) = {
            let mut state = self.lock();
            // Two items of one name never share a batch: the open one goes now, this one
            // opens the next.
            let clash = state
                .open
                .as_ref()
                .is_some_and(|open| open.names.contains(&name));
            let early = if clash { state.open.take() } else { None };
            let mut timer = None;
            if state.open.is_none() {
                let generation = state.next_generation;
                state.next_generation += 1;
                state.open = Some(Open {
                    generation,
                    last_joined: Instant::now(),
                    deadline: later(Instant::now(), self.window.saturating_mul(MAX_WINDOWS)),
                    not_before: None,
                    items: Vec::new(),
                    replies: Vec::new(),
                    names: HashSet::default(),
                });
                timer = Some(generation);
            }
            let open = state.open.as_mut().expect("opened above");
            let now = Instant::now();
            open.last_joined = now;
            open.deadline = open.deadline.min(item.deadline(now, self.window));
            open.not_before = open.not_before.max(item.not_before());
            open.items.push(item);
            open.replies.push(tx);
            open.names.insert(name.clone());
            // A full batch goes at once; its timer then finds another batch (or none) open.
            let full = if open.items.len() >= self.max {
                state.open.take()
            } else {
                None
            };
            (timer, [early, full])
        };
        for batch in full.into_iter().flatten() {
            tokio::spawn(self.clone().send(batch));
        }
        if let Some(generation) = timer {
            let this = self.clone();
            tokio::spawn(async move {
                // The fires of one instant wake one after another (a thousand job loops take
                // tens of milliseconds on a busy host): the batch stays open while they keep
                // joining, until a whole window passes without one (and its items' latest
                // `not_before` has come) or its earliest deadline comes.
                let mut wake = later(Instant::now(), this.window);
                let batch = loop {
                    tokio::time::sleep_until(wake).await;
                    let mut state = this.lock();
                    let Some(open) = state.open.as_ref().filter(|o| o.generation == generation)
                    else {
                        break None;
                    };
                    let quiet = later(open.last_joined, this.window);
                    let due = quiet
                        .max(open.not_before.unwrap_or(quiet))
                        .min(open.deadline);
                    if due <= Instant::now() {
                        break state.open.take();
                    }
                    wake = due;
                };
                if let Some(batch) = batch {
                    this.send(batch).await;
                }
            });
        }
        let this = self.clone();
        async move {
            rx.await.unwrap_or_else(|_| {
                Err(LockError::provider(
                    T::OPERATION,
                    &*name,
                    T::describe(&this.provider),
                    "the batch carrying this call was dropped (the runtime shut down)",
                ))
            })
        }
    }

    async fn send(self: Arc<Self>, batch: Open<T>) {
        let Open { items, replies, .. } = batch;
        if items.len() == 1 {
            let item = items.into_iter().next().expect("one item");
            let out = T::send_one(self.provider.clone(), item).await;
            if let Some(reply) = replies.into_iter().next() {
                let _ = reply.send(out);
            }
            return;
        }
        let names: Vec<Arc<str>> = items.iter().map(|i| i.name().clone()).collect();
        let count = names.len();
        // Each reply goes as soon as the provider tells its answer; the rest after the call.
        let waiting: Arc<[Mutex<Option<Reply<T>>>]> =
            replies.into_iter().map(|r| Mutex::new(Some(r))).collect();
        let told = waiting.clone();
        let tell: Tell<T::Out> = Arc::new(move |at, out| {
            if let Some(reply) = told
                .get(at)
                .and_then(|r| r.lock().unwrap_or_else(|p| p.into_inner()).take())
            {
                let _ = reply.send(Ok(out));
            }
        });
        let result = T::send_many_each(self.provider.clone(), items, tell).await;
        let why = match &result {
            Ok(()) => format!(
                "{} told no outcome for it in a batch of {count}",
                T::describe(&self.provider)
            ),
            Err(error) => error.to_string(),
        };
        // The first caller not told gets the error itself, the others its description: each
        // then treats its own call as one whose effect is unknown.
        let mut error = result.err();
        for (reply, name) in waiting.iter().zip(&names) {
            let Some(reply) = reply.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                continue;
            };
            let e = error.take().unwrap_or_else(|| {
                LockError::provider(
                    T::OPERATION,
                    &**name,
                    T::describe(&self.provider),
                    format!("batched {} failed: {why}", T::OPERATION),
                )
            });
            let _ = reply.send(Err(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Batched, Instant, Release};
    use crate::{DEFAULT_MAX_SLOT_LEAD, FireSlot, Lease, LockRequest};

    fn release(linger_until: Option<Instant>) -> Release {
        let request = LockRequest {
            name: "report".into(),
            locked_by: "a".into(),
            lock_at_most_for: Duration::from_secs(30),
            slot: Some(FireSlot::new(chrono::Utc::now())),
            max_slot_lead: DEFAULT_MAX_SLOT_LEAD,
            give_up_at: None,
        };
        Release(
            Lease::granted(&request, 1),
            Duration::ZERO,
            Instant::now(),
            linger_until,
        )
    }

    /// Items that record when their batch was sent, and how many it carried.
    struct Item(std::sync::Arc<str>, Option<Instant>);

    #[derive(Default)]
    struct Sent(std::sync::Mutex<Vec<(Instant, usize)>>);

    impl Batched for Item {
        type Target = Sent;
        type Out = ();
        fn name(&self) -> &std::sync::Arc<str> {
            &self.0
        }
        fn send_one(
            target: std::sync::Arc<Sent>,
            _: Self,
        ) -> futures_util::future::BoxFuture<'static, Result<(), crate::LockError>> {
            target.0.lock().unwrap().push((Instant::now(), 1));
            Box::pin(async { Ok(()) })
        }
        fn send_many(
            target: std::sync::Arc<Sent>,
            items: Vec<Self>,
        ) -> futures_util::future::BoxFuture<'static, Result<Vec<()>, crate::LockError>> {
            target.0.lock().unwrap().push((Instant::now(), items.len()));
            Box::pin(async move { Ok(vec![(); items.len()]) })
        }
        const OPERATION: &'static str = "test";
        fn deadline(&self, now: Instant, window: Duration) -> Instant {
            let deadline = now + window * super::MAX_WINDOWS;
            self.1.map_or(deadline, |hold| deadline.max(hold))
        }
        fn not_before(&self) -> Option<Instant> {
            self.1
        }
        fn max(_: &Sent) -> usize {
            10
        }
        fn describe(_: &Sent) -> String {
            "test".into()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_waits_for_its_items_not_before_unless_it_fills_up() {
        let sent = std::sync::Arc::new(Sent::default());
        let window = Duration::from_millis(5);
        let coalescer = super::Coalescer::<Item>::new(&sent, window).unwrap();
        let start = Instant::now();
        let hold = start + Duration::from_millis(100);
        let replies: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|name| coalescer.enqueue(Item(name.into(), Some(hold))))
            .collect();
        for reply in replies {
            reply.await.unwrap();
        }
        assert_eq!(
            *sent.0.lock().unwrap(),
            [(hold, 3)],
            "one batch, at its hold"
        );

        // Without a hold: one window after the last item.
        sent.0.lock().unwrap().clear();
        let start = Instant::now();
        let replies: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| coalescer.enqueue(Item(name.into(), None)))
            .collect();
        for reply in replies {
            reply.await.unwrap();
        }
        assert_eq!(*sent.0.lock().unwrap(), [(start + window, 2)]);

        // A full batch goes at once, hold or not.
        sent.0.lock().unwrap().clear();
        let start = Instant::now();
        let hold = start + Duration::from_millis(100);
        let replies: Vec<_> = (0..10)
            .map(|n| coalescer.enqueue(Item(n.to_string().into(), Some(hold))))
            .collect();
        for reply in replies {
            reply.await.unwrap();
        }
        assert_eq!(*sent.0.lock().unwrap(), [(start, 10)]);
    }

    #[test]
    fn a_release_waits_one_window_or_until_its_linger() {
        let now = Instant::now();
        let window = Duration::from_millis(5);
        assert_eq!(release(None).deadline(now, window), now + window);
        // Within the linger: the batch may wait for the burst's other releases until then.
        let linger = now + Duration::from_millis(250);
        assert_eq!(release(Some(linger)).deadline(now, window), linger);
        // A body that ended past its linger is released within a window, as without one.
        let passed = now - Duration::from_millis(1);
        assert_eq!(release(Some(passed)).deadline(now, window), now + window);
    }
}
