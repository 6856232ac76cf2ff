//! The tokens that allow actions: a name (logged and recorded with each action) and a secret.

use std::fmt;
use std::str::FromStr;

/// The environment variable `lockctl serve` reads tokens from: `name=secret`, comma-separated.
pub const TOKENS_ENV: &str = "LOCKCTL_DASHBOARD_TOKENS";

/// The shortest secret accepted, in bytes: a guessable token would open every action.
pub(crate) const MIN_SECRET_LEN: usize = 16;

/// A token that allows the dashboard's actions: who (`name`) and the secret that proves it.
/// Its `Debug` never shows the secret.
///
/// ```
/// use lock_dashboard::Token;
/// let token: Token = "alice=0123456789abcdef-alice".parse()?;
/// assert_eq!(token.name(), "alice");
/// assert!(!format!("{token:?}").contains("0123456789abcdef"));
/// assert!("alice=short".parse::<Token>().is_err());
/// # Ok::<(), lock_dashboard::TokenError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    name: String,
    secret: String,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not `name=secret`.
    #[error("a token is `name=secret`, got {0:?}")]
    Format(String),
    /// The name is empty, too long or not printable ASCII without spaces.
    #[error("token name {0:?}: 1 to 64 letters, digits, `-`, `_`, `.` or `@`")]
    Name(String),
    /// The secret is too short or contains a space, comma or control character.
    #[error(
        "the secret of token {name:?} must be at least {MIN_SECRET_LEN} bytes of printable \
         ASCII without spaces or commas"
    )]
    Secret {
        /// The token's name.
        name: String,
    },
}

impl Token {
    /// A token named `name` with `secret` (at least 16 bytes of printable ASCII, no spaces or
    /// commas).
    pub fn new(name: impl Into<String>, secret: impl Into<String>) -> Result<Self, TokenError> {
        let (name, secret) = (name.into(), secret.into());
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
        if !name_ok {
            return Err(TokenError::Name(name));
        }
        let secret_ok = secret.len() >= MIN_SECRET_LEN
            && secret.chars().all(|c| c.is_ascii_graphic() && c != ',');
        if !secret_ok {
            return Err(TokenError::Secret { name });
        }
        Ok(Token { name, secret })
    }

    /// Who the token stands for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `presented` is this token's secret, compared in constant time.
    pub(crate) fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.secret.as_bytes(), presented.as_bytes())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl FromStr for Token {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, TokenError> {
        let (name, secret) = s
            .split_once('=')
            .ok_or_else(|| TokenError::Format(s.chars().take_while(|c| *c != '=').collect()))?;
        Token::new(name.trim(), secret.trim())
    }
}

/// Tokens as [`TOKENS_ENV`] holds them: `name=secret`, comma-separated (empty items ignored).
///
/// ```
/// let tokens = lock_dashboard::parse_tokens("alice=secret-of-alice-0001, bob=secret-of-bob-00002")?;
/// assert_eq!(tokens.iter().map(|t| t.name()).collect::<Vec<_>>(), ["alice", "bob"]);
/// # Ok::<(), lock_dashboard::TokenError>(())
/// ```
pub fn parse_tokens(list: &str) -> Result<Vec<Token>, TokenError> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::parse)
        .collect()
}

/// Equal bytes, in a time that depends on the lengths only.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
