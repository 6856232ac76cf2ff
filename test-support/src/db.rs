//! Where the test databases are: one environment variable and one default per server.

/// The variable that names the PostgreSQL test database.
pub const POSTGRES_URL_VAR: &str = "LOCK_TEST_POSTGRES_URL";
/// The PostgreSQL of the development machine and CI, used when [`POSTGRES_URL_VAR`] is unset.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// The variable that names the MySQL/MariaDB test database.
pub const MYSQL_URL_VAR: &str = "LOCK_TEST_MYSQL_URL";
/// The MariaDB of the development machine and CI, used when [`MYSQL_URL_VAR`] is unset.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";
/// The variable that names the Redis test server.
pub const REDIS_URL_VAR: &str = "LOCK_TEST_REDIS_URL";
/// The Redis of the development machine and CI, used when [`REDIS_URL_VAR`] is unset.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// `LOCK_TEST_POSTGRES_URL`, or [`DEFAULT_POSTGRES_URL`].
///
/// ```
/// assert!(test_support::db::postgres_url().starts_with("postgres"));
/// ```
pub fn postgres_url() -> String {
    std::env::var(POSTGRES_URL_VAR).unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

/// `LOCK_TEST_MYSQL_URL`, or [`DEFAULT_MYSQL_URL`].
///
/// ```
/// assert!(test_support::db::mysql_url().starts_with("mysql"));
/// ```
pub fn mysql_url() -> String {
    std::env::var(MYSQL_URL_VAR).unwrap_or_else(|_| DEFAULT_MYSQL_URL.to_owned())
}

/// `LOCK_TEST_REDIS_URL`, or [`DEFAULT_REDIS_URL`].
///
/// ```
/// assert!(test_support::db::redis_url().starts_with("redis"));
/// ```
pub fn redis_url() -> String {
    std::env::var(REDIS_URL_VAR).unwrap_or_else(|_| DEFAULT_REDIS_URL.to_owned())
}

/// The `host:port` a URL points at, for a plain TCP reachability check.
///
/// ```
/// use test_support::db::address;
/// assert_eq!(address("postgres://postgres@127.0.0.1:5432/test").as_deref(), Some("127.0.0.1:5432"));
/// assert_eq!(address("mysql://u:p@db:3306").as_deref(), Some("db:3306"));
/// assert_eq!(address("not a url"), None);
/// ```
pub fn address(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit('@').next()?;
    (!host_port.is_empty()).then(|| host_port.to_owned())
}

/// The `host:port` a database URL points at, with the scheme's default port when the URL names
/// none (`postgres`: 5432, `mysql`: 3306, `redis`: 6379), for a plain TCP reachability check. `None` when the
/// URL has no host, or no port and a scheme without a default.
///
/// ```
/// use test_support::db::socket_address;
/// assert_eq!(socket_address("postgres://postgres@db.internal/test").as_deref(), Some("db.internal:5432"));
/// assert_eq!(socket_address("mysql://root@10.0.0.7/test").as_deref(), Some("10.0.0.7:3306"));
/// assert_eq!(socket_address("mysql://root@10.0.0.7:3307/test").as_deref(), Some("10.0.0.7:3307"));
/// assert_eq!(socket_address("postgres://u@[::1]/test").as_deref(), Some("[::1]:5432"));
/// assert_eq!(socket_address("redis://cache/0").as_deref(), Some("cache:6379"));
/// assert_eq!(socket_address("amqp://broker/"), None);
/// ```
pub fn socket_address(url: &str) -> Option<String> {
    let host_port = address(url)?;
    // A port follows the last `:`, outside an IPv6 literal's brackets.
    if host_port
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.contains(']'))
    {
        return Some(host_port);
    }
    let default_port = match url.split_once("://")?.0 {
        "postgres" | "postgresql" => 5432,
        "mysql" | "mariadb" => 3306,
        "redis" | "rediss" => 6379,
        _ => return None,
    };
    Some(format!("{host_port}:{default_port}"))
}

/// The URL without its password, for printing.
///
/// ```
/// use test_support::db::redact;
/// assert_eq!(redact("postgres://app:secret@db/app"), "postgres://app:***@db/app");
/// assert_eq!(redact("postgres://app@db/app"), "postgres://app@db/app");
/// ```
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if scheme + 3 <= at && url[scheme + 3..at].contains(':') => {
            let user_end = scheme + 3 + url[scheme + 3..at].find(':').unwrap_or(0);
            format!("{}:***{}", &url[..user_end], &url[at..])
        }
        _ => url.to_owned(),
    }
}
