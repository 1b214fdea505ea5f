//! The parts of the `actionstate` command line that the benchmark crate (`actionstate-bench`,
//! not shipped) shares with it, so that both measure the store the same way and keep to the
//! same claim rules:
//!
//! - [`claim`]: claiming an empty log, or an empty directory for scratch files, before writing;
//! - [`hint`]: what an operator should do about a log that could not be opened;
//! - [`measure`]: the benchmark's records and the store-side measurements (a put, a load, a
//!   read of every partition);
//! - [`keep_freed_memory`]: the allocator setting both programs run with;
//! - [`write_line`]: a line to standard output that ends the program quietly on a closed pipe.
//!
//! Errors are `anyhow` errors: every one of them ends up printed to an operator as text.

pub mod claim;
pub mod hint;
pub mod measure;

/// `mi_option_purge_delay` of `mimalloc.h` (the same number in mimalloc 2.1 and 3); the Rust
/// bindings do not name it. `purge_delay_is_option_15` checks it against mimalloc's default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory stays with the process before mimalloc returns it to the operating
/// system: ten seconds, jemalloc's default decay, instead of mimalloc's one second. A rebuild
/// that follows the drop of an earlier index (a restore in the same process, a change of
/// ownership, the rounds of `actionstate bench`) then reuses those pages. Pages the process
/// gets back from the kernel must be zeroed first, and on virtual machines whose host takes
/// returned memory back that was most of a rebuild's time (docs/benchmarks-history.md,
/// "Freed memory kept ten seconds").
/// `MIMALLOC_PURGE_DELAY` in the environment still decides when it is set.
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// Sets mimalloc's purge delay to ten seconds (`PURGE_DELAY_MS`) unless `MIMALLOC_PURGE_DELAY`
/// is set. A program MUST call it first thing in `main`, and SHOULD use mimalloc as its global
/// allocator (it sets an option of mimalloc, which no other allocator reads).
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an integer option in mimalloc's option table; any value is valid, and
        // mimalloc reads it the next time it considers purging.
        #[allow(unsafe_code, reason = "the only way to set a mimalloc option from the program")]
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
}

/// Writes a line to standard output (both programs' `outln!`); a closed pipe
/// (`actionstate inspect | head`) ends the program quietly instead of panicking, and any other
/// write error ends it with status 1.
pub fn write_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purge_delay() -> std::ffi::c_long {
        // SAFETY: reads an integer option.
        #[allow(unsafe_code, reason = "reading the option the program sets")]
        unsafe {
            libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY)
        }
    }

    /// Option 15 is the purge delay: before the program sets it, it holds mimalloc 3's default
    /// purge delay (1000 ms, which no other option of mimalloc 3 defaults to) or the value of
    /// `MIMALLOC_PURGE_DELAY`; afterwards it holds ours.
    #[test]
    fn purge_delay_is_option_15() {
        let from_env = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse::<std::ffi::c_long>().ok());
        assert_eq!(purge_delay(), from_env.unwrap_or(1000));
        keep_freed_memory();
        assert_eq!(purge_delay(), from_env.unwrap_or(PURGE_DELAY_MS));
    }
}
