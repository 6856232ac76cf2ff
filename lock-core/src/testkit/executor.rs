//! The executor's guarantees on a real store, through [`FaultyProvider`]: a grant whose reply
//! was lost is adopted (and only a grant this call never saw) or, past the operation timeout,
//! released at the next acquire; a grant decided too late is refused; and keep-alive holds the lease
//! from the moment it was requested, retries failed extensions, and resolves `cancelled()`
//! before another instance can take over.
//!
//! These functions take the fixture shared (`Arc<dyn Fixture>`), because the executor keeps
//! its provider for as long as it lives.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use tokio::time::Instant;

use super::faults::{Faults, FaultyProvider};
use super::support::{LONG, SHORT, release, request, try_acquire, unique_name};
use super::{Fixture, support};
use crate::{
    AcquireOutcome, FireSlot, JobContext, LockConfiguration, LockOutcome, LockProvider,
    LockingTaskExecutor,
};

/// The executor's bound on each call in these checks: a delayed reply outlives it.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(1);
/// A reply held this long is lost to an executor bounded by [`OPERATION_TIMEOUT`].
const LOST: Duration = Duration::from_secs(2);

fn executor(faulty: &Arc<FaultyProvider>, owner: &str) -> LockingTaskExecutor {
    LockingTaskExecutor::from_shared(faulty.clone())
        .with_instance_id(owner)
        .expect("a valid instance id")
        .with_operation_timeout(OPERATION_TIMEOUT)
}

fn faulty(fixture: &Arc<dyn Fixture>, faults: Faults) -> Arc<FaultyProvider> {
    let faulty = Arc::new(FaultyProvider::new(fixture.clone()));
    faulty.set(faults);
    faulty
}

/// Runs one fire of `slot` and returns the fence the body saw, or `None` when it did not run
/// (refused or failed).
async fn fire(
    executor: &LockingTaskExecutor,
    config: &LockConfiguration,
    slot: FireSlot,
) -> Option<u64> {
    let outcome = executor
        .execute_in_slot(config, Some(slot), async {
            JobContext::current().expect("inside a body").fence()
        })
        .await;
    match outcome {
        Ok(LockOutcome::Executed(fence)) => Some(fence),
        Ok(LockOutcome::Skipped) | Err(_) => None,
    }
}

/// One fire of a fresh slot of `name` by `owner` through `faults`: what the body saw (see
/// [`fire`]), the slot, and the row afterwards.
async fn fire_once(
    fixture: &Arc<dyn Fixture>,
    name: &Arc<str>,
    owner: &str,
    faults: Faults,
) -> (Option<u64>, FireSlot, crate::LockRecord) {
    let executor = executor(&faulty(fixture, faults), owner);
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    let slot = FireSlot::new(Utc::now());
    let ran = fire(&executor, &config, slot).await;
    (ran, slot, record(fixture.provider(), name).await)
}

async fn record(provider: &dyn LockProvider, name: &str) -> crate::LockRecord {
    provider
        .list_locks()
        .await
        .unwrap_or_else(|e| panic!("list_locks failed: {e:?}"))
        .into_iter()
        .find(|row| row.name == name)
        .unwrap_or_else(|| panic!("list_locks: no row for {name:?}"))
}

/// An acquire that committed but whose reply came after the operation timeout (no
/// `give_up_at`: a direct fire): the fire fails within the operation timeout (no time is left
/// for a read-back), and the lease the store granted in this instance's name, held by nobody,
/// is released by this instance's next fire of the name, which then runs.
pub async fn lost_acquire_reply_is_released(fixture: Arc<dyn Fixture>) {
    let name = unique_name("lost-reply");
    let owner = format!("{name}-owner");
    let faulty = faulty(&fixture, Faults::default());
    let executor = executor(&faulty, &owner);
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    faulty.set(Faults {
        acquire_reply_delay: LOST,
        ..Faults::default()
    });
    let slot = FireSlot::new(Utc::now());
    assert_eq!(
        fire(&executor, &config, slot).await,
        None,
        "lost acquire reply: the fire must fail at the operation timeout"
    );
    let row = record(fixture.provider(), &name).await;
    assert_eq!(
        (row.held, row.locked_by.as_str()),
        (true, owner.as_str()),
        "lost acquire reply: the store granted the acquire"
    );
    faulty.set(Faults::default());
    let next = FireSlot::new(slot.instant() + TimeDelta::seconds(1));
    let fence = fire(&executor, &config, next).await.unwrap_or_else(|| {
        panic!("lost acquire reply: the next fire must release the orphan lease and run")
    });
    let after = record(fixture.provider(), &name).await;
    assert_eq!(
        (after.fence, after.last_fire, after.held),
        (fence, Some(next.instant()), false),
        "lost acquire reply: the next fire runs with a new fence and releases"
    );
    assert!(fence > row.fence, "lost acquire reply: a new grant");
}

/// The same through a batch: fires of several names due at the same slot go to the provider
/// in one `acquire_many` (where it batches), and its reply is lost; each fire fails, and each
/// name's next fire releases its orphan lease and runs.
pub async fn lost_batched_replies_are_released(fixture: Arc<dyn Fixture>) {
    let names: Vec<Arc<str>> = (0..3)
        .map(|n| unique_name(&format!("lost-batch-{n}")))
        .collect();
    let owner = format!("{}-owner", names[0]);
    let faulty = faulty(&fixture, Faults::default());
    let executor = executor(&faulty, &owner);
    let fire_all = |slot: FireSlot| {
        let fires = names.iter().map(|name| {
            let executor = executor.clone();
            let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
            async move { fire(&executor, &config, slot).await }
        });
        futures_util::future::join_all(fires)
    };
    faulty.set(Faults {
        acquire_reply_delay: LOST,
        ..Faults::default()
    });
    let slot = FireSlot::new(Utc::now());
    let lost = fire_all(slot).await;
    assert!(
        lost.iter().all(Option::is_none),
        "lost batched reply: every fire must fail at the operation timeout, got {lost:?}"
    );
    faulty.set(Faults::default());
    let next = FireSlot::new(slot.instant() + TimeDelta::seconds(1));
    let ran = fire_all(next).await;
    for (name, ran) in names.iter().zip(ran) {
        let row = record(fixture.provider(), name).await;
        let fence = ran.unwrap_or_else(|| {
            panic!("lost batched reply: {name}'s next fire did not release the orphan and run")
        });
        assert_eq!(
            (row.fence, row.locked_by.as_str(), row.last_fire, row.held),
            (fence, owner.as_str(), Some(next.instant()), false),
            "lost batched reply: {name}'s next fire must run with its own fence and release"
        );
    }
}

/// A driver that retried an acquire after its connection died gets "held" for the grant its
/// first attempt committed. When the refusal names this instance and this slot, the executor
/// adopts the grant; a provider whose refusals do not name the holder cannot tell, and the
/// fire is skipped (the lock then stays until `lock_at_most_for`).
pub async fn retried_acquire_is_adopted(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("retried");
    let owner = format!("{name}-owner");
    // Does a refusal name the holder? Asked of a name of its own.
    let probe = unique_name("retried-probe");
    let probe_request = request(&probe, &owner, LONG, None);
    let probe_lease = support::must_acquire(provider, &probe_request, "retried: probe").await;
    let names_holder = match provider.acquire(&probe_request).await {
        Ok(AcquireOutcome::Refused(refusal)) => refusal.locked_by.as_deref() == Some(&owner),
        other => panic!("retried: the probe's second acquire must be refused, got {other:?}"),
    };
    release(provider, &probe_lease, Duration::ZERO).await;

    let faults = Faults {
        acquire_retried: true,
        ..Faults::default()
    };
    let (ran, _, row) = fire_once(&fixture, &name, &owner, faults).await;
    if names_holder {
        assert_eq!(
            ran,
            Some(row.fence),
            "retried acquire: the first attempt's grant must be adopted"
        );
        assert!(!row.held, "retried acquire: released after the body");
    } else {
        assert_eq!(
            ran, None,
            "retried acquire: refusals that do not name the holder are not adopted"
        );
        provider.force_unlock(&name).await.expect("force_unlock");
    }
}

/// A row that is this instance's for this slot because the slot already RAN (released, and
/// `lock_at_least_for` keeps it held) is never adopted: after a lost reply, a retried
/// acquire, from the same executor or a new one with the same instance id, the body does not
/// run a second time.
pub async fn finished_slot_is_not_adopted(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("ran-once");
    let owner = format!("{name}-owner");
    let faulty = faulty(&fixture, Faults::default());
    let first = executor(&faulty, &owner);
    // In the past, so that both slots below (up to LONG later) are due by the provider's clock.
    let slot = FireSlot::new(Utc::now() - TimeDelta::hours(1));
    // at_least below at_most, and equal to it: the released row looks like a fresh grant then.
    for at_least in [Duration::from_secs(60), LONG] {
        let config = LockConfiguration::new(name.clone(), LONG, at_least).expect("valid");
        let slot = FireSlot::new(slot.instant() + TimeDelta::seconds(at_least.as_secs() as i64));
        assert!(
            fire(&first, &config, slot).await.is_some(),
            "finished slot: the first fire runs"
        );
        let faults = [
            Faults {
                acquire_reply_delay: LOST,
                ..Faults::default()
            },
            Faults {
                acquire_retried: true,
                ..Faults::default()
            },
        ];
        for faults in faults {
            faulty.set(faults);
            let again = fire(&first, &config, slot).await;
            assert_eq!(
                again, None,
                "finished slot: the same slot ran twice on the same executor after {faults:?} (at_least {at_least:?})"
            );
            if at_least < LONG {
                // A new executor knows no fence: the row's shape must tell it apart.
                let again = fire(&executor(&faulty, &owner), &config, slot).await;
                assert_eq!(
                    again, None,
                    "finished slot: the same slot ran twice on a new executor after {faults:?}"
                );
            }
            faulty.set(Faults::default());
        }
        provider.force_unlock(&name).await.expect("force_unlock");
    }
}

/// Two calls of one lock on one executor at once: the second is refused by the first's grant,
/// which names this very instance (and looks like a fresh grant), also while the first's
/// answer is still on its way. It must be skipped, never adopted: the body runs once.
pub async fn concurrent_call_is_not_adopted(fixture: Arc<dyn Fixture>) {
    let name = unique_name("concurrent");
    let faulty = faulty(
        &fixture,
        Faults {
            // The first call's answer takes a while; the second asks meanwhile.
            acquire_reply_delay: Duration::from_millis(400),
            ..Faults::default()
        },
    );
    let executor = executor(&faulty, &format!("{name}-owner"));
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    let running = std::sync::atomic::AtomicU32::new(0);
    let body = || async {
        running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(600)).await;
    };
    let first = executor.execute_with_lock(&config, body());
    let second = async {
        // The first's grant is committed (its answer is now held for 400 ms): a fixed sleep
        // here raced a slow first acquire on a loaded machine and asked before it.
        faulty.acquires_answered(1).await;
        // Answered at once: refused while the first's answer is still delayed.
        faulty.set(Faults::default());
        executor.execute_with_lock(&config, body()).await
    };
    let (first, second) = tokio::join!(first, second);
    assert!(
        matches!(first, Ok(LockOutcome::Executed(()))),
        "concurrent calls: the first runs, got {first:?}"
    );
    assert!(
        !matches!(second, Ok(LockOutcome::Executed(()))),
        "concurrent calls: the second adopted the first's grant and ran at the same time"
    );
    assert_eq!(running.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// What a keep-alive body saw while another instance kept asking for its lock.
#[derive(Debug, Default)]
struct Watch {
    /// When `cancelled()` resolved, from before the acquire was sent.
    cancelled_at: Option<Duration>,
    /// When the rival got the lock, and whether the body had been cancelled by then.
    rival_took_at: Option<(Duration, bool)>,
}

/// Runs a keep-alive body of `lock_at_most_for = SHORT` for `run_for` (or until the rival
/// takes the lock) while a rival instance asks for the lock every 20 ms on the store itself.
async fn watch_keep_alive(
    fixture: &Arc<dyn Fixture>,
    faults: Faults,
    test: &str,
    run_for: Duration,
) -> Watch {
    let name = unique_name(test);
    let faulty = faulty(fixture, faults);
    let executor = LockingTaskExecutor::from_shared(faulty.clone())
        .with_instance_id(format!("{name}-owner"))
        .expect("a valid instance id");
    let config = LockConfiguration::new(name.clone(), SHORT, Duration::ZERO)
        .expect("valid")
        .with_keep_alive(true);
    let provider = fixture.provider();
    let rival = request(&name, "rival", LONG, None);
    let began = Instant::now();
    let outcome = executor
        .execute_with_lock(&config, async {
            let ctx = JobContext::current().expect("inside a body");
            let cancelled = async {
                tokio::select! {
                    _ = ctx.cancelled() => Some(began.elapsed()),
                    _ = tokio::time::sleep_until(began + run_for) => None,
                }
            };
            let rival_polls = async {
                while began.elapsed() < run_for {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    if let Some(lease) = try_acquire(provider, &rival).await {
                        // Checked after the grant: not cancelled now means not before it either.
                        let seen = (began.elapsed(), ctx.is_cancelled());
                        release(provider, &lease, Duration::ZERO).await;
                        return Some(seen);
                    }
                }
                None
            };
            let (cancelled_at, rival_took_at) = tokio::join!(cancelled, rival_polls);
            Watch {
                cancelled_at,
                rival_took_at,
            }
        })
        .await;
    match outcome {
        Ok(LockOutcome::Executed(watch)) => watch,
        other => panic!("{test}: the keep-alive body did not run: {other:?}"),
    }
}

/// The lease runs from when the acquire was REQUESTED: a slow acquire (its reply takes 60 % of
/// `lock_at_most_for`) must not let the lease end before the first extension.
pub async fn keep_alive_counts_from_the_request(fixture: Arc<dyn Fixture>) {
    let faults = Faults {
        acquire_reply_delay: SHORT * 6 / 10,
        ..Faults::default()
    };
    let watch = watch_keep_alive(&fixture, faults, "ka-slow-acquire", SHORT * 17 / 10).await;
    assert_eq!(
        watch.rival_took_at, None,
        "keep-alive after a slow acquire: another instance took the lock while the body held it \
         ({watch:?})"
    );
    assert_eq!(
        watch.cancelled_at, None,
        "keep-alive after a slow acquire: the lease was lost ({watch:?})"
    );
}

/// One failed extension with half the lease left is retried, not taken as a lost lock.
pub async fn keep_alive_retries_a_failed_extend(fixture: Arc<dyn Fixture>) {
    let faults = Faults {
        failing_extends: 1,
        ..Faults::default()
    };
    let watch = watch_keep_alive(&fixture, faults, "ka-retry", SHORT * 17 / 10).await;
    assert_eq!(
        watch.cancelled_at, None,
        "keep-alive: one failed extension cancelled the body with half the lease left ({watch:?})"
    );
    assert_eq!(
        watch.rival_took_at, None,
        "keep-alive: lock lost ({watch:?})"
    );
}

/// On a slow database whose extensions all fail, `cancelled()` resolves only near the lease's
/// end (extensions are retried until then), and always before another instance gets the lock.
pub async fn cancelled_before_another_can_take_over(fixture: Arc<dyn Fixture>) {
    let faults = Faults {
        acquire_reply_delay: SHORT * 3 / 10,
        failing_extends: u32::MAX,
        ..Faults::default()
    };
    let watch = watch_keep_alive(&fixture, faults, "ka-takeover", SHORT * 3).await;
    let cancelled_at = watch.cancelled_at.unwrap_or_else(|| {
        panic!("keep-alive: extensions failed but cancelled() never resolved ({watch:?})")
    });
    assert!(
        cancelled_at >= SHORT * 9 / 10,
        "keep-alive: cancelled() resolved at {cancelled_at:?}, before the lease's end (extensions \
         must be retried until then) ({watch:?})"
    );
    let (taken_at, cancelled) = watch
        .rival_took_at
        .unwrap_or_else(|| panic!("keep-alive: the lease never expired for the rival ({watch:?})"));
    assert!(
        cancelled && taken_at >= cancelled_at,
        "keep-alive: another instance took the lock before cancelled() resolved ({watch:?})"
    );
}

/// A scheduled fire whose acquire reaches the store only after the executor gave up on it
/// (a stalled link or server, [`Faults::acquire_request_delay`]): the fire fails with a
/// timeout, and the store, deciding after the request's `give_up_at`, grants nothing: the
/// row is not held and the slot is not spent, so the next slot's fire runs.
pub async fn late_grant_leaves_no_lease(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("late-grant");
    let owner = format!("{name}-owner");
    let faulty = faulty(
        &fixture,
        Faults {
            acquire_request_delay: LOST,
            ..Faults::default()
        },
    );
    let executor = executor(&faulty, &owner);
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    // The slot is the store's now, so it is due now on the monotonic clock.
    let db_now = provider
        .database_time()
        .await
        .unwrap_or_else(|e| panic!("database_time failed: {e:?}"));
    let slot = FireSlot::new(db_now);
    let late = executor
        .execute_fire(
            &config,
            Some(slot),
            crate::FireKind::Scheduled,
            Some(Instant::now()),
            None,
            async {},
        )
        .await;
    assert!(
        matches!(late, Err(crate::LockError::Timeout { .. })),
        "late grant: the stalled acquire must fail with a timeout, got {late:?}"
    );
    // The store has decided it now, a whole second after the executor gave up.
    faulty.acquires_answered(1).await;
    faulty.set(Faults::default());
    if let Some(row) = provider.read_lock(&name).await.expect("read_lock") {
        assert!(
            !row.held && row.last_fire != Some(slot.instant()),
            "late grant: the store granted an acquire decided after its sender gave up: {row:?}"
        );
    }
    let next = FireSlot::new(slot.instant() + TimeDelta::milliseconds(1));
    assert!(
        fire(&executor, &config, next).await.is_some(),
        "late grant: the next slot's fire must run"
    );
}

/// A lease in this instance's own name that no executor of this process holds (a grant decided
/// after its sender gave up, with no `give_up_at` to refuse it) is released by this instance at
/// its next acquire of the name, which then asks again and runs.
pub async fn orphan_of_this_instance_is_released(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("orphan");
    let owner = format!("{name}-owner");
    let executor = executor(&faulty(&fixture, Faults::default()), &owner);
    let slot = FireSlot::new(Utc::now() - TimeDelta::minutes(1));
    // The late grant: committed in this instance's name, answered to nobody.
    let orphan = support::must_acquire(
        provider,
        &request(&name, &owner, LONG, Some(slot)),
        "orphan: the late grant",
    )
    .await;
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    let next = FireSlot::new(slot.instant() + TimeDelta::seconds(1));
    let ran = fire(&executor, &config, next).await;
    assert!(
        ran.is_some_and(|fence| fence > orphan.fence()),
        "orphan: the next fire must release the orphan lease (fence {}) and run, got {ran:?}",
        orphan.fence()
    );
    let row = record(provider, &name).await;
    assert_eq!(
        (row.held, row.last_fire),
        (false, Some(next.instant())),
        "orphan: the fire ran its slot and released"
    );

    // A direct call (no slot) finds the orphan of an earlier direct call the same way.
    let name = unique_name("orphan-direct");
    let orphan = support::must_acquire(
        provider,
        &request(&name, &owner, LONG, None),
        "orphan: a direct call's late grant",
    )
    .await;
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    let ran = executor
        .execute_with_lock(&config, async {
            JobContext::current().expect("inside a body").fence()
        })
        .await;
    assert!(
        matches!(ran, Ok(LockOutcome::Executed(fence)) if fence > orphan.fence()),
        "orphan: a direct call must release the orphan lease (fence {}) and run, got {ran:?}",
        orphan.fence()
    );
    assert!(
        !record(provider, &name).await.held,
        "orphan: released after the call"
    );
}

/// A lease whose body ran and ended here but whose release was lost (the database went away
/// between the body's end and the release's commit) is held by nobody: this instance's next
/// fire of the name releases it by fence and runs, instead of being refused until
/// `lock_at_most_for` (found by the chaos suite: a crash right after a fire held an
/// every-second job for its whole 10 s lease).
pub async fn lost_release_is_released_at_the_next_fire(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("lost-release");
    let owner = format!("{name}-owner");
    let faulty = faulty(
        &fixture,
        Faults {
            failing_releases: 1,
            ..Faults::default()
        },
    );
    let executor = executor(&faulty, &owner);
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    let slot = FireSlot::new(Utc::now() - TimeDelta::minutes(1));
    let first = fire(&executor, &config, slot).await;
    let first = first.expect("lost release: the first fire runs");
    // The release runs on a task of its own after the body: wait until it has been refused
    // its store. The task then lets the lease go in the same poll (no await in between);
    // 100 ms leave it room to finish on a loaded machine.
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while faulty.faults().failing_releases != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "lost release: the release was never attempted"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let row = record(provider, &name).await;
    assert_eq!(
        (row.held, row.locked_by.as_str(), row.fence),
        (true, owner.as_str(), first),
        "lost release: the failed release leaves the lease held"
    );
    let next = FireSlot::new(slot.instant() + TimeDelta::seconds(1));
    let ran = fire(&executor, &config, next).await;
    assert!(
        ran.is_some_and(|fence| fence > first),
        "lost release: the next fire must release the lease left by the lost release (fence \
         {first}) and run, got {ran:?}"
    );
}

/// A lease in this instance's name that another executor of the same process (and instance
/// id) holds is no orphan: a fire of the name by a sibling executor is skipped and the lease
/// stays its holder's.
pub async fn lease_of_a_sibling_executor_is_kept(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("sibling");
    let owner = format!("{name}-owner");
    let faulty = faulty(&fixture, Faults::default());
    let (holder, sibling) = (executor(&faulty, &owner), executor(&faulty, &owner));
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    let slot = FireSlot::new(Utc::now() - TimeDelta::minutes(1));
    let next = FireSlot::new(slot.instant() + TimeDelta::seconds(1));
    let (started, start) = tokio::sync::oneshot::channel();
    let (finish, finished) = tokio::sync::oneshot::channel::<()>();
    let holding = holder.execute_in_slot(&config, Some(slot), async {
        let _ = started.send(JobContext::current().expect("inside a body").fence());
        let _ = finished.await;
    });
    // Outside the holder's body (inside it the call would be reentrant).
    let asking = async {
        let fence = start.await.expect("the holder's body starts");
        let skipped = fire(&sibling, &config, next).await;
        let row = record(provider, &name).await;
        let _ = finish.send(());
        (fence, skipped, row)
    };
    let (outcome, (fence, skipped, row)) = tokio::join!(holding, asking);
    assert!(
        matches!(outcome, Ok(LockOutcome::Executed(()))),
        "sibling: the holder's fire must run, got {outcome:?}"
    );
    assert_eq!(
        skipped, None,
        "sibling: a fire by a sibling executor ran while the lease was held"
    );
    assert_eq!(
        (row.held, row.fence),
        (true, fence),
        "sibling: the held lease was released or taken by a sibling executor"
    );
}

/// Two instances fire one slot ahead of it (the scheduler's acquire-ahead); the first wins.
/// The loser's refusal shows the slot taken (`last_fire`), so it does not ask again at the
/// slot: two acquires for two instances (N), not three (2N - 1).
pub async fn loser_asks_once_for_a_slot_won_ahead(fixture: Arc<dyn Fixture>) {
    let provider = fixture.provider();
    let name = unique_name("ahead-loser");
    let faulty = faulty(&fixture, Faults::default());
    let (a, b) = (
        executor(&faulty, &format!("{name}-a")),
        executor(&faulty, &format!("{name}-b")),
    );
    let config = LockConfiguration::new(name.clone(), LONG, Duration::ZERO).expect("valid");
    // Half a second ahead on the store's clock, and so on the monotonic one: both ask before
    // the slot, and the loser's answer comes long before it.
    let ahead = Duration::from_millis(500);
    let db_now = provider
        .database_time()
        .await
        .unwrap_or_else(|e| panic!("database_time failed: {e:?}"));
    let slot = FireSlot::new(db_now + TimeDelta::from_std(ahead).expect("small"));
    let due = Instant::now() + ahead;
    let fire = |executor: &LockingTaskExecutor| {
        let (executor, config) = (executor.clone(), config.clone());
        async move {
            executor
                .execute_fire(
                    &config,
                    Some(slot),
                    crate::FireKind::Scheduled,
                    Some(due),
                    None,
                    async {},
                )
                .await
        }
    };
    // B asks once A's grant is decided (both still ahead of the slot): two acquires decided at
    // the same instant may both see the row as it was before either, and the loser's refusal
    // then cannot tell what the winner wrote.
    let b_after_a = async {
        faulty.acquires_answered(1).await;
        fire(&b).await
    };
    let (ran_a, ran_b) = tokio::join!(fire(&a), b_after_a);
    let ran = [&ran_a, &ran_b]
        .iter()
        .filter(|r| matches!(r, Ok(crate::FireOutcome::Executed(()))))
        .count();
    assert_eq!(
        ran, 1,
        "ahead: one instance runs the slot ({ran_a:?}, {ran_b:?})"
    );
    assert_eq!(
        faulty.acquires(),
        2,
        "ahead: the loser asked again at the slot although its refusal showed the slot taken"
    );
}
