//! The simulator's external HTTP service on its own, for agents written in another language
//! (the Python agent, `examples/python/agent.py`, and its test). It prints its URL, then, for
//! each line it reads on standard input, what it saw so far as one JSON line; it stops at the
//! end of its input.
//!
//! `POST /v1/calls/{function}` deduplicates by the `Idempotency-Key` header, and the report
//! counts `duplicates`: effects applied twice for one logical call (`X-Logical-Call`).

use actionstate_sim::external::ExternalService;
use std::io::BufRead;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = ExternalService::start().await?;
    println!("{}", service.url());
    let (lines, mut asked) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if line.is_err() || lines.send(()).is_err() {
                break;
            }
        }
    });
    while asked.recv().await.is_some() {
        println!("{}", serde_json::to_string(&service.report())?);
    }
    Ok(())
}
