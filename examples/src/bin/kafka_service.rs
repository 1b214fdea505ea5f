//! `kafka-service`: a service that consumes its inputs from a Kafka topic and keeps its action
//! state on a Kafka log (another topic of the same broker), and resumes input and state from
//! one record: each checkpoint it writes into the log carries, as its metadata, the next offset
//! of every input partition. Nothing is committed to a consumer group, so the input position
//! can never disagree with the state.
//!
//! Each input (`key`, `"SEQ TEXT"`) is one round with one action, which makes one side effect
//! through a reconciled durable call: it appends `effect KEY SEQ` to the ledger file. After a
//! crash between the effect and its journaled result, the reconciler reads the ledger to find
//! out whether the effect happened, instead of making it again. Once the action's state is
//! durable, the service appends `ack KEY SEQ`. It checkpoints every `--checkpoint-every`
//! inputs, and exits once it has processed `EXPECTED` distinct inputs and written a last
//! checkpoint, printing a one-line summary.
//!
//! ```text
//! kafka-service BOOTSTRAP INPUT_TOPIC kafka://HOST:PORT/STATE_TOPIC LEDGER EXPECTED
//! ```
#![forbid(unsafe_code)]

use actionstate_core::{ActionId, Attributes, Event, Trigger, Value};
use actionstate_examples::{Entry, Input, Ledger, Positions};
use actionstate_recovery::{
    ActionStateStore, AnyLog, Begin, CallOutput, CallSource, DurableCall, LogConfig, Ownership, RestoreFrom, Restored,
    StoreConfig, open,
};
use clap::Parser;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::cell::Cell;
use std::error::Error;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// The command line.
#[derive(Debug, Parser)]
#[command(about = "A Kafka service that restores its input position and action state from one checkpoint")]
struct Args {
    /// `bootstrap.servers` of the cluster holding the input topic.
    bootstrap: String,
    /// The input topic: records keyed by business key, valued `"SEQ TEXT"`.
    input_topic: String,
    /// The state log, `kafka://HOST:PORT/TOPIC` (any log URL works).
    state_log: String,
    /// The ledger file the side effects and acknowledgements are appended to.
    ledger: PathBuf,
    /// Distinct inputs to process before exiting.
    expected: u64,
    /// Inputs between two checkpoints.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_every: u64,
    /// How long the side effect takes, in milliseconds: half before the ledger line is written
    /// (the request on its way), half after (the reply on its way back).
    #[arg(long, default_value_t = 0)]
    effect_ms: u64,
    /// Gives up when no input arrives for this many seconds.
    #[arg(long, default_value_t = 30)]
    idle_timeout_secs: u64,
}

/// What one run did.
#[derive(Debug, Default)]
struct Summary {
    /// Inputs processed before this run, as the restored checkpoint says.
    resumed_at: u64,
    /// Inputs processed in all, this run's included.
    inputs: u64,
    /// Inputs this run consumed (those after the restored checkpoint included).
    consumed: u64,
    /// Side effects made by the action itself.
    executed: u64,
    /// Effects found in the ledger by the reconciler (made before a crash).
    reconciled_found: u64,
    /// Effects the reconciler made, having found none (a crash before the effect).
    reconciled_made: u64,
    /// Actions whose effect a resumed journal already held (a crash before completing).
    journaled: u64,
    /// Actions reused: completed before a crash, after the restored checkpoint.
    reused: u64,
    /// Checkpoints written.
    checkpoints: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kafka-service: inputs {} (resumed at {}, consumed {}), effects made {}, reconciled {} \
             ({} found in the ledger, {} made), journaled {}, reused {}, checkpoints {}",
            self.inputs,
            self.resumed_at,
            self.consumed,
            self.executed,
            self.reconciled_found + self.reconciled_made,
            self.reconciled_found,
            self.reconciled_made,
            self.journaled,
            self.reused,
            self.checkpoints
        )
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kafka-service: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Restores, consumes from the restored positions, and answers each input until `expected`.
async fn run(args: &Args) -> Result<Summary> {
    let log = open(&args.state_log.parse::<LogConfig>()?).await?;
    // The latest checkpoint in the log (none on the first run) and the input position it saved.
    let (store, restored) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
    let mut positions = restored_positions(&restored)?;
    let consumer = consumer(args, &positions)?;
    let ledger = Ledger::new(&args.ledger);
    let effect = Duration::from_millis(args.effect_ms);
    let idle = Duration::from_secs(args.idle_timeout_secs);
    let mut summary = Summary { resumed_at: positions.inputs(), ..Summary::default() };
    println!("restored: {} checkpoint(s), resuming at input {}", restored.from.len(), positions.inputs());
    while positions.inputs() < args.expected {
        let message = tokio::time::timeout(idle, consumer.recv())
            .await
            .map_err(|_| format!("no input for {idle:?} after {} of {} inputs", positions.inputs(), args.expected))??;
        let (partition, offset) = (message.partition(), message.offset());
        let input = Input::from_record(partition, offset, message.key(), message.payload())?;
        answer(&store, &ledger, &input, effect, &mut summary).await?;
        summary.consumed += 1;
        // The position moves past an input only once its round is done (docs/design.md,
        // section 5.6): a checkpoint taken now resumes after it.
        positions.advance(partition, offset);
        if positions.inputs() % args.checkpoint_every == 0 {
            store.checkpoint(&positions.encode()?).await?;
            summary.checkpoints += 1;
        }
    }
    store.checkpoint(&positions.encode()?).await?;
    summary.checkpoints += 1;
    summary.inputs = positions.inputs();
    Ok(summary)
}

/// The positions the restored checkpoint saved, or the beginning on a fresh start.
fn restored_positions(restored: &Restored) -> Result<Positions> {
    match (restored.metadata(), restored.from.is_empty()) {
        (Some(metadata), _) => Ok(Positions::decode(metadata)?),
        (None, true) => Ok(Positions::default()),
        // Only after a rescale, which a service that owns every key never makes.
        (None, false) => Err(format!("{} checkpoints restored where one was expected", restored.from.len()).into()),
    }
}

/// A consumer of every partition of the input topic, assigned at the restored positions (a
/// partition without one from its beginning). It joins no consumer group and commits nothing:
/// the checkpoint is the only record of the input position.
fn consumer(args: &Args, positions: &Positions) -> Result<StreamConsumer> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        // librdkafka's consumer wants a group id even when it is only assigned partitions; it
        // never joins the group, and with both settings below it commits nothing to it.
        .set("group.id", "kafka-service")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // A restored offset the topic no longer holds is an error, never a silent jump.
        .set("auto.offset.reset", "error")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(&args.input_topic), Duration::from_secs(30))?;
    let topic = metadata
        .topics()
        .iter()
        .find(|t| t.name() == args.input_topic && t.error().is_none() && !t.partitions().is_empty())
        .ok_or_else(|| format!("no input topic {}", args.input_topic))?;
    let mut assignment = TopicPartitionList::new();
    for partition in topic.partitions() {
        let at = positions.next(partition.id()).map_or(Offset::Beginning, Offset::Offset);
        assignment.add_partition_offset(&args.input_topic, partition.id(), at)?;
    }
    consumer.assign(&assignment)?;
    Ok(consumer)
}

/// One input's round: its action is reused if it completed before a crash; otherwise it runs,
/// and its side effect goes through a durable call with a reconciler, so that it is made once
/// whatever the crash. Then the input is acknowledged in the ledger and its round finished.
async fn answer(
    store: &ActionStateStore<AnyLog>,
    ledger: &Ledger,
    input: &Input,
    effect: Duration,
    summary: &mut Summary,
) -> Result<()> {
    let event = input.event();
    let round = store.round(input.round(&event));
    match store.begin(&round, &ActionId::new("record-effect"), &event, &Trigger::Input).await? {
        Begin::Reuse(_state) => summary.reused += 1,
        Begin::Resume(mut handle) | Begin::Fresh(mut handle, _) => {
            let entry = Entry::effect(&input.key, input.seq);
            let made = Cell::new(false);
            // The input's fingerprint stands for the call's arguments: the effect is the input's.
            let call = DurableCall::new("ledger.effect")
                .args_digest(*round.input.as_bytes())
                .reconcile(|_| reconcile(ledger, &entry, effect, &made));
            let call = store.call(&mut handle, call, |_| make_effect(ledger, &entry, effect)).await?;
            match call.source {
                CallSource::Executed => summary.executed += 1,
                CallSource::Journal => summary.journaled += 1,
                CallSource::Reconciled if made.get() => summary.reconciled_made += 1,
                CallSource::Reconciled => summary.reconciled_found += 1,
            }
            if call.source == CallSource::Reconciled {
                let how = if made.get() { "not in the ledger, made it" } else { "found in the ledger" };
                println!("reconciled {entry}: {how}");
            }
            let line = call.output.map_err(|e| format!("{entry}: {}", String::from_utf8_lossy(&e)))?;
            let mut attributes = Attributes::new();
            attributes.insert("ledger".into(), Value::Bytes(line));
            store.complete(handle, vec![Event::new("effect", attributes)], vec![]).await?;
        }
    }
    ledger.append(&Entry::ack(&input.key, input.seq))?;
    round.finish();
    Ok(())
}

/// The side effect: `entry` appended to the ledger, taking `latency` in all.
async fn make_effect(ledger: &Ledger, entry: &Entry, latency: Duration) -> CallOutput {
    tokio::time::sleep(latency / 2).await;
    ledger.append(entry).map_err(|e| e.to_string().into_bytes())?;
    tokio::time::sleep(latency / 2).await;
    Ok(entry.to_string().into_bytes())
}

/// What happened to an effect whose journal slot a crash left pending: if the ledger holds it,
/// it happened; if not, the crash came before it, and it is made now (`made` says so).
async fn reconcile(ledger: &Ledger, entry: &Entry, latency: Duration, made: &Cell<bool>) -> CallOutput {
    if ledger.contains(entry).map_err(|e| e.to_string().into_bytes())? {
        return Ok(entry.to_string().into_bytes());
    }
    made.set(true);
    make_effect(ledger, entry, latency).await
}
