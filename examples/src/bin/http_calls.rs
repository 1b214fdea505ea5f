use actionstate_core::{ActionId, Attributes, Event, IdempotencyKey, Trigger, Value};
use actionstate_recovery::{
    ActionStateStore, Begin, CallOutput, DurableCall, LogConfig, Ownership, RestoreFrom, Round, StoreConfig, open,
};
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode, body::Bytes};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let api = std::env::var("PAYMENTS_API").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let crash_after = std::env::var("CRASH_AFTER").unwrap_or_default(); // to show a crash
    let (api, crash_after) = (api.as_str(), crash_after.as_str());
    let log = open(&"file:./actionstate-data".parse::<LogConfig>()?).await?;
    let (store, _) =
        ActionStateStore::restore(log, StoreConfig::default(), &Ownership::All, RestoreFrom::Latest).await?;

    let mut attributes = Attributes::new();
    attributes.insert("amount".into(), Value::Int(4200));
    let order = Event::new("order", attributes);
    let round = Round::named("order-42", 0, &order);
    let mut handle = match store.begin(&round, &ActionId::new("checkout"), &order, &Trigger::Input).await? {
        Begin::Reuse(_) => {
            println!("checkout: reused");
            return Ok(());
        }
        Begin::Resume(handle) | Begin::Fresh(handle, _) => handle,
    };
    // A service that deduplicates: it gets the key as its `Idempotency-Key` header, so the
    // charge a crash made run again takes effect once. The request body is the arguments.
    let charge = DurableCall::new("payments.charge").args_bytes(b"4200");
    let charge = store
        .call(&mut handle, charge, |key| async move {
            let charged = send(api, Request::post("/v1/calls/payments.charge"), Some(&key), b"4200").await;
            stop_if(crash_after, "charge");
            charged
        })
        .await?;
    // A service that cannot deduplicate but can be asked about a key: the PENDING slot holds
    // the key, and after a crash the reconciler asks whether that request was applied.
    let receipt = DurableCall::new("mail.receipt").args_bytes(b"order-42").reconcile(|key| async move {
        match send(api, Request::get(format!("/v1/records/{key}")), None, b"").await {
            Err(status) if status == b"404" => {
                send(api, Request::post("/v1/records/mail.receipt"), Some(&key), b"order-42").await
            }
            applied => applied,
        }
    });
    let receipt = store
        .call(&mut handle, receipt, |key| async move {
            let sent = send(api, Request::post("/v1/records/mail.receipt"), Some(&key), b"order-42").await;
            stop_if(crash_after, "receipt");
            sent
        })
        .await?;
    println!("charge: {:?}, receipt: {:?}", charge.source, receipt.source);
    store.complete(handle, vec![], vec![]).await?;
    Ok(())
}

/// One HTTP/1.1 request to `api` (HOST:PORT); a status other than 200 is an `Err` of its code.
async fn send(api: &str, req: hyper::http::request::Builder, key: Option<&IdempotencyKey>, body: &[u8]) -> CallOutput {
    let req = match key {
        Some(key) => req.header("Idempotency-Key", key.as_str()),
        None => req,
    };
    let req = req.header("Host", api).body(Full::new(Bytes::copy_from_slice(body))).map_err(|e| e.to_string())?;
    let stream = tokio::net::TcpStream::connect(api).await.map_err(|e| e.to_string())?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let response = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes().to_vec();
    if status == StatusCode::OK { Ok(body) } else { Err(status.as_str().as_bytes().to_vec()) }
}

/// Ends the process as a crash would, once call `what` took effect (`CRASH_AFTER=what`).
fn stop_if(crash_after: &str, what: &str) {
    if crash_after == what {
        std::process::exit(3);
    }
}
