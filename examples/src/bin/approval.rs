use actionstate_core::{ActionId, Attributes, Event, Trigger, WaitOutcome};
use actionstate_recovery::{
    ActionStateStore, Begin, DurableCall, LogConfig, Ownership, RestoreFrom, Round, StoreConfig, Wait, Waited, open,
};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let log = open(&"file:./actionstate-data".parse::<LogConfig>()?).await?;
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;
    let input = Event::new("invoice", Attributes::new());
    let round = store.round(Round::named("invoice-7", 0, &input));
    let mut handle = match store.begin(&round, &ActionId::new("pay"), &input, &Trigger::Input).await? {
        Begin::Reuse(_) => {
            println!("invoice-7: settled before");
            round.finish();
            return Ok(());
        }
        Begin::Resume(handle) | Begin::Fresh(handle, _) => handle,
    };
    let quote = DurableCall::new("quote").args("invoice-7")?;
    let quote = store.call(&mut handle, quote, |_key| async { Ok(b"120 EUR".to_vec()) }).await?;
    let amount = String::from_utf8(quote.output.unwrap_or_default())?;
    // Durable before it suspends: the token, start and deadline survive a crash.
    let approval = Wait::new("approval").args(&amount)?.timeout(Duration::from_secs(24 * 3600));
    let outcome = match store.wait(&mut handle, approval).await? {
        Waited::Done(outcome) => outcome,
        Waited::Suspended(token) => {
            // Hand the token to the approver: whoever holds it can approve the payment.
            std::fs::write("approval.token", token.to_text())?;
            round.suspend();
            println!("invoice-7: waiting for approval of {amount}");
            // A service goes on with its other inputs; this one waits until it is stopped.
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
        }
    };
    match outcome {
        WaitOutcome::Reply(approver) => {
            let charge = DurableCall::new("charge").args(&amount)?;
            store.call(&mut handle, charge, |_key| async { Ok(b"charged".to_vec()) }).await?;
            println!("invoice-7: paid {amount}, approved by {}", String::from_utf8_lossy(&approver));
        }
        other => println!("invoice-7: not paid ({})", other.name()),
    }
    store.complete(handle, vec![], vec![]).await?;
    round.finish();
    Ok(())
}
