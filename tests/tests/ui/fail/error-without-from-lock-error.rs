// A direct call returns `Err(E::from(LockError))` when the lock could not be asked for (the
// provider failed), so that a failure never looks like a run: `E` needs `From<LockError>`.
use lock_core::scheduler_lock;

#[scheduler_lock(name = "migrate")]
async fn migrate() -> Result<(), std::num::ParseIntError> {
    let _: u8 = "1".parse()?;
    Ok(())
}

#[derive(Debug)]
struct ReportError;

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the report could not be written")
    }
}

#[scheduler_lock(name = "report")]
fn report() -> Result<(), ReportError> {
    Err(ReportError)
}

fn main() {}
