//! Runs database engine calls so that a panic inside the engine becomes a value.
//!
//! redb trusts the pages it reads: a file damaged on disk can make it panic (`entered
//! unreachable code`, an index out of bounds) instead of returning an error. Every engine call
//! of this crate runs through [`engine`], which catches such a panic and returns its message, so
//! the caller can report the file as corrupt.
//!
//! The process's panic hook would still print the caught panic to stderr, as if the program
//! had crashed. [`engine`] therefore installs, once, a hook that stays silent for a panic raised
//! inside an engine call on the same thread, and hands every other panic to the hook that was
//! installed before it.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`engine`].
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    /// Where the last silenced panic of this thread was raised.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if INSIDE.with(Cell::get) {
                let location = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
                LOCATION.with(|slot| *slot.borrow_mut() = location);
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, returning `Err(description)` if it panicked. The description says what the
/// engine reported and where, in words meant for an error message.
pub(crate) fn engine<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let outer = INSIDE.with(|inside| inside.replace(true));
    // Unwind safety: after a panic the caller stops using the engine handle (it is marked
    // broken), so no state the panic interrupted is observed again.
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    INSIDE.with(|inside| inside.set(outer));
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        match LOCATION.with(|slot| slot.borrow_mut().take()) {
            Some(at) => format!("the database engine failed on an inconsistent page: {message} (at {at})"),
            None => format!("the database engine failed on an inconsistent page: {message}"),
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    #[test]
    fn a_panic_becomes_its_message() {
        let err = super::engine(|| -> u32 { panic!("bad page") }).unwrap_err();
        assert!(err.contains("bad page"), "{err}");
        assert!(err.contains("guard.rs"), "{err}");
        assert_eq!(super::engine(|| 7), Ok(7));
    }
}
