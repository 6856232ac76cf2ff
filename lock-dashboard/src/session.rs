//! The browser sessions of this process: who logged in with which token (and so with which
//! role), and the CSRF token every form of the session carries.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::token::Role;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "lock_dashboard_session";

/// A browser session lasts this long, then the operator logs in again.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// At most this many sessions are kept; the oldest goes first.
const MAX_SESSIONS: usize = 1000;

/// A signed-in browser.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// The token it logged in with.
    pub(crate) token_name: String,
    /// What the token may do.
    pub(crate) role: Role,
    /// What every form of this session must carry.
    pub(crate) csrf: String,
    started: Instant,
}

/// The sessions of this process, by cookie value.
#[derive(Default)]
pub(crate) struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    pub(crate) fn start(&self, token_name: &str, role: Role) -> String {
        let id = random_hex();
        let session = Session {
            token_name: token_name.to_owned(),
            role,
            csrf: random_hex(),
            started: Instant::now(),
        };
        let mut sessions = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.started.elapsed() < SESSION_LIFETIME);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(id, _)| id.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(id.clone(), session);
        id
    }

    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let sessions = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .get(id)
            .filter(|s| s.started.elapsed() < SESSION_LIFETIME)
            .cloned()
    }

    pub(crate) fn end(&self, id: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
    }
}

/// 32 random bytes from the thread's CSPRNG, as hex.
fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
