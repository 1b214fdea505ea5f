//! The topic's configuration: what open checks (and migrates) on an existing topic, against the
//! settings a created one gets (`config.rs`). See the crate documentation's "Topic
//! configuration".

use crate::config::{CLEANUP_POLICY, KafkaConfig, RETENTION_BYTES, RETENTION_MS, SETTINGS};
use crate::error::{KafkaError, LogContext, code_is_retryable, error_code, retention_kind};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ConfigResource, ConfigSource, ResourceSpecifier};
use rdkafka::error::KafkaError as RdError;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// What open does with an existing topic, decided from its described configuration.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The topic is usable as it is.
    Keep,
    /// Usable only because the configuration accepts retention: Kafka deletes records by
    /// `setting`.
    KeepWithRetention {
        /// `retention.ms` or `retention.bytes`.
        setting: &'static str,
        /// Its value.
        value: String,
    },
    /// The policy lacks `delete`, so `DeleteRecords` is refused: alter the topic to
    /// [`SETTINGS`].
    Migrate {
        /// The topic's `cleanup.policy`.
        policy: String,
    },
}

/// Decides from the topic's described settings (name → value) whether it is usable, must be
/// migrated, or is refused ([`KafkaError::TopicRetention`]). Pure: no broker involved.
pub(crate) fn decide(
    topic: &str,
    described: &BTreeMap<String, String>,
    allow_retention: bool,
) -> Result<Decision, KafkaError> {
    let missing = |setting: &str| KafkaError::Unexpected(format!("topic {topic}: the broker describes no {setting}"));
    let policy = described.get(CLEANUP_POLICY).ok_or_else(|| missing(CLEANUP_POLICY))?;
    let deletes =
        policy.trim_matches(|c| c == '[' || c == ']').split(',').any(|p| p.trim().eq_ignore_ascii_case("delete"));
    if !deletes {
        return Ok(Decision::Migrate { policy: policy.clone() });
    }
    for setting in [RETENTION_MS, RETENTION_BYTES] {
        let value = described.get(setting).ok_or_else(|| missing(setting))?;
        let limit: i64 = value
            .trim()
            .parse()
            .map_err(|_| KafkaError::Unexpected(format!("topic {topic}: {setting}={value} is not a number")))?;
        // Kafka reads any negative value as "no limit".
        if limit < 0 {
            continue;
        }
        if allow_retention {
            return Ok(Decision::KeepWithRetention { setting, value: value.clone() });
        }
        return Err(KafkaError::TopicRetention {
            topic: topic.to_owned(),
            policy: policy.clone(),
            setting,
            value: value.clone(),
        });
    }
    Ok(Decision::Keep)
}

/// The described settings that have a value, by name.
fn values(resource: &ConfigResource) -> BTreeMap<String, String> {
    resource.entries.iter().filter_map(|e| Some((e.name.clone(), e.value.clone()?))).collect()
}

fn options(config: &KafkaConfig) -> AdminOptions {
    AdminOptions::new().request_timeout(Some(config.request_timeout)).operation_timeout(Some(config.request_timeout))
}

/// The topic's configuration as the broker describes it.
async fn describe(admin: &AdminClient<LogContext>, config: &KafkaConfig) -> Result<ConfigResource, KafkaError> {
    const OPERATION: &str = "describing the configuration";
    let fail = |source: RdError| KafkaError::Admin {
        operation: OPERATION,
        topic: config.topic.clone(),
        source: Box::new(source),
        context: admin.inner().context().last(),
    };
    let resource = ResourceSpecifier::Topic(&config.topic);
    let results = admin.describe_configs([&resource], &options(config)).await.map_err(fail)?;
    match results.into_iter().next() {
        Some(Ok(described)) => Ok(described),
        Some(Err(code)) => Err(fail(RdError::AdminOp(code))),
        None => {
            Err(KafkaError::Unexpected(format!("describing topic {} answered with no configuration", config.topic)))
        }
    }
}

/// Checks the existing topic's configuration: keeps it, migrates it, or refuses it.
pub(crate) async fn check(admin: &AdminClient<LogContext>, config: &KafkaConfig) -> Result<(), KafkaError> {
    let described = describe(admin, config).await?;
    match decide(&config.topic, &values(&described), config.allow_retention)? {
        Decision::Keep => Ok(()),
        Decision::KeepWithRetention { setting, value } => {
            tracing::warn!(
                topic = %config.topic,
                setting,
                value = %value,
                "the topic deletes records by retention (accepted by allow_retention=true): a checkpoint that needs \
                 records older than that cannot be restored"
            );
            Ok(())
        }
        Decision::Migrate { policy } => migrate(admin, config, &described, &policy).await,
    }
}

/// What a read-only open says about the topic's configuration, which it never changes: a
/// topic that deletes records by age or size may already have lost records that a checkpoint
/// needs (the log is read as it is: a marker below the earliest offsets is reported as data
/// loss); one whose policy lacks `delete` would be migrated by a writer's open. A topic whose
/// configuration cannot be described (no `DescribeConfigs` permission) is read all the same.
pub(crate) async fn warn_read_only(admin: &AdminClient<LogContext>, config: &KafkaConfig) {
    let described = match describe(admin, config).await {
        Ok(described) => values(&described),
        Err(e) => {
            tracing::warn!(topic = %config.topic, error = %e, "reading the topic without knowing whether it deletes records by age or size");
            return;
        }
    };
    match decide(&config.topic, &described, true) {
        Ok(Decision::Keep) => {}
        Ok(Decision::KeepWithRetention { setting, value }) => tracing::warn!(
            topic = %config.topic,
            setting,
            value = %value,
            "the topic deletes records by {} ({setting}={value}): records a checkpoint needs may already be gone, \
             and the tools read what is left",
            retention_kind(setting)
        ),
        Ok(Decision::Migrate { policy }) => tracing::info!(
            topic = %config.topic,
            policy = %policy,
            "the topic has cleanup.policy={policy}, which a writer's open migrates to compact,delete; read as it is"
        ),
        Err(e) => tracing::warn!(topic = %config.topic, error = %e, "reading the topic as it is"),
    }
}

/// Alters the topic to [`SETTINGS`], keeping its other overrides (`AlterConfigs` resets every
/// setting it is not given), and waits until the broker describes the change.
async fn migrate(
    admin: &AdminClient<LogContext>,
    config: &KafkaConfig,
    described: &ConfigResource,
    policy: &str,
) -> Result<(), KafkaError> {
    let topic = &config.topic;
    let failed = |detail: String, retryable: bool| KafkaError::TopicMigration {
        topic: topic.clone(),
        policy: policy.to_owned(),
        detail,
        retryable,
    };
    let mut entries: HashMap<&str, &str> = HashMap::new();
    for e in described.entries.iter().filter(|e| e.source == ConfigSource::DynamicTopic && !e.is_read_only) {
        let Some(value) = e.value.as_deref() else {
            return Err(failed(
                format!("the topic's setting {} cannot be read back, and altering the topic would reset it", e.name),
                false,
            ));
        };
        entries.insert(&e.name, value);
    }
    let kept = entries.keys().filter(|k| !SETTINGS.iter().any(|(s, _)| s == *k)).count();
    entries.extend(SETTINGS);
    let alter = AlterConfig { specifier: ResourceSpecifier::Topic(topic), entries };
    let results = admin.alter_configs([&alter], &options(config)).await.map_err(|e| {
        let retryable = error_code(&e).is_some_and(code_is_retryable);
        failed(e.to_string(), retryable)
    })?;
    for r in results {
        if let Err((_, code)) = r {
            return Err(failed(code.to_string(), code_is_retryable(code)));
        }
    }
    // The controller has the change; wait until the broker describes it.
    let started = Instant::now();
    loop {
        let now = values(&describe(admin, config).await?);
        if decide(topic, &now, false).ok() == Some(Decision::Keep) {
            break;
        }
        if started.elapsed() >= config.request_timeout {
            let shown: Vec<String> =
                SETTINGS.iter().map(|(s, _)| format!("{s}={}", now.get(*s).map_or("?", String::as_str))).collect();
            return Err(failed(
                format!("the broker accepted the change, but still describes {}", shown.join(", ")),
                true,
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(
        topic = %topic,
        from = policy,
        kept_overrides = kept,
        "migrated the topic to cleanup.policy=compact,delete, retention.ms=-1, retention.bytes=-1, so that reclaim \
         can delete records"
    );
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn described(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn topic(policy: &str, ms: &str, bytes: &str) -> BTreeMap<String, String> {
        described(&[(CLEANUP_POLICY, policy), (RETENTION_MS, ms), (RETENTION_BYTES, bytes), ("segment.ms", "1000")])
    }

    #[test]
    fn a_created_topic_is_kept() {
        let settings: BTreeMap<String, String> =
            SETTINGS.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        assert_eq!(decide("t", &settings, false).unwrap(), Decision::Keep);
        assert_eq!(decide("t", &topic("delete,compact", "-1", "-1"), false).unwrap(), Decision::Keep);
        assert_eq!(decide("t", &topic("[compact, delete]", "-1", "-1"), false).unwrap(), Decision::Keep);
        // A delete-only topic without retention can be reclaimed too (it is just not compacted).
        assert_eq!(decide("t", &topic("delete", "-1", "-1"), false).unwrap(), Decision::Keep);
        // Any negative value is "no limit" to Kafka.
        assert_eq!(decide("t", &topic("compact,delete", "-2", "-1"), false).unwrap(), Decision::Keep);
    }

    #[test]
    fn a_compact_only_topic_is_migrated_whatever_its_retention() {
        for (ms, bytes) in [("-1", "-1"), ("604800000", "-1"), ("604800000", "1073741824")] {
            for allow in [false, true] {
                assert_eq!(
                    decide("t", &topic("compact", ms, bytes), allow).unwrap(),
                    Decision::Migrate { policy: "compact".into() },
                    "retention.ms={ms} retention.bytes={bytes} allow={allow}"
                );
            }
        }
        // Retention does not matter without `delete`: the entries need not even be there.
        let only_policy = described(&[(CLEANUP_POLICY, "compact")]);
        assert_eq!(decide("t", &only_policy, false).unwrap(), Decision::Migrate { policy: "compact".into() });
    }

    #[test]
    fn finite_retention_is_refused_naming_topic_setting_and_value() {
        let err = decide("orders", &topic("delete", "604800000", "-1"), false).unwrap_err();
        assert!(
            matches!(&err, KafkaError::TopicRetention { topic, setting, value, policy }
                if topic == "orders" && *setting == RETENTION_MS && value == "604800000" && policy == "delete"),
            "{err:?}"
        );
        let text = err.to_string();
        for part in ["orders", "retention.ms=604800000", "retention.ms=-1", "retention.bytes=-1", "allow_retention"] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
        assert!(!err.is_retryable());

        let err = decide("orders", &topic("compact,delete", "-1", "1073741824"), false).unwrap_err();
        assert!(
            matches!(&err, KafkaError::TopicRetention { setting, value, .. }
                if *setting == RETENTION_BYTES && value == "1073741824"),
            "{err:?}"
        );
        assert!(err.to_string().contains("by size"), "{err}");
        // Both finite: the time limit is named first.
        let err = decide("orders", &topic("delete", "0", "10"), false).unwrap_err();
        assert!(matches!(&err, KafkaError::TopicRetention { setting, .. } if *setting == RETENTION_MS), "{err:?}");
    }

    #[test]
    fn finite_retention_is_kept_when_allowed() {
        assert_eq!(
            decide("t", &topic("delete", "604800000", "-1"), true).unwrap(),
            Decision::KeepWithRetention { setting: RETENTION_MS, value: "604800000".into() }
        );
        assert_eq!(
            decide("t", &topic("compact,delete", "-1", "5000"), true).unwrap(),
            Decision::KeepWithRetention { setting: RETENTION_BYTES, value: "5000".into() }
        );
    }

    #[test]
    fn a_description_without_the_settings_is_unexpected() {
        let err = decide("t", &described(&[("segment.ms", "1")]), false).unwrap_err();
        assert!(matches!(&err, KafkaError::Unexpected(m) if m.contains("cleanup.policy")), "{err:?}");
        let err = decide("t", &described(&[(CLEANUP_POLICY, "delete"), (RETENTION_MS, "-1")]), false).unwrap_err();
        assert!(matches!(&err, KafkaError::Unexpected(m) if m.contains("retention.bytes")), "{err:?}");
        let err = decide("t", &topic("delete", "forever", "-1"), false).unwrap_err();
        assert!(matches!(&err, KafkaError::Unexpected(m) if m.contains("forever")), "{err:?}");
    }
}
