//! The key layout: one hash per lock, `<prefix>:<name>`.
//!
//! One key per lock is what makes every script a single-key script, so the provider works
//! unchanged on Redis Cluster (each lock lives in the slot of its own key). A prefix with a
//! hash tag (`{shedlock}`) puts every lock in one slot instead, so that `list_locks` finds them
//! all on one node.

use crate::config::RedisLockConfig;

/// The keys of one configuration.
#[derive(Clone, Debug)]
pub(crate) struct KeyLayout {
    /// `<prefix>:`
    head: String,
}

impl KeyLayout {
    /// The layout of a validated configuration.
    pub(crate) fn new(config: &RedisLockConfig) -> Self {
        KeyLayout {
            head: format!("{}:", config.key_prefix),
        }
    }

    /// The hash of lock `name`.
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.head)
    }

    /// The `SCAN MATCH` pattern of every lock: the prefix holds no glob character
    /// ([`RedisLockConfig::validate`]), so only the `*` matches freely.
    pub(crate) fn pattern(&self) -> String {
        format!("{}*", self.head)
    }

    /// The lock name of `key`, if it is one of this layout's keys.
    pub(crate) fn name_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(&self.head).filter(|name| !name.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_names_round_trip() {
        let layout = KeyLayout::new(&RedisLockConfig::default().with_key_prefix("{ops}"));
        assert_eq!(layout.key("report:daily"), "{ops}:report:daily");
        assert_eq!(layout.pattern(), "{ops}:*");
        assert_eq!(layout.name_of("{ops}:report:daily"), Some("report:daily"));
        assert_eq!(layout.name_of("{ops}:"), None);
        assert_eq!(layout.name_of("other:report"), None);
    }
}
