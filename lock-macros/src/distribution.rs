//! `shards = N` and `broadcast = true`: how a `#[scheduled]` job's slot is spread over the
//! cluster. The keys are rows of `keys::KEYS` (their values checked there, and refused with
//! `fixed_delay` by their `with` list); what needs both keys, or the lock name, is here.

use proc_macro2::TokenStream;
use quote::quote;
use syn::LitStr;

use crate::args::Args;
use crate::errors::Errors;
use crate::root::PRIVATE;
use crate::values::Values;
use lock_trigger::{Distribution, DistributionError};

/// The checked distribution, with where it was written.
pub(crate) struct Spread {
    pub(crate) distribution: Distribution,
    /// The key that chose it (`shards` or `broadcast`), for messages.
    key: &'static str,
}

/// The distribution `args` ask for; `None` when a value was refused (reported already) or
/// both keys ask for one (reported here).
pub(crate) fn check(args: &Args, values: &Values, errors: &mut Errors) -> Option<Spread> {
    let shards = args.get("shards");
    let broadcast = args.get("broadcast");
    if let (Some(shards), Some(broadcast)) = (shards, broadcast)
        && values.bool("broadcast") != Some(false)
    {
        errors.at(
            broadcast.ident.span(),
            format!(
                "`{}` and `{}` are both set: a job either runs a fixed number of shards per slot \
                 or once on every live instance (with its rank as the shard); keep one",
                shards.ident, broadcast.ident
            ),
        );
        return None;
    }
    if shards.is_some() {
        let n = values.integer("shards")?;
        return Some(Spread {
            // At most MAX_SHARDS: the key's range.
            distribution: Distribution::Shards(u32::try_from(n).ok()?),
            key: "shards",
        });
    }
    if broadcast.is_some() && values.bool("broadcast")? {
        return Some(Spread {
            distribution: Distribution::Broadcast,
            key: "broadcast",
        });
    }
    Some(Spread {
        distribution: Distribution::Single,
        key: "",
    })
}

impl Spread {
    /// `ScheduledJob::distribution`'s value.
    pub(crate) fn tokens(&self) -> TokenStream {
        match self.distribution {
            Distribution::Single => quote!(#PRIVATE::Distribution::Single),
            Distribution::Shards(n) => quote!(#PRIVATE::Distribution::Shards(#n)),
            Distribution::Broadcast => quote!(#PRIVATE::Distribution::Broadcast),
        }
    }

    /// The lock name `name` leaves room for every shard's name (`<name>#<index>`); the error
    /// is on the name's literal and says how long it may be.
    pub(crate) fn check_name(&self, name: &LitStr) -> Result<(), syn::Error> {
        match self.distribution.check(&name.value()) {
            Ok(()) => Ok(()),
            Err(DistributionError::NameTooLong { max, .. }) => {
                let key = self.key;
                let each = match self.distribution {
                    Distribution::Broadcast => "rank",
                    _ => "shard",
                };
                Err(syn::Error::new(
                    name.span(),
                    format!(
                        "the lock `name` is {} bytes, but with `{key}` each {each} is locked under \
                         `{}`, {} bytes more, and lock names are at most {} bytes (the lock \
                         table's `name` column is VARCHAR({})): with `{key}` this name may be at \
                         most {max} bytes; choose a shorter name",
                        name.value().len(),
                        self.distribution
                            .lock_name(&name.value(), last_index(self.distribution)),
                        self.distribution.suffix_len(),
                        lock_trigger::MAX_LOCK_NAME_LEN,
                        lock_trigger::MAX_LOCK_NAME_LEN,
                    ),
                ))
            }
            // The count is checked with the key.
            Err(DistributionError::ShardCount(_)) => Ok(()),
        }
    }
}

/// The largest shard index (or broadcast rank) a distribution locks under.
fn last_index(distribution: Distribution) -> u32 {
    match distribution {
        Distribution::Shards(n) => n.saturating_sub(1),
        _ => lock_trigger::MAX_SHARDS - 1,
    }
}
