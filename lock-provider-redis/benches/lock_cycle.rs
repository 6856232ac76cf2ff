//! What a fire costs through the provider, against the floor of the same two scripts sent by
//! hand (`EVALSHA` with the arguments written out): a whole cycle, and a losing acquire (with
//! `PING` as context).
//!
//! `cargo bench -p lock-provider-redis --bench lock_cycle` runs the full measurement; without
//! `--bench` (as `cargo test --all-targets` runs it) it makes a short smoke run. Everything
//! runs on the provider's one multiplexed connection, and the measurements are interleaved in
//! a random order so that drift in the machine's load spreads over all of them alike.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_provider_redis::redis::{self, Value, aio::ConnectionManager};
use lock_provider_redis::{RedisLockConfig, RedisLockProvider, lua};
use test_support::{Mode, Samples, Unit, stats};

const PREFIX: &str = "lock_provider_redis_bench";
/// The lease the bench asks for, one hour in milliseconds, as the provider sends it.
const LEASE_MS: &str = "3600000";
/// The slot's greatest lead, 5 s in milliseconds, as the provider sends it.
const LEAD_MS: &str = "5000";

const LABELS: [&str; 5] = [
    "lock+release via provider",
    "lock+release by hand (floor)",
    "losing acquire via provider",
    "losing acquire by hand",
    "PING",
];

fn main() {
    test_support::mode::run_on_current_thread(run);
}

async fn run(mode: Mode) {
    let (warmup, iterations) = mode.pick((1000, 10_000), (5, 20));
    let url = test_support::db::redis_url();
    let config = RedisLockConfig::default().with_key_prefix(PREFIX);
    let connected = RedisLockProvider::connect_with_config(&url, config).await;
    let Some(provider) = test_support::skip::or_unreachable("redis", &url, connected) else {
        return;
    };
    let conn = provider.connection().clone();
    let acquire_sha = redis::Script::new(lua::ACQUIRE).get_hash().to_owned();
    let release_sha = redis::Script::new(lua::RELEASE).get_hash().to_owned();

    let request = |name: &str, owner: &str| {
        testkit::request(&Arc::from(name), owner, Duration::from_secs(3600), None)
    };
    let mine = request("bench-provider", "bench-instance");
    let held = request("bench-held", "bench-holder");
    let loser = request("bench-held", "bench-loser");
    provider.force_unlock("bench-held").await.expect("unlock");
    let holder = match provider.acquire(&held).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("could not take the held lock: {refused:?}"),
    };
    let hand = ByHand {
        conn,
        acquire_sha,
        release_sha,
    };

    let mut samples: [Samples; 5] = LABELS.map(Samples::new);
    let mut order = [0, 1, 2, 3, 4];
    for i in 0..warmup + iterations {
        shuffle(&mut order, i);
        for which in order {
            let started = Instant::now();
            match which {
                0 => {
                    let lease = match provider.acquire(&mine).await.expect("acquire") {
                        AcquireOutcome::Acquired(lease) => lease,
                        refused => panic!("provider cycle refused: {refused:?}"),
                    };
                    assert!(
                        provider
                            .release(&lease, Duration::ZERO)
                            .await
                            .expect("release")
                    );
                }
                1 => hand.cycle().await,
                2 => {
                    let outcome = provider.acquire(&loser).await.expect("acquire");
                    assert!(matches!(outcome, AcquireOutcome::Refused(_)), "{outcome:?}");
                }
                3 => hand.losing().await,
                _ => {
                    let mut conn = hand.conn.clone();
                    let pong: String = redis::cmd("PING")
                        .query_async(&mut conn)
                        .await
                        .expect("PING");
                    assert_eq!(pong, "PONG");
                }
            }
            if i >= warmup {
                samples[which].record(started);
            }
        }
    }
    provider
        .release(&holder, Duration::ZERO)
        .await
        .expect("release");

    println!(
        "lock_cycle: {iterations} samples each, interleaved, one multiplexed connection to {}",
        test_support::db::redact(&url)
    );
    samples
        .iter()
        .for_each(|operation| operation.print(Unit::Millis));
    let [provider_cycle, hand_cycle, losing, hand_losing, ping] = &samples;
    stats::ratio_line(
        "provider / by hand",
        provider_cycle,
        hand_cycle,
        1.15,
        mode.judged(),
    );
    stats::ratio_line(
        "losing acquire / the same script by hand",
        losing,
        hand_losing,
        1.10,
        mode.judged(),
    );
    // Context only: PING's floor moves with the machine, the by-hand floor does not.
    stats::comparison_line("losing acquire / PING", losing, ping);
}

/// The provider's scripts sent by hand: `EVALSHA` with the arguments the provider would send.
struct ByHand {
    conn: ConnectionManager,
    acquire_sha: String,
    release_sha: String,
}

impl ByHand {
    async fn acquire(&self, key: &str, owner: &str) -> Vec<Value> {
        let mut conn = self.conn.clone();
        redis::cmd("EVALSHA")
            .arg(&self.acquire_sha)
            .arg(1)
            .arg(key)
            .arg(owner)
            .arg(LEASE_MS)
            .arg("")
            .arg(LEAD_MS)
            .query_async(&mut conn)
            .await
            .expect("acquire by hand")
    }

    async fn cycle(&self) {
        let key = format!("{PREFIX}:bench-hand");
        let reply = self.acquire(&key, "bench-instance").await;
        let fence = match reply.as_slice() {
            [Value::Int(0), _, Value::Int(fence), ..] => *fence,
            other => panic!("by-hand acquire refused: {other:?}"),
        };
        let mut conn = self.conn.clone();
        let released: i64 = redis::cmd("EVALSHA")
            .arg(&self.release_sha)
            .arg(1)
            .arg(&key)
            .arg("bench-instance")
            .arg(fence)
            .arg(0)
            .query_async(&mut conn)
            .await
            .expect("release by hand");
        assert_eq!(released, 1);
    }

    async fn losing(&self) {
        let reply = self
            .acquire(&format!("{PREFIX}:bench-held"), "bench-loser")
            .await;
        assert!(matches!(reply.first(), Some(Value::Int(1))), "{reply:?}");
    }
}

/// A cheap deterministic shuffle (no extra dependency): a different order each iteration.
fn shuffle(order: &mut [usize; 5], i: usize) {
    let mut state = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for j in (1..order.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(j, (state % (j as u64 + 1)) as usize);
    }
}
