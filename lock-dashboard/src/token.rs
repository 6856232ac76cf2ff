//! The tokens that allow reads and actions: a name (logged and recorded with each action), a
//! role (what it may do) and a secret.

use std::fmt;
use std::str::FromStr;

use subtle::ConstantTimeEq;

/// The environment variable `lockctl serve` reads tokens from: `name[:role]=secret`,
/// comma-separated.
pub const TOKENS_ENV: &str = "LOCKCTL_DASHBOARD_TOKENS";

/// The shortest secret accepted, in bytes: a guessable token would open every action.
pub(crate) const MIN_SECRET_LEN: usize = 16;

/// What a token may do. Each role may do what the roles before it may.
///
/// ```
/// use lock_dashboard::Role;
/// assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
/// assert_eq!("operator".parse::<Role>(), Ok(Role::Operator));
/// assert_eq!(Role::Admin.to_string(), "admin");
/// assert!("root".parse::<Role>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Reads every page and JSON endpoint (where reads are protected), nothing more.
    Viewer,
    /// Also pauses, resumes and triggers jobs.
    Operator,
    /// Also releases locks by hand: everything.
    Admin,
}

impl Role {
    /// The role's name, as a token's text form writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, TokenError> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "admin" => Ok(Role::Admin),
            _ => Err(TokenError::Role {
                name: String::new(),
            }),
        }
    }
}

/// A token: who (`name`), what it may do ([`Role`]) and the secret that proves it. Its `Debug`
/// never shows the secret.
///
/// The text form is `name=secret` (an admin, as before roles existed) or `name:role=secret`.
/// A secret is at least 16 bytes of printable ASCII without spaces or commas: a guessable one
/// would open every action its role allows.
///
/// ```
/// use lock_dashboard::{Role, Token};
/// let token: Token = "alice=0123456789abcdef-alice".parse()?;
/// assert_eq!((token.name(), token.role()), ("alice", Role::Admin));
/// assert!(!format!("{token:?}").contains("0123456789abcdef"));
/// let viewer: Token = "grafana:viewer=0123456789abcdef-graf".parse()?;
/// assert_eq!(viewer.role(), Role::Viewer);
/// assert!("alice=short".parse::<Token>().is_err());
/// # Ok::<(), lock_dashboard::TokenError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    name: String,
    role: Role,
    secret: String,
}

/// Why a token was refused. No variant holds any part of a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not `name[:role]=secret`. The value is not repeated: without `=` it may be a secret.
    #[error("a token is `name=secret` or `name:role=secret`, got a value without `=` (not shown)")]
    Format,
    /// The name is empty, too long or not printable ASCII without spaces.
    #[error("token name {0:?}: 1 to 64 letters, digits, `-`, `_`, `.` or `@`")]
    Name(String),
    /// The role is not `viewer`, `operator` or `admin` (not repeated either: a mistyped
    /// setting may hold a secret there).
    #[error("the role of token {name:?} must be viewer, operator or admin")]
    Role {
        /// The token's name (empty when a role alone was parsed).
        name: String,
    },
    /// The secret is too short or contains a space, comma or control character.
    #[error(
        "the secret of token {name:?} must be at least {MIN_SECRET_LEN} bytes of printable \
         ASCII without spaces or commas"
    )]
    Secret {
        /// The token's name.
        name: String,
    },
    /// A line of a token file is not a token.
    #[error("line {line}: {error}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        error: Box<TokenError>,
    },
}

impl Token {
    /// An admin token named `name` with `secret` (at least 16 bytes of printable ASCII, no
    /// spaces or commas).
    ///
    /// ```
    /// use lock_dashboard::{Role, Token};
    /// let token = Token::new("alice", "0123456789abcdef-alice")?;
    /// assert_eq!(token.role(), Role::Admin);
    /// # Ok::<(), lock_dashboard::TokenError>(())
    /// ```
    pub fn new(name: impl Into<String>, secret: impl Into<String>) -> Result<Self, TokenError> {
        Token::with_role(name, Role::Admin, secret)
    }

    /// A token named `name` that may do what `role` may.
    ///
    /// ```
    /// use lock_dashboard::{Role, Token};
    /// let token = Token::with_role("oncall", Role::Operator, "0123456789abcdef-oncall")?;
    /// assert_eq!((token.name(), token.role()), ("oncall", Role::Operator));
    /// # Ok::<(), lock_dashboard::TokenError>(())
    /// ```
    pub fn with_role(
        name: impl Into<String>,
        role: Role,
        secret: impl Into<String>,
    ) -> Result<Self, TokenError> {
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
        Ok(Token { name, role, secret })
    }

    /// Who the token stands for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the token may do.
    pub fn role(&self) -> Role {
        self.role
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
            .field("role", &self.role)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl FromStr for Token {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, TokenError> {
        let (who, secret) = s.split_once('=').ok_or(TokenError::Format)?;
        let (name, role) = match who.split_once(':') {
            Some((name, role)) => {
                let role = role.trim().parse().map_err(|_| TokenError::Role {
                    name: name.trim().to_owned(),
                })?;
                (name, role)
            }
            None => (who, Role::Admin),
        };
        Token::with_role(name.trim(), role, secret.trim())
    }
}

/// Tokens as [`TOKENS_ENV`] holds them: `name[:role]=secret`, comma-separated (empty items
/// ignored).
///
/// ```
/// let tokens = lock_dashboard::parse_tokens("alice=secret-of-alice-0001, bob:viewer=secret-of-bob-00002")?;
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

/// Tokens as a token file holds them (`lockctl serve --token-file`): one `name[:role]=secret`
/// a line; blank lines and lines starting with `#` are skipped. An error names the line, never
/// its secret.
///
/// ```
/// use lock_dashboard::{Role, TokenError, parse_token_file};
/// let tokens = parse_token_file("# on-call\noncall:operator=secret-of-oncall-01\n\nalice=secret-of-alice-0001\n")?;
/// assert_eq!(tokens[0].role(), Role::Operator);
/// assert_eq!(tokens[1].role(), Role::Admin);
/// let error = parse_token_file("alice=secret-of-alice-0001\nmy-secret-without-a-name\n").unwrap_err();
/// assert_eq!(error.to_string(), "line 2: a token is `name=secret` or `name:role=secret`, got a value without `=` (not shown)");
/// # Ok::<(), TokenError>(())
/// ```
pub fn parse_token_file(text: &str) -> Result<Vec<Token>, TokenError> {
    text.lines()
        .enumerate()
        .map(|(at, line)| (at + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(line, text)| {
            text.parse().map_err(|error| TokenError::Line {
                line,
                error: Box::new(error),
            })
        })
        .collect()
}

/// Equal bytes, in a time that depends on the lengths only (`subtle`, which the optimiser
/// cannot shorten).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_error_repeats_any_part_of_a_secret() {
        let secret = "s3cr3t-value-with-no-name-0123456789";
        for setting in [
            secret.to_owned(),
            format!("alice:{secret}"),
            format!("alice={secret} x"),
            format!("alice:root={secret}"),
            format!("alice:{secret}=more"),
        ] {
            let error = setting.parse::<Token>().unwrap_err();
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains("s3cr3t"), "{setting}: {shown}");
        }
        let error = parse_tokens(&format!("bob=secret-of-bob-000002,{secret}")).unwrap_err();
        assert!(!format!("{error} {error:?}").contains("s3cr3t"));
    }
}
