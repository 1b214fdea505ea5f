//! The backend conformance suite and SASL checks against a real Kafka broker.
//!
//! The broker comes from `KAFKA_BOOTSTRAP` (and `KAFKA_SASL_*`) in the environment, or from
//! `<workspace>/target/services/kafka.env` as written by `cargo xtask services up kafka`.
//! Without either the tests print `ACTIONSTATE-SKIP` and pass, unless
//! `ACTIONSTATE_REQUIRE_SERVICES` is set, in which case they fail.

#![allow(clippy::unwrap_used)]

use actionstate_core::{Error, KeyId, StateLog, WireRecord};
use actionstate_kafka::{KafkaConfig, KafkaLog, Security};
use actionstate_recovery::testkit::conformance;
use actionstate_recovery::testkit::services::Service;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use std::time::{Duration, Instant};

/// The broker's settings (`KAFKA_BOOTSTRAP`, `KAFKA_SASL_*`).
#[derive(Debug, Clone)]
struct Broker(Service);

impl Broker {
    fn get(&self, key: &str) -> Option<String> {
        self.0.get(key).map(str::to_owned)
    }

    fn bootstrap(&self) -> String {
        self.get("KAFKA_BOOTSTRAP").unwrap()
    }
}

/// The configured broker, or `None` after printing the skip marker.
fn broker(test: &str) -> Option<Broker> {
    Service::require("kafka", "KAFKA", test).map(Broker)
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

/// Conformance harness: each fresh log is a new topic on the shared broker.
#[derive(Debug)]
struct KafkaHarness {
    broker: Broker,
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
        KafkaLog::open(test_config(&self.broker.bootstrap(), &unique_topic("conformance"), partitions)).await
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
        let started = Instant::now();
        loop {
            match KafkaLog::open(config.clone()).await {
                Ok(log) => return Ok(log),
                Err(e) if started.elapsed() < Duration::from_secs(60) => {
                    eprintln!("recreate: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
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
    let started = Instant::now();
    let err = conformance::Harness::unreachable(&KafkaHarness { broker }).await.unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}: {err}");
    assert!(err.is_retryable(), "an unreachable broker should be retryable: {err}");
    assert!(err.to_string().contains("127.0.0.1:1"), "the error does not name the broker: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_topic_with_other_partition_count_is_refused() {
    let Some(broker) = broker("partitions") else { return };
    let topic = unique_topic("partitions");
    let log = KafkaLog::open(test_config(&broker.bootstrap(), &topic, 2)).await.unwrap();
    assert_eq!(log.identity().partitions, 2);
    assert_eq!(log.identity().backend, "kafka");
    let err = KafkaLog::open(test_config(&broker.bootstrap(), &topic, 3)).await.unwrap_err();
    assert!(err.to_string().contains("has 2 partitions, configured 3"), "{err}");
    assert!(!err.is_retryable());
}

#[test]
fn debug_hides_the_password() {
    let mut c = KafkaConfig::new("b:9092", "t", 1);
    c.security = Some(Security::sasl_plain("user", "hunter2-secret"));
    c.client_properties.insert("ssl.key.password".into(), "other-secret".into());
    let text = format!("{c:?}");
    assert!(!text.contains("hunter2-secret") && !text.contains("other-secret"), "{text}");
    assert!(text.contains("***") && text.contains("user"), "{text}");
}

fn sasl_config(broker: &Broker, topic: &str, password: &str) -> Option<KafkaConfig> {
    let bootstrap = broker.get("KAFKA_SASL_BOOTSTRAP")?;
    let username = broker.get("KAFKA_SASL_USERNAME")?;
    let mut c = test_config(&bootstrap, topic, 2);
    c.security = Some(Security::sasl_plain(username, password));
    Some(c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_round_trip() {
    let Some(broker) = broker("sasl") else { return };
    let password = broker.get("KAFKA_SASL_PASSWORD").expect("KAFKA_SASL_PASSWORD");
    let config = sasl_config(&broker, &unique_topic("sasl"), &password).expect("KAFKA_SASL_BOOTSTRAP");
    let log = KafkaLog::open(config).await.unwrap();
    let record = WireRecord { key_id: KeyId::of(b"sasl-key"), key: b"k".to_vec(), value: b"v".to_vec() };
    let p = log.append(record.clone()).await.unwrap();
    assert!(p.exact);
    let end = log.end_offsets().await.unwrap()[p.partition as usize];
    let batch = log.read(p.partition, p.offset, end, 10).await.unwrap();
    assert_eq!(batch.records.len(), 1);
    assert_eq!((batch.records[0].key.as_slice(), batch.records[0].value.as_slice()), (&b"k"[..], &b"v"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_wrong_password_fails_with_authentication_error() {
    let Some(broker) = broker("sasl-wrong-password") else { return };
    let mut config = sasl_config(&broker, &unique_topic("sasl-bad"), "not-the-password").expect("KAFKA_SASL_BOOTSTRAP");
    config.request_timeout = Duration::from_secs(5);
    let started = Instant::now();
    let err = KafkaLog::open(config).await.unwrap_err();
    let text = err.to_string();
    assert!(text.to_lowercase().contains("authentication"), "not an authentication error: {text}");
    assert!(!err.is_retryable(), "a rejected password is not retryable: {text}");
    assert!(!text.contains("not-the-password"), "the error shows the password: {text}");
    eprintln!("wrong password after {:?}: {text}", started.elapsed());
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
    // Kafka refuses DeleteRecords on a compact-only topic: create it with `compact,delete` first;
    // open takes an existing topic as it is.
    let topic = unique_topic("delete-records");
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create().unwrap();
    let new = NewTopic::new(&topic, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "compact,delete");
    for r in admin.create_topics([&new], &AdminOptions::new()).await.unwrap() {
        r.unwrap();
    }
    let mut config = test_config(&broker.bootstrap(), &topic, 1);
    config.read_stall_timeout = Duration::from_secs(2);
    let log = KafkaLog::open(config).await.unwrap();
    for n in 0..6u8 {
        let record = WireRecord { key_id: KeyId::of(b"dr"), key: vec![n], value: vec![n] };
        log.append(record).await.unwrap();
    }
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(log.topic(), 0, rdkafka::Offset::Offset(3)).unwrap();
    for r in admin.delete_records(&tpl, &AdminOptions::new()).await.unwrap().elements() {
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
    let batch = log.read(0, 3, 9, 10).await.unwrap();
    assert_eq!(batch.records.len(), 3);
    assert_eq!(batch.next, 6);
    let err = log.read(0, 6, 9, 10).await.unwrap_err();
    eprintln!("read past the end: {err}");
    assert!(err.to_string().contains("partition 0") && err.to_string().contains("offset 6"), "{err}");
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
    let mut config = test_config(&broker.bootstrap(), &topic, 1);
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
    use actionstate_core::Marker;
    let Some(broker) = broker("recreated-topic") else { return };
    let harness = KafkaHarness { broker };
    let log = conformance::Harness::fresh(&harness, 2).await.unwrap();
    let old = log.identity().clone();
    assert_eq!(old.id.split('/').count(), 3, "identity {old} carries cluster, topic and topic id");
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(&[n]), key: vec![n], value: vec![n] }).await.unwrap();
    }
    let marker = Marker { log: old.clone(), offsets: log.end_offsets().await.unwrap() };

    let log = conformance::Harness::recreate(&harness, log, 2).await.unwrap();
    let new = log.identity().clone();
    eprintln!("before: {old}\nafter:  {new}");
    assert_eq!(new.partitions, old.partitions);
    assert_ne!(new.id, old.id, "a recreated topic must have another identity");
    // The new topic is written up to the same offsets, so only the identity tells them apart.
    for n in 0..3u8 {
        log.append(WireRecord { key_id: KeyId::of(&[n]), key: vec![n], value: vec![n] }).await.unwrap();
    }
    let current = log.current_identity().await.unwrap();
    let err = marker.validate(&current, &log.earliest_offsets().await.unwrap(), &log.end_offsets().await.unwrap());
    let err = err.unwrap_err();
    eprintln!("old marker on the recreated topic: {err}");
    assert!(matches!(err, Error::LogChanged { .. }), "{err}");
}
