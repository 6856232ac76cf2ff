#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod deadman;
mod error;
mod http;
mod notice;
mod notifier;
mod redact;
mod retry;
mod signature;
mod slack;
mod smtp;
mod webhook;

pub use deadman::{DeadManSwitch, RunPings};
pub use error::{BoxError, ConfigError, NotifyError};
pub use notice::{NOTICE_VERSION, Notice, NoticeState};
pub use notifier::Notifier;
pub use retry::RetryPolicy;
pub use signature::{SIGNATURE_HEADER, SignatureError, TIMESTAMP_HEADER, sign, verify_signature};
pub use slack::{SlackConfig, SlackNotifier};
pub use smtp::{SmtpConfig, SmtpNotifier, SmtpSecurity};
pub use webhook::{WebhookConfig, WebhookNotifier};
