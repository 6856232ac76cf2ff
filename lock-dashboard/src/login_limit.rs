//! How often a client may try to log in: a keyed GCRA limiter (`governor`) per client IP
//! address, [`PER_MINUTE`] attempts a minute after a burst of [`BURST`]. Without the address
//! (an app not served with `into_make_service_with_connect_info::<SocketAddr>()`), every
//! client shares one bucket; behind a reverse proxy, every client is the proxy's address
//! (`X-Forwarded-For` is not trusted: any client can write it).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::time::Duration;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Attempts a minute, once the burst is spent.
pub(crate) const PER_MINUTE: NonZeroU32 = NonZeroU32::new(5).expect("non-zero");
/// Attempts in a row before the limit applies.
pub(crate) const BURST: NonZeroU32 = NonZeroU32::new(10).expect("non-zero");

/// Above this many client addresses kept, those whose bucket is full again are forgotten.
const KEEP: usize = 10_000;

/// The client's address, when the server says it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Client(pub(crate) Option<SocketAddr>);

impl Client {
    /// The address as logged: `127.0.0.1:50412`, or `unknown`.
    pub(crate) fn shown(self) -> String {
        self.0
            .map_or_else(|| "unknown".to_owned(), |address| address.to_string())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        Ok(Client(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0),
        ))
    }
}

/// The login attempts of this process, by client IP address (`None`: unknown).
pub(crate) struct LoginLimit(DefaultKeyedRateLimiter<Option<IpAddr>>);

impl Default for LoginLimit {
    fn default() -> Self {
        LoginLimit(RateLimiter::keyed(
            Quota::per_minute(PER_MINUTE).allow_burst(BURST),
        ))
    }
}

impl LoginLimit {
    /// Counts one attempt of `client`; `Err(wait)` when it is over the limit.
    pub(crate) fn attempt(&self, client: Client) -> Result<(), Duration> {
        if self.0.len() > KEEP {
            self.0.retain_recent();
        }
        self.0
            .check_key(&client.0.map(|address| address.ip()))
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}
