//! A local HTTP receiver on `127.0.0.1` that records every request and answers as the test
//! scripted (feature `receiver`): for webhook, Slack and ping tests that must see what really
//! crossed the wire. Plain HTTP, or HTTPS on a certificate the test names (`start_tls`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path and query, as sent (`/hook?state=run`).
    pub path_and_query: String,
    /// Each header as (lower-cased name, value), in order.
    pub headers: Vec<(String, String)>,
    /// The body, byte for byte.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 (lossy).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What the receiver answers to one request.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    delay: Duration,
}

impl Reply {
    /// `status` with an empty body.
    pub fn status(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }

    /// Adds a header to the answer.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Answers only after `delay` (the request is recorded at once).
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Recorded>>,
    script: Mutex<VecDeque<Reply>>,
}

/// The receiver: answers the scripted replies in order, then `200 OK` to everything. Stops
/// when dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use test_support::receiver::{Receiver, Reply};
///
/// let receiver = Receiver::start().await;
/// receiver.script([Reply::status(503)]);
/// let address = receiver.address();
/// let reply = tokio::task::spawn_blocking(move || {
///     test_support::http::request(address, "POST", "/hook", &[], "hello")
/// })
/// .await
/// .unwrap()
/// .unwrap();
/// assert_eq!(reply.status, 503);
/// let requests = receiver.requests();
/// assert_eq!(requests[0].path_and_query, "/hook");
/// assert_eq!(requests[0].body_text(), "hello");
/// # }
/// ```
pub struct Receiver {
    address: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Listens on a free port of `127.0.0.1`.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a free port on 127.0.0.1");
        let address = listener.local_addr().expect("the listener's address");
        let shared = Arc::new(Shared::default());
        let app = router(shared.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("the receiver serves");
        });
        Receiver {
            address,
            shared,
            server,
        }
    }

    /// Listens on a free port of `127.0.0.1` for HTTPS only, presenting the certificate chain
    /// in `certificate_pem` with the key in `key_pem` (for example `scripts/test-servers`'
    /// `tls/server.pem` and `tls/server.key`, made for `localhost` and `127.0.0.1`). A client
    /// that refuses the certificate is simply disconnected, and nothing is recorded.
    pub async fn start_tls(certificate_pem: &Path, key_pem: &Path) -> Self {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let chain = CertificateDer::pem_file_iter(certificate_pem)
            .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
            .unwrap_or_else(|e| panic!("read {}: {e}", certificate_pem.display()));
        let key = PrivateKeyDer::from_pem_file(key_pem)
            .unwrap_or_else(|e| panic!("read {}: {e}", key_pem.display()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring's protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the certificate and its key");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a free port on 127.0.0.1");
        let address = listener.local_addr().expect("the listener's address");
        let shared = Arc::new(Shared::default());
        let app = router(shared.clone());
        let server = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    // A handshake the client broke off (it refused the certificate) is what a
                    // wrong-root test expects: no request, nothing to record.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(
                            hyper_util::rt::TokioIo::new(tls),
                            hyper_util::service::TowerToHyperService::new(app),
                        )
                        .await;
                });
            }
        });
        Receiver {
            address,
            shared,
            server,
        }
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:<port><path>` (for an HTTPS receiver, put `https` in its place).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// The next answers, in order (after them: `200 OK`).
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        lock(&self.shared.script).extend(replies);
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new().fallback(record).with_state(shared)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn record(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    lock(&shared.requests).push(Recorded {
        method: method.to_string(),
        path_and_query: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_else(|| uri.path().to_owned()),
        headers: headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    });
    let reply = lock(&shared.script)
        .pop_front()
        .unwrap_or_else(|| Reply::status(200));
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let status = StatusCode::from_u16(reply.status).expect("a valid status code");
    let mut response = status.into_response();
    for (name, value) in &reply.headers {
        response.headers_mut().insert(
            axum::http::HeaderName::try_from(name.as_str()).expect("a valid header name"),
            axum::http::HeaderValue::try_from(value.as_str()).expect("a valid header value"),
        );
    }
    response
}
