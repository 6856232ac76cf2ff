// An `Err` is logged with `{:?}`: the error type must implement Debug.
use lock_core::scheduled;

struct Opaque;

#[scheduled(fixed_rate = "1m")]
async fn fails() -> Result<(), Opaque> {
    Err(Opaque)
}

fn main() {}
