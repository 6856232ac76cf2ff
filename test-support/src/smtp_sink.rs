//! A real local SMTP server for mail tests: Debian's `aiosmtpd` (package `python3-aiosmtpd`,
//! installed by `scripts/test`), storing each message in a Maildir of its own, plain or with
//! STARTTLS or implicit TLS on the certificate `scripts/test-servers` makes.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::process::{Process, free_port};

/// The program `scripts/test` installs (Debian's `python3-aiosmtpd` puts it on the `PATH`).
pub const PROGRAM: &str = "aiosmtpd";

/// How the server protects its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkTls {
    /// Plain text only.
    Plain,
    /// STARTTLS offered and required before `MAIL` (aiosmtpd's `--tlscert`).
    StartTls,
    /// TLS from the first byte (aiosmtpd's `--smtpscert`).
    Implicit,
}

/// A running `aiosmtpd` on `127.0.0.1:<free port>`, killed when dropped.
pub struct SmtpSink {
    /// The port it listens on.
    pub port: u16,
    maildir: tempfile::TempDir,
    _process: Process,
}

impl SmtpSink {
    /// Starts the server, or applies the skip rule and returns `None` when `aiosmtpd` is not
    /// installed, or (for the TLS modes) when `scripts/test-servers` has not made the
    /// certificate.
    pub async fn start(tls: SinkTls) -> Option<Self> {
        if !crate::skip::command_available(PROGRAM) {
            return None;
        }
        let certificate = crate::servers::base_dir().join("tls/server.pem");
        let key = crate::servers::base_dir().join("tls/server.key");
        if tls != SinkTls::Plain && !(certificate.is_file() && key.is_file()) {
            crate::skip::skip_unless_ci(format!(
                "{} missing: run scripts/test-servers",
                certificate.display()
            ));
            return None;
        }
        let port = free_port();
        let maildir = tempfile::Builder::new()
            .prefix("smtp-sink")
            .tempdir()
            .expect("create a temporary Maildir");
        let mut command = Command::new(PROGRAM);
        command.args(["-n", "-d", "-l", &format!("127.0.0.1:{port}")]);
        match tls {
            SinkTls::Plain => {}
            SinkTls::StartTls => {
                command
                    .arg("--tlscert")
                    .arg(&certificate)
                    .arg("--tlskey")
                    .arg(&key);
            }
            SinkTls::Implicit => {
                command
                    .arg("--smtpscert")
                    .arg(&certificate)
                    .arg("--smtpskey")
                    .arg(&key);
            }
        }
        command
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            // A folder that does not exist yet: Python's Maildir makes it with new, cur, tmp.
            .arg(maildir.path().join("mail"));
        let process = Process::spawn(format!("aiosmtpd {tls:?}"), &mut command);
        // It logs this line (with -d) once its socket listens.
        let listening = format!("Server is listening on 127.0.0.1:{port}");
        process
            .stderr
            .wait_for(Duration::from_secs(20), |line| line.contains(&listening))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "aiosmtpd did not start within 20 s: {}",
                    process.stderr.text()
                )
            });
        Some(SmtpSink {
            port,
            maildir,
            _process: process,
        })
    }

    /// Every message received so far, raw (headers and body as sent), oldest first.
    pub fn messages(&self) -> Vec<String> {
        let new = self.maildir().join("new");
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&new)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| {
                        let modified = entry
                            .metadata()
                            .and_then(|m| m.modified())
                            .unwrap_or(std::time::UNIX_EPOCH);
                        (modified, entry.path())
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
            .into_iter()
            .map(|(_, path)| std::fs::read_to_string(&path).expect("read a received message"))
            .collect()
    }

    /// The folder the messages are stored in (a Maildir).
    pub fn maildir(&self) -> PathBuf {
        self.maildir.path().join("mail")
    }
}
