//! The parts of the `actionstate` command line that the benchmark crate (`actionstate-bench`,
//! not shipped) shares with it, so that both measure the store the same way and keep to the
//! same claim rules:
//!
//! - [`claim`]: claiming an empty log, or an empty directory for scratch files, before writing;
//! - [`hint`]: what an operator should do about a log that could not be opened;
//! - [`measure`]: the benchmark's records and the store-side measurements (a put, a load, a
//!   read of every partition);
//! - [`tune_allocator`]: the allocator settings both programs run with;
//! - [`write_line`]: a line to standard output that ends the program quietly on a closed pipe.
//!
//! Errors are `anyhow` errors: every one of them ends up printed to an operator as text.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod claim;
pub mod hint;
pub mod measure;

/// `mi_option_purge_delay` and `mi_option_allow_thp` of mimalloc 3's `mimalloc.h`; the Rust
/// bindings name neither. `options_are_15_and_43` checks them against mimalloc's defaults.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// How long freed memory stays with the process before mimalloc returns it to the operating
/// system: ten seconds, jemalloc's default decay, instead of mimalloc's one second. A rebuild
/// that follows the drop of an earlier index (a restore in the same process, a change of
/// ownership, the rounds of `actionstate bench`) then reuses those pages. Pages the process
/// gets back from the kernel must be zeroed first, and on virtual machines whose host takes
/// returned memory back that was most of a rebuild's time (docs/benchmarks-history.md,
/// "Freed memory kept ten seconds").
const PURGE_DELAY_MS: std::ffi::c_long = 10_000;

/// Sets the allocator up for a process that holds a store, unless the environment decides
/// (`MIMALLOC_PURGE_DELAY`, `MIMALLOC_ALLOW_THP`):
///
/// - mimalloc keeps freed memory ten seconds (`PURGE_DELAY_MS`);
/// - no transparent huge pages, for the whole process (`PR_SET_THP_DISABLE` on Linux, which
///   is what mimalloc does itself when `MIMALLOC_ALLOW_THP=0` is set at start; its option
///   alone comes too late, after its first arena was mapped). mimalloc 3 asks the kernel for
///   huge pages on its arenas, and a huge page is resident whole once one of its bytes is
///   used: a process with a few dozen threads (librdkafka's among them) that held 18 MB of
///   live heap was 80–110 MB resident, and restoring three stores added 20–25 MB of it at
///   once, memory the stores never used (BENCHMARKS.md, "Bounded history on Kafka"). With
///   4 KiB pages the resident size follows the live heap (45–55 MB in the same run), and the
///   rebuild benchmark's ratio did not fall.
///
/// A program MUST call it first thing in `main`, and SHOULD use mimalloc as its global
/// allocator (the purge delay is an option of mimalloc, which no other allocator reads).
pub fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        set_option(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        set_option(MI_OPTION_ALLOW_THP, 0);
        #[cfg(target_os = "linux")]
        // SAFETY: `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)` sets a flag of the calling process
        // and touches no memory; it fails (ignored: huge pages then stay as they were) only
        // on kernels without it.
        #[allow(unsafe_code, reason = "the only way to turn off transparent huge pages for the process")]
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

fn set_option(option: libmimalloc_sys::mi_option_t, value: std::ffi::c_long) {
    // SAFETY: sets an integer option in mimalloc's option table; any value is valid, and
    // mimalloc reads it the next time it needs it.
    #[allow(unsafe_code, reason = "the only way to set a mimalloc option from the program")]
    unsafe {
        libmimalloc_sys::mi_option_set(option, value);
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

    fn option(option: libmimalloc_sys::mi_option_t) -> std::ffi::c_long {
        // SAFETY: reads an integer option.
        #[allow(unsafe_code, reason = "reading the options the program sets")]
        unsafe {
            libmimalloc_sys::mi_option_get(option)
        }
    }

    fn from_env(var: &str) -> Option<std::ffi::c_long> {
        std::env::var(var).ok().and_then(|v| v.parse::<std::ffi::c_long>().ok())
    }

    /// Option 15 is the purge delay and option 43 whether transparent huge pages are allowed:
    /// before the program sets them they hold mimalloc 3's defaults (1000 ms, which no other
    /// option of mimalloc 3 defaults to, and 1 on Linux) or the environment's values;
    /// afterwards they hold ours. One test, because the options are the process's.
    #[test]
    fn options_are_15_and_43() {
        let delay = from_env("MIMALLOC_PURGE_DELAY");
        let thp = from_env("MIMALLOC_ALLOW_THP");
        assert_eq!(option(MI_OPTION_PURGE_DELAY), delay.unwrap_or(1000));
        if cfg!(target_os = "linux") {
            assert_eq!(option(MI_OPTION_ALLOW_THP), thp.unwrap_or(1));
        }
        tune_allocator();
        assert_eq!(option(MI_OPTION_PURGE_DELAY), delay.unwrap_or(PURGE_DELAY_MS));
        assert_eq!(option(MI_OPTION_ALLOW_THP), thp.unwrap_or(0));
        #[cfg(target_os = "linux")]
        if thp.is_none() {
            // SAFETY: reads a flag of the process.
            #[allow(unsafe_code, reason = "reading the flag the program sets")]
            let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
            assert_eq!(disabled, 1, "transparent huge pages are still allowed for the process");
        }
    }
}
