use actionstate_core::{ActionId, Attributes, Event, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, Begin, CallSource, DurableCall, LogConfig, Ownership, RestoreFrom, Round, StoreConfig, open,
};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log = open(&"file:./actionstate-data".parse::<LogConfig>()?).await?;
    // The latest checkpoint in the log (none on the first run) and the input position it saved.
    let (store, restored) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
    let mut next: u64 = restored.metadata_as()?.unwrap_or(0);

    let questions = ["What is my balance?", "Close my account", "Thank you"];
    let (mut asked, mut reused) = (0, 0);
    while let Some(&question) = questions.get(next as usize) {
        let mut attributes = Attributes::new();
        attributes.insert("text".into(), Value::from(question));
        let input = Event::new("question", attributes);
        let round = store.round(Round::named("customer-42", next, &input));
        match store.begin(&round, &ActionId::new("answer"), &input, &Trigger::Input).await? {
            // Answered before the restart: replay its outputs, do not ask again.
            Begin::Reuse(_state) => reused += 1,
            Begin::Resume(mut handle) | Begin::Fresh(mut handle, _) => {
                // The model call goes here; its result is journaled before it is returned.
                let call = DurableCall::new("llm.complete").args(question)?;
                let reply = store
                    .call(&mut handle, call, |_idempotency_key| async move {
                        Ok(format!("an answer to {question}").into_bytes())
                    })
                    .await?;
                asked += usize::from(reply.source == CallSource::Executed);
                let mut answer = Attributes::new();
                answer.insert("reply".into(), Value::Bytes(reply.output.unwrap_or_default()));
                store.complete(handle, vec![Event::new("answer", answer)], vec![]).await?;
            }
        }
        // Every action of the round is done: a checkpoint from now on need not replay it.
        round.finish();
        next += 1;
        // Every second input, a checkpoint with the position to resume from.
        if next.is_multiple_of(2) {
            store.checkpoint_with(&next).await?;
        }
    }
    println!("model calls: {asked}, answers reused: {reused}");
    Ok(())
}
