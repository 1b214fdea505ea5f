//! Running the suite's futures without a runtime of its own: [`join_all`] polls many at once on
//! the caller's task, [`within`] bounds one by a deadline that a std thread keeps.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Polls every future until all are ready, on the caller's task, and returns their outputs in
/// order. They run concurrently (each await of one lets the others progress), not in parallel.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut all = true;
        for (future, out) in pending.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => all = false,
                }
            }
        }
        if all { Poll::Ready(done.iter_mut().filter_map(Option::take).collect()) } else { Poll::Pending }
    })
    .await
}

/// `future`'s output, or `None` once `limit` has passed without it. The deadline is kept by a
/// thread that sleeps and then wakes the task, so no timer of a runtime is needed.
pub async fn within<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    let expired = Arc::new(AtomicBool::new(false));
    let waker: Arc<Mutex<Option<Waker>>> = Arc::new(Mutex::new(None));
    {
        let (expired, waker) = (Arc::clone(&expired), Arc::clone(&waker));
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            expired.store(true, Ordering::SeqCst);
            if let Some(w) = waker.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
                w.wake();
            }
        });
    }
    let mut future = Box::pin(future);
    std::future::poll_fn(move |cx: &mut Context<'_>| {
        if let Poll::Ready(v) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        *waker.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(cx.waker().clone());
        if expired.load(Ordering::SeqCst) { Poll::Ready(None) } else { Poll::Pending }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn join_all_returns_every_output_in_order() {
        let futures: Vec<_> = (0..5u64)
            .map(|n| async move {
                tokio::time::sleep(Duration::from_millis(50 - n * 10)).await;
                n
            })
            .collect();
        assert_eq!(join_all(futures).await, vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn within_gives_up_on_a_future_that_never_ends() {
        assert_eq!(within(Duration::from_millis(50), std::future::pending::<()>()).await, None);
        assert_eq!(within(Duration::from_secs(5), async { 7 }).await, Some(7));
    }
}
