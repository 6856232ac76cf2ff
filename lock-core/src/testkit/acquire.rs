//! Who gets a lock: one holder at a time per name, names independent of each other, and a
//! name too long or unsafe to show refused as an error.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::support::{LONG, must_acquire, must_refuse, release, request, try_acquire, unique_name};
use crate::{LockError, LockProvider, MAX_LOCK_NAME_LEN, RefusalReason};

/// A held lock is refused to every other instance and to the holder itself.
pub async fn exclusion(provider: &dyn LockProvider) {
    let name = unique_name("exclusion");
    let a = request(&name, "instance-a", LONG, None);
    let b = request(&name, "instance-b", LONG, None);
    let lease = must_acquire(provider, &a, "exclusion: a free lock").await;
    let reason = must_refuse(provider, &b, "exclusion: another instance while held").await;
    assert!(
        matches!(reason, RefusalReason::Held | RefusalReason::Unknown),
        "exclusion: refusal reason {reason:?}"
    );
    must_refuse(provider, &a, "exclusion: the holder itself while held").await;
    assert!(
        release(provider, &lease, Duration::ZERO).await,
        "exclusion: the holder's release"
    );
    let lease = must_acquire(provider, &b, "exclusion: after release").await;
    release(provider, &lease, Duration::ZERO).await;
}

/// Two names are two locks: holding one never blocks the other.
pub async fn independent_names(provider: &dyn LockProvider) {
    let first = unique_name("names-1");
    let second = unique_name("names-2");
    let l1 = must_acquire(
        provider,
        &request(&first, "instance-a", LONG, None),
        "independent names: first",
    )
    .await;
    let l2 = must_acquire(
        provider,
        &request(&second, "instance-b", LONG, None),
        "independent names: second while first is held",
    )
    .await;
    release(provider, &l1, Duration::ZERO).await;
    release(provider, &l2, Duration::ZERO).await;
}

/// ShedLock's fuzz scenario: 8 concurrent workers x 100 iterations, even workers on one name
/// and odd on another, each incrementing a shared counter non-atomically (read, yield, write)
/// while holding the lock. The counters must equal the number of granted runs exactly.
pub async fn fuzz(provider: &dyn LockProvider) {
    const WORKERS: usize = 8;
    const ITERATIONS: usize = 100;
    let names = [unique_name("fuzz-even"), unique_name("fuzz-odd")];
    let counters = [AtomicU64::new(0), AtomicU64::new(0)];
    let runs = [AtomicU64::new(0), AtomicU64::new(0)];
    let workers = (0..WORKERS).map(|w| {
        let which = w % 2;
        let req = request(&names[which], &format!("fuzz-worker-{w}"), LONG, None);
        let (counter, runs) = (&counters[which], &runs[which]);
        async move {
            for _ in 0..ITERATIONS {
                if let Some(lease) = try_acquire(provider, &req).await {
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    runs.fetch_add(1, Ordering::SeqCst);
                    assert!(
                        release(provider, &lease, Duration::ZERO).await,
                        "fuzz: release of a held lease failed"
                    );
                }
                tokio::task::yield_now().await;
            }
        }
    });
    futures_util::future::join_all(workers).await;
    for which in 0..2 {
        let (count, granted) = (
            counters[which].load(Ordering::SeqCst),
            runs[which].load(Ordering::SeqCst),
        );
        assert_eq!(
            count, granted,
            "fuzz: counter {which} is {count} after {granted} granted runs: two holders overlapped"
        );
        assert!(
            granted > 0,
            "fuzz: no worker on name {which} ever got the lock"
        );
    }
}

/// A name over 64 bytes is a [`LockError`] at acquire, never a panic, a truncated row or a
/// silent refusal.
pub async fn name_too_long(provider: &dyn LockProvider) {
    let name: Arc<str> = "n".repeat(MAX_LOCK_NAME_LEN + 1).into();
    match provider
        .acquire(&request(&name, "instance-a", LONG, None))
        .await
    {
        Err(LockError::InvalidLockName { .. }) => {}
        other => panic!("name too long: expected LockError::InvalidLockName, got {other:?}"),
    }
    let max: Arc<str> = unique_name("max")
        .to_string()
        .chars()
        .chain(std::iter::repeat('x'))
        .take(MAX_LOCK_NAME_LEN)
        .collect::<String>()
        .into();
    let lease = must_acquire(
        provider,
        &request(&max, "instance-a", LONG, None),
        "a name of exactly 64 bytes",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// Names that would forge a line or reach a terminal (control and bidirectional characters,
/// NUL, whitespace at either end or alone) are a [`LockError::InvalidLockName`] at acquire,
/// before anything is written: the rule the macros apply at compile time.
pub async fn unsafe_name_refused(provider: &dyn LockProvider) {
    const UNSAFE: [&str; 8] = [
        "nl\nbilling  free",
        "\u{1b}[2J",
        "\u{202e}x",
        "a\0b",
        "   ",
        " x",
        "x ",
        "del\u{7f}",
    ];
    for name in UNSAFE {
        let name: Arc<str> = name.into();
        match provider
            .acquire(&request(&name, "instance-a", LONG, None))
            .await
        {
            Err(LockError::InvalidLockName { reason, .. }) => {
                assert!(
                    reason.contains("U+") || reason.contains("whitespace"),
                    "{reason}"
                );
            }
            other => {
                panic!("unsafe name {name:?}: expected LockError::InvalidLockName, got {other:?}")
            }
        }
    }
}
