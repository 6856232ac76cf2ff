//! A connection killed on the server between two fires (`KILL <id>`: a DBA, a failover, a
//! proxy's idle timeout) costs nothing: when the close reached the client, the pool notices the
//! dead connection when it hands it out and opens a fresh one; when it did not (a half-open
//! connection, found dead only when the statement is sent), the provider tries again on a fresh
//! connection. Either way the next fire runs.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOutcome, Lease, LockProvider, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{
    Conn, Opts, OptsBuilder, Pool, PoolConstraints, prelude::Queryable,
};
use test_support::proxy::HalfOpenProxy;

async fn fire(provider: &MySqlLockProvider, name: &Arc<str>) -> Lease {
    let request = testkit::request(name, "instance-a", Duration::from_secs(60), None);
    match provider.acquire(&request).await {
        Ok(AcquireOutcome::Acquired(lease)) => lease,
        other => panic!("the fire after the KILL did not run: {other:?}"),
    }
}

/// The ids of the server sessions behind the pool's idle connections.
async fn session_ids(pool: &Pool, count: usize) -> Vec<u32> {
    let mut conns = Vec::new();
    for _ in 0..count {
        conns.push(pool.get_conn().await.expect("connection"));
    }
    conns.iter().map(Conn::id).collect()
}

/// Kills the sessions and waits until the server has closed them.
async fn kill(admin: &mut Conn, ids: &[u32]) {
    for id in ids {
        admin.query_drop(format!("KILL {id}")).await.expect("KILL");
    }
    for _ in 0..100 {
        let alive: Vec<u64> = admin
            .query("SELECT ID FROM information_schema.PROCESSLIST")
            .await
            .expect("processlist");
        if ids.iter().all(|id| !alive.contains(&u64::from(*id))) {
            // Give the client side a moment to see the connection closed.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the server did not end sessions {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_fire_runs_on_a_fresh_connection() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let pool = common::pool(1);
    let provider = MySqlLockProvider::new(pool.clone())
        .with_table(common::CONFORMANCE_TABLE)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    let name = testkit::unique_name("killed");

    let lease = fire(&provider, &name).await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    let before = session_ids(&pool, 1).await;
    kill(&mut admin, &before).await;

    let lease = fire(&provider, &name).await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    let after = session_ids(&pool, 1).await;
    assert_ne!(before, after, "the pool kept the killed connection");

    // Killed while a lease is held: the release still goes through, on a fresh connection.
    let lease = fire(&provider, &name).await;
    kill(&mut admin, &after).await;
    assert!(
        provider.release(&lease, Duration::ZERO).await.unwrap(),
        "the release after the KILL did not find the lease"
    );
    let lease = fire(&provider, &name).await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_of_a_connect_pool_killed() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let Some(provider) = common::provider().await else {
        return;
    };
    let name = testkit::unique_name("killed-all");
    // Several connections in the pool, all idle.
    let ids = session_ids(provider.pool(), 3).await;
    kill(&mut admin, &ids).await;
    for _ in 0..3 {
        let lease = fire(&provider, &name).await;
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }
}

/// A pool through a proxy that can kill its connections unseen, on the conformance table.
async fn through_half_open_proxy() -> Option<(HalfOpenProxy, MySqlLockProvider)> {
    let (proxy, pool) = half_open_pool(true).await?;
    let provider = MySqlLockProvider::new(pool)
        .with_table(common::CONFORMANCE_TABLE)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    Some((proxy, provider))
}

/// A pool of one idle connection through a proxy that can kill it unseen; built with the
/// provider's options or with mysql_async's defaults. At most two connections: with mysql_async's
/// defaults a connection is reset when handed out, and when that reset failed on the dead
/// connection, a pool of at most one was seen waiting for a free slot until the connect timeout.
async fn half_open_pool(provider_options: bool) -> Option<(HalfOpenProxy, Pool)> {
    common::admin().await?;
    let url = common::url();
    let address = test_support::db::address(&url).expect("host:port in the URL");
    let upstream = tokio::net::lookup_host(&address)
        .await
        .expect("resolve the server")
        .find(std::net::SocketAddr::is_ipv4)
        .expect("an IPv4 address");
    let proxy = HalfOpenProxy::start(upstream).await;
    // Through the proxy by TCP: mysql_async would otherwise switch to the server's socket.
    let opts = OptsBuilder::from_opts(Opts::from_url(&url).unwrap())
        .ip_or_hostname("127.0.0.1")
        .tcp_port(proxy.port())
        .prefer_socket(false);
    let opts = if provider_options {
        MySqlLockProvider::pool_options(opts)
    } else {
        opts
    };
    let pool_opts = Opts::from(opts.clone())
        .pool_opts()
        .clone()
        .with_constraints(PoolConstraints::new(1, 2).unwrap());
    Some((proxy, Pool::new(opts.pool_opts(pool_opts))))
}

/// The server's end of the pooled connection is gone, and the client has not seen it: the
/// statement is sent, the answer is a reset. The provider tries again on a fresh connection,
/// for every operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_died_unseen_is_retried_on_a_fresh_one() {
    let Some((proxy, provider)) = through_half_open_proxy().await else {
        return;
    };
    let name = testkit::unique_name("half-open");
    let lease = fire(&provider, &name).await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    proxy.kill_unseen();
    let lease = fire(&provider, &name).await;
    proxy.kill_unseen();
    assert!(
        provider
            .extend(&lease, Duration::from_secs(60))
            .await
            .unwrap(),
        "the extend after the unseen kill lost the lease"
    );
    proxy.kill_unseen();
    assert!(
        provider.release(&lease, Duration::ZERO).await.unwrap(),
        "the release after the unseen kill did not find the lease"
    );
    proxy.kill_unseen();
    assert!(
        provider
            .list_locks()
            .await
            .unwrap()
            .iter()
            .any(|r| *r.name == *name)
    );
    proxy.kill_unseen();
    let record = provider.force_unlock(&name).await.unwrap();
    assert!(record.is_some_and(|r| !r.held));
}

/// A pool the provider did not build, on a table with `TIMESTAMP` columns: each use first sets
/// the session time zone, and that is the statement that finds the connection dead. It is
/// tried again on a fresh connection too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_found_dead_while_being_made_ready_is_retried() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("half_open_ts");
    let _drop = common::drop_table(&table);
    admin
        .query_drop(format!(
            "CREATE TABLE `{table}` (name VARBINARY(64) NOT NULL PRIMARY KEY, \
             lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL, \
             locked_by VARCHAR(255) NOT NULL, fence BIGINT NOT NULL DEFAULT 0, \
             last_fire TIMESTAMP(3) NULL)"
        ))
        .await
        .unwrap();
    let Some((proxy, pool)) = half_open_pool(false).await else {
        return;
    };
    let provider = MySqlLockProvider::new(pool).with_table(&table).unwrap();
    let name = testkit::unique_name("half-open-ts");
    let lease = fire(&provider, &name).await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    proxy.kill_unseen();
    let lease = fire(&provider, &name).await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
}
