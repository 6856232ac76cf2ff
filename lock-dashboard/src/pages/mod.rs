//! The server-rendered pages (maud) and the form actions behind their buttons.

pub(crate) mod forms;
pub(crate) mod instances;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod layout;
pub(crate) mod locks;
pub(crate) mod login;
pub(crate) mod run;
