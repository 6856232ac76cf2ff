//! A TCP proxy on loopback that can kill its connections without the client seeing it: a
//! connection that died (a server restart, a failover, a NAT or proxy timeout) while no FIN
//! reached the client, which finds out only when it sends its next request.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Forwards every connection to one upstream server until [`kill_unseen`](Self::kill_unseen).
pub struct HalfOpenProxy {
    port: u16,
    generation: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

impl HalfOpenProxy {
    /// Listens on `127.0.0.1:0` and forwards each connection to `upstream`.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let proxy = test_support::proxy::HalfOpenProxy::start(upstream.local_addr().unwrap()).await;
    /// assert_ne!(proxy.port(), 0);
    /// # });
    /// ```
    pub async fn start(upstream: SocketAddr) -> HalfOpenProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let generation = watch::Sender::new(0u64);
        let killed = generation.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, upstream, killed.subscribe()));
            }
        });
        HalfOpenProxy {
            port,
            generation,
            accept,
        }
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Ends every open connection on the server's side, while its client sees nothing: no FIN,
    /// no error, until it sends a request, which is swallowed and answered with a reset (RST).
    /// New connections are forwarded as before.
    pub fn kill_unseen(&self) {
        self.generation.send_modify(|g| *g += 1);
    }
}

impl Drop for HalfOpenProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.kill_unseen();
    }
}

async fn forward(mut client: TcpStream, upstream: SocketAddr, mut killed: watch::Receiver<u64>) {
    let born = *killed.borrow_and_update();
    // Whether `kill_unseen` ran since this connection was made. Asked after every read, not
    // only by the `select!` below: a request the client wrote after `kill_unseen` returned
    // may be read in the same poll that would have seen the kill, and forwarding it would
    // lose its reply for good (the server's end is dropped at once), leaving the client
    // waiting for an answer that never comes while this task waits for the client.
    let probe = killed.clone();
    let is_killed = || *probe.borrow() != born;
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut from_client, mut from_server) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        tokio::select! {
            biased;
            _ = async { killed.wait_for(|g| *g != born).await.map(drop) } => break,
            read = client.read(&mut from_client) => match read {
                Ok(n) if n > 0 => {
                    if is_killed() {
                        // The request reached a server end that is gone: swallowed, reset.
                        drop(server);
                        let _ = client.set_zero_linger();
                        return;
                    }
                    if server.write_all(&from_client[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            read = server.read(&mut from_server) => match read {
                Ok(n) if n > 0 => {
                    if is_killed() {
                        break;
                    }
                    if client.write_all(&from_server[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
        }
    }
    // The server sees its connection end; the client sees nothing until it speaks.
    drop(server);
    let _ = client.read(&mut from_client).await;
    // Linger 0: closing sends a reset, as a host that lost the connection's state does.
    let _ = client.set_zero_linger();
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A request written right after `kill_unseen` returned, before the proxy's task ran, is
    /// never forwarded: the client gets a reset, and the server never sees it. Forwarding it
    /// (and dropping the reply) left client and proxy each waiting for the other for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_written_after_the_kill_is_reset_not_forwarded() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = HalfOpenProxy::start(upstream.local_addr().unwrap()).await;
        let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = upstream.accept().await {
                let seen_tx = seen_tx.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = conn.read(&mut buf).await {
                        if n == 0 || seen_tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                        let _ = conn.write_all(&buf[..n]).await;
                    }
                });
            }
        });
        // On two threads the proxy's task often sees the kill and the request in one poll: the
        // old `select!` then forwarded the request in about one round of ten.
        for round in 0..300 {
            let mut client = TcpStream::connect(("127.0.0.1", proxy.port()))
                .await
                .unwrap();
            client.write_all(b"ping").await.unwrap();
            let mut reply = [0u8; 4];
            client.read_exact(&mut reply).await.unwrap();
            assert_eq!(seen.recv().await.unwrap(), b"ping");

            proxy.kill_unseen();
            client.write_all(b"lost").await.unwrap();
            let read = tokio::time::timeout(Duration::from_secs(5), client.read(&mut reply))
                .await
                .unwrap_or_else(|_| panic!("round {round}: no reset within 5 s: a hang"));
            assert!(
                matches!(read, Err(_) | Ok(0)),
                "round {round}: the request after the kill got a reply: {read:?}"
            );
            assert!(
                seen.try_recv().is_err(),
                "round {round}: the request after the kill reached the server"
            );
        }
    }
}
