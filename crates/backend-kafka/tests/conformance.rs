//! The backend conformance suite, SASL checks, reclaim and the topic configuration checks
//! against a real Kafka broker.
//!
//! The broker comes from `KAFKA_BOOTSTRAP` (and `KAFKA_SASL_*`) in the environment, or from
//! `<workspace>/target/services/kafka.env` as written by `cargo xtask services up kafka`.
//! Without either the tests print `ACTIONSTATE-SKIP` and pass, unless
//! `ACTIONSTATE_REQUIRE_SERVICES` is set, in which case they fail.

#![allow(clippy::unwrap_used)]

use actionstate_core::{Error, KeyId, Marker, StateLog, WireRecord};
use actionstate_kafka::{KafkaConfig, KafkaError, KafkaLog, Security};
use actionstate_testkit::scenarios::{self, LogCapture};
use actionstate_testkit::{conformance, services::Service};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The configured broker (`KAFKA_BOOTSTRAP`, `KAFKA_SASL_*`), or `None` after printing the
/// skip marker.
fn broker(test: &str) -> Option<Service> {
    Service::require("kafka", "KAFKA", test)
}

fn unique_topic(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn test_config(bootstrap: &str, topic: &str, partitions: u32) -> KafkaConfig {
    let mut c = KafkaConfig::new(bootstrap, topic, partitions);
    c.replication = Some(1);
    c.delivery_timeout = Duration::from_secs(20);
    c.read_stall_timeout = Duration::from_secs(10);
    c.request_timeout = Duration::from_secs(15);
    c
}

fn admin(broker: &Service) -> AdminClient<DefaultClientContext> {
    ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap()
}

/// Creates `topic` with one partition and the given settings, as a user (or an earlier version
/// of the crate) would.
async fn create_topic(broker: &Service, topic: &str, settings: &[(&str, &str)]) {
    let mut new = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
    for (k, v) in settings {
        new = new.set(k, v);
    }
    for r in admin(broker).create_topics([&new], &AdminOptions::new()).await.unwrap() {
        r.unwrap();
    }
}

/// The topic's settings as the broker describes them.
async fn describe_topic(broker: &Service, topic: &str) -> BTreeMap<String, String> {
    let resource = ResourceSpecifier::Topic(topic);
    let described = admin(broker).describe_configs([&resource], &AdminOptions::new()).await.unwrap();
    let described = described.into_iter().next().unwrap().unwrap();
    described.entries.into_iter().filter_map(|e| Some((e.name, e.value?))).collect()
}

/// The [`KafkaError`] behind a backend error.
fn kafka_error(err: &Error) -> &KafkaError {
    let Error::Backend(backend) = err else { panic!("not a backend error: {err}") };
    std::error::Error::source(backend).and_then(|s| s.downcast_ref::<KafkaError>()).unwrap()
}

/// Conformance harness: each fresh log is a new topic on the shared broker.
#[derive(Debug)]
struct KafkaHarness {
    broker: Service,
}

impl KafkaHarness {
    async fn delete_topic(&self, topic: &str) {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", self.broker.bootstrap()).create().unwrap();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(15)));
        let results = admin.delete_topics(&[topic], &opts).await.unwrap();
        for r in results {
            r.unwrap();
        }
    }
}

impl conformance::Harness for KafkaHarness {
    type Log = KafkaLog;

    async fn fresh(&self, partitions: u32) -> Result<KafkaLog, Error> {
        KafkaLog::open(test_config(self.broker.bootstrap(), &unique_topic("conformance"), partitions)).await
    }

    async fn reopen(&self, log: KafkaLog) -> Result<KafkaLog, Error> {
        let config = log.config().clone();
        drop(log);
        KafkaLog::open(config).await
    }

    async fn recreate(&self, log: KafkaLog, partitions: u32) -> Result<KafkaLog, Error> {
        let mut config = log.config().clone();
        drop(log);
        self.delete_topic(&config.topic).await;
        config.partitions = partitions;
        // The deletion may still be in progress; open retries creating the topic until it
        // appears with its new partition count.
        scenarios::retry_for(Duration::from_secs(60), "recreate", || KafkaLog::open(config.clone())).await
    }

    async fn unreachable(&self) -> Result<KafkaLog, Error> {
        let mut c = KafkaConfig::new("127.0.0.1:1", unique_topic("unreachable"), 1);
        c.delivery_timeout = Duration::from_secs(3);
        c.read_stall_timeout = Duration::from_secs(3);
        c.request_timeout = Duration::from_secs(3);
        KafkaLog::open(c).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_log_conforms() {
    let Some(broker) = broker("conformance") else { return };
    conformance::assert_conforms(&KafkaHarness { broker }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_broker_fails_within_seconds_and_is_retryable() {
    let Some(broker) = broker("unreachable") else { return };
    scenarios::assert_unreachable_fails_fast(&KafkaHarness { broker }, "broker").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_topic_with_other_partition_count_is_refused() {
    let Some(broker) = broker("partitions") else { return };
    let topic = unique_topic("partitions");
    let open = |partitions| KafkaLog::open(test_config(broker.bootstrap(), &topic, partitions));
    scenarios::assert_changed_partition_count_is_refused(open, "kafka", "partitions").await;
}

#[test]
fn debug_hides_the_password() {
    let mut c = KafkaConfig::new("b:9092", "t", 1);
    c.security = Some(Security::sasl_plain("user", "hunter2-secret"));
    c.client_properties.insert("ssl.key.password".into(), "other-secret".into());
    scenarios::assert_debug_hides(&format!("{c:?}"), "user", &["hunter2-secret", "other-secret"]);
}

fn sasl_config(broker: &Service, topic: &str, password: &str) -> Option<KafkaConfig> {
    let sasl = broker.sasl()?;
    let mut c = test_config(&sasl.bootstrap, topic, 2);
    c.security = Some(Security::sasl_plain(sasl.username, password));
    Some(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_round_trip() {
    let Some(broker) = broker("sasl") else { return };
    let password = broker.sasl().expect("KAFKA_SASL_*").password;
    let config = sasl_config(&broker, &unique_topic("sasl"), &password).expect("KAFKA_SASL_BOOTSTRAP");
    let log = KafkaLog::open(config).await.unwrap();
    assert!(scenarios::assert_round_trip(&log).await.exact);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_wrong_password_fails_with_authentication_error() {
    let Some(broker) = broker("sasl-wrong-password") else { return };
    let mut config = sasl_config(&broker, &unique_topic("sasl-bad"), "not-the-password").expect("KAFKA_SASL_BOOTSTRAP");
    config.request_timeout = Duration::from_secs(5);
    let started = Instant::now();
    scenarios::assert_wrong_password_refused(KafkaLog::open(config).await, "not-the-password");
    eprintln!("refused after {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_topic_is_reported_by_current_identity() {
    let Some(broker) = broker("deleted") else { return };
    let harness = KafkaHarness { broker };
    let log = conformance::Harness::fresh(&harness, 2).await.unwrap();
    assert_eq!(log.current_identity().await.unwrap(), *log.identity());
    harness.delete_topic(log.topic()).await;
    let started = Instant::now();
    let err = loop {
        match log.current_identity().await {
            Err(e) => break e,
            Ok(_) if started.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Ok(id) => panic!("the deleted topic still reports {id}"),
        }
    };
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_records_move_earliest_and_reads_below_it_fail() {
    let Some(broker) = broker("delete-records") else { return };
    let mut config = test_config(broker.bootstrap(), &unique_topic("delete-records"), 1);
    config.read_stall_timeout = Duration::from_secs(2);
    let log = KafkaLog::open(config).await.unwrap();
    for n in 0..6u8 {
        let record = WireRecord { key_id: KeyId::of(b"dr"), key: vec![n], value: vec![n] };
        log.append(record).await.unwrap();
    }
    // A DeleteRecords of someone else's, as the log's own reclaim does.
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(log.topic(), 0, rdkafka::Offset::Offset(3)).unwrap();
    for r in admin(&broker).delete_records(&tpl, &AdminOptions::new()).await.unwrap().elements() {
        r.error().unwrap();
    }
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![3]);
    assert_eq!(log.end_offsets().await.unwrap(), vec![6]);
    let kept = conformance::read_all(&log, 0, 3, 6).await.unwrap();
    assert_eq!(kept.iter().map(|(o, _, _)| *o).collect::<Vec<_>>(), vec![3, 4, 5]);
    let err = log.read(0, 0, 6, 10).await.unwrap_err();
    eprintln!("read below earliest: {err}");
    assert!(err.to_string().contains("partition 0"), "{err}");

    // A range reaching past the end returns what exists, then fails naming the offset.
    scenarios::assert_read_past_the_end_fails(&log, 0, 3, 6, "partition").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalidated_states_are_null_value_tombstones_read_back_as_their_envelope() {
    use actionstate_core::{ActionId, Event, EventId, InvalidationReason, LogRecord, StateKey, Trigger, codec};
    use actionstate_kafka::TOMBSTONE_HEADER;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    use rdkafka::producer::{FutureProducer, FutureRecord};

    let Some(broker) = broker("tombstones") else { return };
    let topic = unique_topic("tombstones");
    let mut config = test_config(broker.bootstrap(), &topic, 1);
    config.read_stall_timeout = Duration::from_secs(3);
    let log = KafkaLog::open(config).await.unwrap();
    let input = Event { id: EventId(1), event_type: "input".into(), attributes: Default::default() };
    let key = StateKey::new(KeyId::of(b"tomb"), 0, &ActionId::new("a"), &input, &Trigger::Input);
    let delete = LogRecord::Delete { key, reason: InvalidationReason::ProducerReplaced };
    let wire = codec::encode(&delete).unwrap();
    let envelope = wire.value.clone();
    let at = log.append(wire).await.unwrap();

    // On the topic: a null value (what compaction treats as a tombstone) with the envelope in
    // the header.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", unique_topic("tombstone-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, rdkafka::Offset::Offset(at.offset as i64)).unwrap();
    consumer.assign(&tpl).unwrap();
    let msg = loop {
        if let Some(m) = consumer.poll(Duration::from_secs(10)) {
            break m.unwrap();
        }
    };
    assert_eq!(msg.payload(), None, "a Delete record must be produced with a null value");
    let header = msg.headers().unwrap().iter().find(|h| h.key == TOMBSTONE_HEADER).unwrap();
    assert_eq!(header.value, Some(envelope.as_slice()));

    // Through the log: the bytes the store appended, which decode to the same record.
    let end = log.end_offsets().await.unwrap()[0];
    let batch = log.read(0, at.offset, end, 10).await.unwrap();
    assert_eq!(batch.records.len(), 1);
    assert_eq!(batch.records[0].value, envelope);
    assert_eq!(codec::decode(&batch.records[0].key, &batch.records[0].value).unwrap(), delete);

    // A null value written by someone else (no header) reads as an empty value, which the
    // decoder rejects instead of skipping it.
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let foreign = FutureRecord::<[u8], [u8]>::to(&topic).partition(0).key(b"foreign".as_slice());
    producer.send(foreign, Duration::from_secs(10)).await.map_err(|(e, _)| e).unwrap();
    let end = log.end_offsets().await.unwrap()[0];
    let batch = log.read(0, end - 1, end, 10).await.unwrap();
    assert_eq!(batch.records[0].value, Vec::<u8>::new());
    let err = codec::decode(&batch.records[0].key, &batch.records[0].value).unwrap_err();
    eprintln!("foreign tombstone: {err}");
    assert!(matches!(err, Error::Truncated { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreated_topic_with_the_same_partitions_is_a_changed_log() {
    let Some(broker) = broker("recreated-topic") else { return };
    let harness = KafkaHarness { broker };
    let log = conformance::Harness::fresh(&harness, 2).await.unwrap();
    // The identity carries cluster, topic and topic id.
    let recreate = |log| async { conformance::Harness::recreate(&harness, log, 2).await.unwrap() };
    scenarios::assert_recreated_log_is_changed(log, "topic", recreate).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaim_moves_the_earliest_offsets_and_an_older_marker_is_data_loss() {
    let Some(broker) = broker("reclaim") else { return };
    let topic = unique_topic("reclaim");
    let log = KafkaLog::open(test_config(broker.bootstrap(), &topic, 2)).await.unwrap();
    assert!(log.capabilities().reclaim);
    // A created topic lets DeleteRecords run, deletes nothing by itself, and rolls segments
    // small and often enough for reclaimed records to give their disk back.
    let settings = describe_topic(&broker, &topic).await;
    for (setting, value) in [
        ("cleanup.policy", "compact,delete"),
        ("retention.ms", "-1"),
        ("retention.bytes", "-1"),
        ("segment.bytes", "67108864"),
        ("segment.ms", "3600000"),
    ] {
        assert_eq!(settings.get(setting).map(String::as_str), Some(value), "{setting} of {settings:?}");
    }
    for n in 0..20u8 {
        log.append(WireRecord { key_id: KeyId::of(&[n]), key: vec![n], value: vec![n] }).await.unwrap();
    }
    let identity = log.identity().clone();
    let end = log.end_offsets().await.unwrap();
    assert!(end.iter().all(|e| *e >= 2), "both partitions hold records: {end:?}");
    let old = Marker::new(identity.clone(), log.earliest_offsets().await.unwrap());
    assert_eq!(old.offsets, vec![0, 0]);
    old.validate(&identity, &old.offsets, &end).unwrap();

    // Partition 0 up to two records from its end, partition 1 not at all.
    let before = vec![end[0] - 2, 0];
    let earliest = log.reclaim(&before).await.unwrap();
    assert_eq!(earliest, before);
    assert_eq!(log.earliest_offsets().await.unwrap(), before);
    assert_eq!(log.end_offsets().await.unwrap(), end);
    let kept = conformance::read_all(&log, 0, before[0], end[0]).await.unwrap();
    assert_eq!(kept.iter().map(|(o, _, _)| *o).collect::<Vec<_>>(), vec![end[0] - 2, end[0] - 1]);
    assert_eq!(conformance::read_all(&log, 1, 0, end[1]).await.unwrap().len() as u64, end[1]);

    let err = old.validate(&identity, &earliest, &end).unwrap_err();
    eprintln!("marker below the reclaimed offsets: {err}");
    assert!(
        matches!(err, Error::DataLoss { partition: 0, offset: 0, earliest: e } if e == before[0]),
        "not data loss of partition 0 from offset 0: {err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("partition 0") && text.contains(&format!("earliest retained offset {}", before[0])),
        "{text}"
    );
    Marker::new(identity.clone(), earliest.clone()).validate(&identity, &earliest, &end).unwrap();

    // At or below the earliest: nothing to do; beyond the end: refused; wrong length: refused.
    assert_eq!(log.reclaim(&[1, 0]).await.unwrap(), before);
    let err = log.reclaim(&[end[0] + 1, 0]).await.unwrap_err();
    assert!(matches!(err, Error::OffsetBeyondEnd { partition: 0, .. }), "{err}");
    let err = log.reclaim(&[0]).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPartition { .. }), "{err}");
    assert_eq!(log.earliest_offsets().await.unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_only_topic_is_migrated_when_opened() {
    let Some(broker) = broker("compact-only") else { return };
    let topic = unique_topic("compact-only");
    // What earlier versions of the crate created, with an override of the user's that the
    // migration must keep.
    create_topic(&broker, &topic, &[("cleanup.policy", "compact"), ("max.message.bytes", "2000000")]).await;
    let log = KafkaLog::open(test_config(broker.bootstrap(), &topic, 1)).await.unwrap();
    let described = describe_topic(&broker, &topic).await;
    let get = |k: &str| described.get(k).map(String::as_str);
    assert_eq!(get("cleanup.policy"), Some("compact,delete"), "{described:?}");
    assert_eq!(get("retention.ms"), Some("-1"));
    assert_eq!(get("retention.bytes"), Some("-1"));
    assert_eq!(get("max.message.bytes"), Some("2000000"), "the migration reset another override");

    for n in 0..4u8 {
        log.append(WireRecord { key_id: KeyId::of(b"m"), key: vec![n], value: vec![n] }).await.unwrap();
    }
    assert_eq!(log.reclaim(&[2]).await.unwrap(), vec![2]);
    drop(log);
    // Opening the migrated topic again changes nothing.
    let log = KafkaLog::open(test_config(broker.bootstrap(), &topic, 1)).await.unwrap();
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![2]);
    assert_eq!(describe_topic(&broker, &topic).await, described);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_with_time_retention_is_refused_unless_allowed() {
    let Some(broker) = broker("time-retention") else { return };
    let topic = unique_topic("time-retention");
    create_topic(&broker, &topic, &[("cleanup.policy", "delete"), ("retention.ms", "604800000")]).await;
    let config = test_config(broker.bootstrap(), &topic, 1);
    let err = KafkaLog::open(config.clone()).await.unwrap_err();
    eprintln!("time retention: {err}");
    assert!(!err.is_retryable(), "{err}");
    match kafka_error(&err) {
        KafkaError::TopicRetention { topic: t, setting, value, .. } => {
            assert_eq!((t.as_str(), *setting, value.as_str()), (topic.as_str(), "retention.ms", "604800000"));
        }
        other => panic!("not a retention refusal: {other:?}"),
    }
    let text = err.to_string();
    for part in
        [topic.as_str(), "retention.ms=604800000", "retention.ms=-1", "retention.bytes=-1", "allow_retention=true"]
    {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    assert!(!text.contains("KafkaConfig"), "the error names a Rust field: {text}");
    // Refused, not changed.
    assert_eq!(describe_topic(&broker, &topic).await.get("retention.ms").map(String::as_str), Some("604800000"));

    let mut allowed = config;
    allowed.allow_retention = true;
    let log = KafkaLog::open(allowed).await.unwrap();
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(b"r"), key: vec![n], value: vec![n] }).await.unwrap();
    }
    assert_eq!(log.reclaim(&[1]).await.unwrap(), vec![1]);
    assert_eq!(describe_topic(&broker, &topic).await.get("retention.ms").map(String::as_str), Some("604800000"));
}

/// Writes `n` keyed records to partition 0 of `topic` with a plain producer, as another
/// client would (a log opened for writing would migrate the topic first).
fn produce(broker: &Service, topic: &str, n: u8) {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    for i in 0..n {
        producer.send(BaseRecord::to(topic).partition(0).key(&[i][..]).payload(&[i][..])).unwrap();
    }
    producer.flush(Duration::from_secs(15)).unwrap();
}

/// A read-only open (the offline tools') changes nothing on the broker: a missing topic is
/// `TopicMissing` and is not created; a compact-only topic is read as it is, not migrated;
/// a topic that deletes by age is read too, with a warning saying what may be gone; and
/// neither accepts an append or a reclaim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_open_creates_migrates_and_writes_nothing() {
    let Some(broker) = broker("read-only") else { return };
    let read_only = |topic: &str| {
        let mut c = test_config(broker.bootstrap(), topic, 8);
        c.read_only = true;
        c
    };
    let exists = |topic: &str| {
        use rdkafka::consumer::Consumer;
        let consumer: rdkafka::consumer::BaseConsumer =
            ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
        let md = consumer.fetch_metadata(None, Duration::from_secs(10)).unwrap();
        md.topics().iter().any(|t| t.name() == topic)
    };
    let missing = unique_topic("read-only-missing");
    let err = KafkaLog::open(read_only(&missing)).await.unwrap_err();
    assert!(matches!(kafka_error(&err), KafkaError::TopicMissing { topic } if *topic == missing), "{err:?}");
    assert!(err.to_string().contains(&missing), "{err}");
    assert!(!exists(&missing), "a read-only open created {missing}");

    for (name, settings, warned) in [
        ("read-only-compact", &[("cleanup.policy", "compact")][..], None),
        (
            "read-only-retention",
            &[("cleanup.policy", "delete"), ("retention.ms", "604800000")][..],
            Some("retention.ms=604800000"),
        ),
        (
            "read-only-size",
            &[("cleanup.policy", "compact,delete"), ("retention.ms", "-1"), ("retention.bytes", "1073741824")][..],
            Some("by size"),
        ),
    ] {
        let topic = unique_topic(name);
        create_topic(&broker, &topic, settings).await;
        produce(&broker, &topic, 3);
        let described = describe_topic(&broker, &topic).await;
        let logged = LogCapture::new();
        let subscriber = tracing_subscriber::fmt().with_writer(logged.writer()).finish();
        let log = {
            let _guard = tracing::subscriber::set_default(subscriber);
            KafkaLog::open(read_only(&topic)).await.unwrap()
        };
        let logged = logged.text();
        match warned {
            Some(says) => assert!(logged.contains("WARN") && logged.contains(says), "{name}: {logged}"),
            None => assert!(!logged.contains("WARN"), "{name}: {logged}"),
        }
        assert_eq!(log.identity().partitions, 1, "{name}: the partitions it has, not those configured");
        assert_eq!((log.earliest_offsets().await.unwrap(), log.end_offsets().await.unwrap()), (vec![0], vec![3]));
        assert_eq!(log.read(0, 0, 3, 10).await.unwrap().records.len(), 3, "{name}");
        let append = log.append(WireRecord { key_id: KeyId::of(b"r"), key: b"k".to_vec(), value: b"v".to_vec() });
        assert!(matches!(append.await, Err(Error::Unsupported { .. })), "{name}");
        assert!(matches!(log.reclaim(&[1]).await, Err(Error::Unsupported { .. })), "{name}");
        drop(log);
        assert_eq!(describe_topic(&broker, &topic).await, described, "{name}: the topic's configuration changed");
        let check = KafkaLog::open(read_only(&topic)).await.unwrap();
        assert_eq!((check.earliest_offsets().await.unwrap(), check.end_offsets().await.unwrap()), (vec![0], vec![3]));
    }
}

/// A client without credentials on the SASL listener fails within its request timeout, and
/// the error says which URL parameters the listener may need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_listener_without_credentials_hints_at_authentication() {
    let Some(broker) = broker("sasl-no-credentials") else { return };
    let bootstrap = broker.sasl().expect("the broker's settings name no SASL listener").bootstrap;
    let mut config = test_config(&bootstrap, &unique_topic("sasl-none"), 1);
    config.request_timeout = Duration::from_secs(3);
    let started = Instant::now();
    let err = KafkaLog::open(config).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}: {err}", started.elapsed());
    assert!(matches!(kafka_error(&err), KafkaError::Client { authentication_hint: true, .. }), "{err:?}");
    assert!(err.to_string().contains("security=sasl_plaintext&username=U&password_env=VAR"), "{err}");
    // No broker at all: nothing to authenticate to, no such hint.
    let mut config = test_config("127.0.0.1:1", &unique_topic("sasl-none"), 1);
    config.request_timeout = Duration::from_secs(2);
    let err = KafkaLog::open(config).await.unwrap_err();
    assert!(!err.to_string().contains("security=sasl_plaintext"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reclaim_the_broker_refuses_names_topic_partition_and_offset() {
    use rdkafka::admin::AlterConfig;
    let Some(broker) = broker("reclaim-refused") else { return };
    let topic = unique_topic("reclaim-refused");
    let log = KafkaLog::open(test_config(broker.bootstrap(), &topic, 1)).await.unwrap();
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(b"x"), key: vec![n], value: vec![n] }).await.unwrap();
    }
    // Someone sets the open log's topic back to compact only: the broker refuses DeleteRecords.
    let alter = AlterConfig::new(ResourceSpecifier::Topic(&topic)).set("cleanup.policy", "compact");
    for r in admin(&broker).alter_configs([&alter], &AdminOptions::new()).await.unwrap() {
        r.unwrap();
    }
    let started = Instant::now();
    while describe_topic(&broker, &topic).await.get("cleanup.policy").map(String::as_str) != Some("compact") {
        assert!(started.elapsed() < Duration::from_secs(30), "the broker does not describe the change");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let err = log.reclaim(&[2]).await.unwrap_err();
    eprintln!("refused reclaim: {err}");
    assert!(!err.is_retryable(), "{err}");
    assert!(matches!(kafka_error(&err), KafkaError::Reclaim { targets, .. } if targets == &[(0, 2)]), "{err:?}");
    let text = err.to_string();
    for part in [topic.as_str(), "partition 0 below offset 2", "cleanup.policy must include delete"] {
        assert!(text.contains(part), "{part:?} missing from: {text}");
    }
    assert_eq!(log.earliest_offsets().await.unwrap(), vec![0]);
    drop(log);
    // Opening it again migrates it back, and the reclaim goes through.
    let log = KafkaLog::open(test_config(broker.bootstrap(), &topic, 1)).await.unwrap();
    assert_eq!(log.reclaim(&[2]).await.unwrap(), vec![2]);
}

/// A log URL carries no secret: the password comes from the file `password_file` names. The
/// right one from a file opens the SASL listener; a wrong one fails as an authentication
/// error, and neither the error, nor the configuration's `Debug`, nor anything the client
/// logged through `tracing` shows either password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_takes_the_password_from_a_file_and_never_shows_it() {
    let Some(broker) = broker("url-secrets") else { return };
    let Some(sasl) = broker.sasl() else { panic!("the broker's settings name no SASL listener (KAFKA_SASL_*)") };
    let (bootstrap, username, password) = (sasl.bootstrap, sasl.username, sasl.password);
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
    std::fs::write(&good, format!("{password}\n")).unwrap();
    std::fs::write(&bad, "wrong-Secret-8c1f\n").unwrap();
    let url = |file: &std::path::Path| {
        format!(
            "kafka://{bootstrap}/{}?replication=1&request_timeout=5s&username={username}&password_file={}",
            unique_topic("url-sasl"),
            file.display()
        )
    };
    let config = KafkaConfig::from_url(&url(&good)).unwrap();
    assert!(!format!("{config:?}").contains(&password), "Debug shows the password: {config:?}");
    let log = KafkaLog::open(config).await.unwrap();
    log.append(WireRecord { key_id: KeyId::of(b"u"), key: b"k".to_vec(), value: b"v".to_vec() }).await.unwrap();

    let logged = LogCapture::new();
    let subscriber =
        tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(logged.writer()).finish();
    let err = {
        let _guard = tracing::subscriber::set_default(subscriber);
        KafkaLog::open(KafkaConfig::from_url(&url(&bad)).unwrap()).await.unwrap_err()
    };
    let shown = format!("{err} {err:?} {}", logged.text());
    assert!(err.to_string().to_lowercase().contains("authentication"), "{err}");
    for secret in ["wrong-Secret-8c1f", password.as_str()] {
        assert!(!shown.contains(secret), "a password was shown: {shown}");
    }
}
