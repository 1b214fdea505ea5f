//! How long the Fluss server keeps the log table's records, and which tables are safe to use.
//!
//! A Fluss log table deletes records by age: the table property [`LOG_TTL_PROPERTY`]
//! (`table.log.ttl`) is the time to live of its log segments, and a table created without it
//! gets Fluss's default, [`DEFAULT_LOG_TTL`] (7 days). The server removes a segment once its
//! newest record is older than the TTL, whatever a checkpoint still needs: a job stopped for
//! eight days, or an action pending that long, could not be restored. (The 0.9 server checks
//! segments it has rolled and copied to remote storage, every `remote.log.task-interval-duration`,
//! one minute by default; segments roll at `log.segment.file-size`, 1 GiB by default. Both are
//! settings of the tablet server, not of a table: the local cluster of `cargo xtask services up
//! fluss` sets 4 MiB and one second, so that its tests see a segment expire.)
//!
//! So the backend chooses the table's TTL itself ([`log_ttl_value`]): by default
//! [`NO_LOG_TTL`] (`0 ms`), which Fluss reads as "no deletion by age" (a TTL of zero or less
//! disables expiry; `-1`, which the 0.9 option description mentions, is not a duration the
//! server parses), or the bound the user accepted with
//! [`FlussConfig::log_ttl`](crate::FlussConfig::log_ttl) (`log_ttl=` in the log URL), in whole milliseconds (at most
//! `i64::MAX` ms, the largest TTL the server takes). An existing table is checked when it is
//! opened ([`check_log_ttl`]): one that deletes records by age sooner than the configuration
//! accepts is refused ([`FlussError::LogRetention`](crate::FlussError::LogRetention)).
//!
//! Other retention settings do not lose records: `table.log.tiered.local-segments` (default 2)
//! is how many segments per bucket the tablet server keeps on its own disk once older ones are
//! copied to the remote data directory, from which reads still fetch them (and Fluss 1.0's
//! `table.log.local-ttl` likewise only removes local copies of uploaded segments). Fluss offers
//! no operation that deletes a log table's records below an offset, so the backend cannot
//! reclaim: without a TTL the table holds its whole history.

use std::fmt;
use std::time::Duration;

/// The table property holding the time to live of the table's log segments.
pub const LOG_TTL_PROPERTY: &str = "table.log.ttl";

/// The value of [`LOG_TTL_PROPERTY`] meaning "never delete by age".
pub const NO_LOG_TTL: &str = "0 ms";

/// Fluss's TTL of a table without [`LOG_TTL_PROPERTY`]: 7 days.
pub const DEFAULT_LOG_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The longest TTL the server takes, in milliseconds (a Java `long`).
const MAX_TTL_MS: u128 = i64::MAX as u128;

/// The value of [`LOG_TTL_PROPERTY`] for a table that deletes by age only what the
/// configuration accepts: [`NO_LOG_TTL`] for `None`, else the bound in milliseconds, rounded
/// up so that the table never deletes sooner than accepted.
///
/// Fails for a bound of zero (use `None`: a TTL of zero means no deletion by age) or one
/// beyond `i64::MAX` milliseconds.
pub fn log_ttl_value(accepted: Option<Duration>) -> Result<String, String> {
    let Some(ttl) = accepted else { return Ok(NO_LOG_TTL.to_owned()) };
    if ttl.is_zero() {
        return Err("log_ttl of zero: use None for no deletion by age".to_owned());
    }
    let ms = ttl.as_nanos().div_ceil(1_000_000);
    if ms > MAX_TTL_MS {
        return Err(format!("log_ttl of {ttl:?} is beyond the largest TTL Fluss takes ({MAX_TTL_MS} ms)"));
    }
    Ok(format!("{ms} ms"))
}

/// Why a table's log retention is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetentionProblem {
    /// The table deletes records older than `ttl`, and the configuration accepts no deletion
    /// by age (`FlussConfig::log_ttl` is `None`).
    NotAccepted {
        /// The table's TTL.
        ttl: Duration,
    },
    /// The table deletes records older than `ttl`, sooner than the accepted bound.
    ShorterThanAccepted {
        /// The table's TTL.
        ttl: Duration,
        /// `FlussConfig::log_ttl`.
        accepted: Duration,
    },
    /// The property's value is not a duration the server would read.
    Unreadable {
        /// Why.
        detail: String,
    },
}

impl fmt::Display for RetentionProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetentionProblem::NotAccepted { ttl } => write!(
                f,
                "the server deletes records older than {}, which a checkpoint may still need, and \
                 the log URL accepts no deletion by age (it has no `log_ttl=`)",
                human(*ttl)
            ),
            RetentionProblem::ShorterThanAccepted { ttl, accepted } => write!(
                f,
                "the server deletes records older than {}, sooner than the log URL's `log_ttl={}` accepts",
                human(*ttl),
                actionstate_core::url::duration_text(*accepted)
            ),
            RetentionProblem::Unreadable { detail } => write!(f, "not a Fluss duration ({detail})"),
        }
    }
}

impl RetentionProblem {
    /// The table's TTL, when it could be read.
    pub fn table_ttl(&self) -> Option<Duration> {
        match self {
            RetentionProblem::NotAccepted { ttl } | RetentionProblem::ShorterThanAccepted { ttl, .. } => Some(*ttl),
            RetentionProblem::Unreadable { .. } => None,
        }
    }
}

/// A duration in the largest unit that divides it.
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, label) in [(86_400_000, "d"), (3_600_000, "h"), (60_000, "min"), (1_000, "s")] {
        if ms >= unit && ms.is_multiple_of(unit) {
            return format!("{} {label}", ms / unit);
        }
    }
    format!("{ms} ms")
}

/// Decides whether a table whose [`LOG_TTL_PROPERTY`] is `value` (`None`: not set, so
/// [`DEFAULT_LOG_TTL`]) may be used when the configuration accepts deletion by age after
/// `accepted` (`None`: no deletion by age).
///
/// A TTL the server reads as zero or less (`0 ms`, or a value below one millisecond) deletes
/// nothing by age and is always fine; a positive TTL is fine only when it is no shorter than
/// `accepted`.
pub fn check_log_ttl(value: Option<&str>, accepted: Option<Duration>) -> Result<(), RetentionProblem> {
    let ttl = match value {
        None => DEFAULT_LOG_TTL,
        Some(v) => parse_duration(v).map_err(|detail| RetentionProblem::Unreadable { detail })?,
    };
    // The server takes the TTL in whole milliseconds (`Duration.toMillis`, truncating) and
    // expires nothing when it is not positive.
    let ttl_ms = ttl.as_millis();
    if ttl_ms == 0 {
        return Ok(());
    }
    let ttl = Duration::from_millis(u64::try_from(ttl_ms).unwrap_or(u64::MAX));
    match accepted {
        None => Err(RetentionProblem::NotAccepted { ttl }),
        Some(accepted) if ttl_ms < accepted.as_nanos().div_ceil(1_000_000) => {
            Err(RetentionProblem::ShorterThanAccepted { ttl, accepted })
        }
        Some(_) => Ok(()),
    }
}

/// Parses a duration as the Fluss server does (`TimeUtils.parseDuration`): a non-negative
/// integer, optional whitespace and a unit (`d`, `h`, `min`/`m`, `s`, `ms`, `µs`, `ns` and
/// their long forms, any case). A number without a unit is an error, as on the server.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = trimmed.split_at(digits);
    if number.is_empty() {
        return Err(format!("{text:?} does not start with a number"));
    }
    let value: u128 = number.parse().map_err(|_| format!("{number:?} is out of range"))?;
    let unit = unit.trim().to_lowercase();
    let nanos_per: u128 = match unit.as_str() {
        "d" | "day" | "days" => 86_400_000_000_000,
        "h" | "hour" | "hours" => 3_600_000_000_000,
        "min" | "m" | "minute" | "minutes" => 60_000_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1_000_000,
        "µs" | "micro" | "micros" | "microsecond" | "microseconds" => 1_000,
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => 1,
        "" => return Err(format!("{text:?} has no time unit")),
        other => return Err(format!("{other:?} is not a time unit")),
    };
    let nanos = value.checked_mul(nanos_per).filter(|n| n / 1_000_000 <= MAX_TTL_MS);
    let nanos = nanos.ok_or_else(|| format!("{text:?} is beyond the largest TTL ({MAX_TTL_MS} ms)"))?;
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| format!("{text:?} is out of range"))?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn fluss_durations_parse_as_the_server_reads_them() {
        for (text, expected) in [
            ("0 ms", Duration::ZERO),
            ("0ms", Duration::ZERO),
            ("7 d", DEFAULT_LOG_TTL),
            ("168h", DEFAULT_LOG_TTL),
            ("604800000 ms", DEFAULT_LOG_TTL),
            (" 90 MIN ", Duration::from_secs(5400)),
            ("2 m", Duration::from_secs(120)),
            ("3 seconds", Duration::from_secs(3)),
            ("1500 micros", Duration::from_micros(1500)),
            ("5 ns", Duration::from_nanos(5)),
            ("9223372036854775807 ms", Duration::from_millis(i64::MAX as u64)),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
        for text in
            ["", "-1", "-1 ms", "1000", "PT1H", "7 years", "ms", "9223372036854775808 ms", "99999999999999999 d"]
        {
            assert!(parse_duration(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn created_tables_get_no_ttl_or_the_accepted_bound() {
        assert_eq!(log_ttl_value(None).unwrap(), NO_LOG_TTL);
        assert_eq!(log_ttl_value(Some(DEFAULT_LOG_TTL)).unwrap(), "604800000 ms");
        // Rounded up: the table never deletes sooner than accepted.
        assert_eq!(log_ttl_value(Some(Duration::from_micros(1500))).unwrap(), "2 ms");
        assert_eq!(log_ttl_value(Some(Duration::from_millis(i64::MAX as u64))).unwrap(), "9223372036854775807 ms");
        assert!(log_ttl_value(Some(Duration::ZERO)).is_err());
        assert!(log_ttl_value(Some(Duration::MAX)).is_err());
        // What the backend writes, it accepts again.
        for accepted in [None, Some(HOUR), Some(Duration::from_micros(1500)), Some(DEFAULT_LOG_TTL)] {
            let value = log_ttl_value(accepted).unwrap();
            assert_eq!(check_log_ttl(Some(&value), accepted), Ok(()), "{value} with {accepted:?}");
        }
    }

    #[test]
    fn a_ttl_deleting_sooner_than_accepted_is_refused() {
        // Not set: Fluss's 7-day default deletes by age.
        assert_eq!(check_log_ttl(None, None), Err(RetentionProblem::NotAccepted { ttl: DEFAULT_LOG_TTL }));
        assert_eq!(check_log_ttl(None, Some(DEFAULT_LOG_TTL)), Ok(()));
        assert_eq!(check_log_ttl(None, Some(HOUR)), Ok(()));
        assert_eq!(
            check_log_ttl(None, Some(8 * 24 * HOUR)),
            Err(RetentionProblem::ShorterThanAccepted { ttl: DEFAULT_LOG_TTL, accepted: 8 * 24 * HOUR })
        );
        // No deletion by age: fine whatever is accepted.
        for value in ["0 ms", "0 d", "999 µs", "999999 ns"] {
            assert_eq!(check_log_ttl(Some(value), None), Ok(()), "{value}");
            assert_eq!(check_log_ttl(Some(value), Some(HOUR)), Ok(()), "{value}");
        }
        assert_eq!(
            check_log_ttl(Some("1 ms"), None),
            Err(RetentionProblem::NotAccepted { ttl: Duration::from_millis(1) })
        );
        assert_eq!(check_log_ttl(Some("1 h"), Some(HOUR)), Ok(()));
        assert_eq!(check_log_ttl(Some("2 h"), Some(HOUR)), Ok(()));
        assert_eq!(
            check_log_ttl(Some("3599999 ms"), Some(HOUR)),
            Err(RetentionProblem::ShorterThanAccepted { ttl: Duration::from_millis(3_599_999), accepted: HOUR })
        );
        // The server truncates to milliseconds: 1.9 ms is 1 ms, shorter than 1.5 ms accepted.
        assert_eq!(
            check_log_ttl(Some("1900 µs"), Some(Duration::from_micros(1500))),
            Err(RetentionProblem::ShorterThanAccepted {
                ttl: Duration::from_millis(1),
                accepted: Duration::from_micros(1500)
            })
        );
        assert!(matches!(check_log_ttl(Some("-1"), None), Err(RetentionProblem::Unreadable { .. })));
        assert!(matches!(check_log_ttl(Some("forever"), Some(HOUR)), Err(RetentionProblem::Unreadable { .. })));
    }

    #[test]
    fn problems_name_the_durations() {
        let text = RetentionProblem::NotAccepted { ttl: DEFAULT_LOG_TTL }.to_string();
        assert!(text.contains("older than 7 d") && text.contains("no `log_ttl=`"), "{text}");
        let text = RetentionProblem::ShorterThanAccepted { ttl: HOUR, accepted: 2 * HOUR }.to_string();
        assert!(text.contains("older than 1 h") && text.contains("`log_ttl=2h`"), "{text}");
        assert!(!text.contains("FlussConfig"), "{text}");
        assert_eq!(human(Duration::from_millis(1500)), "1500 ms");
        assert_eq!(human(Duration::from_secs(90)), "90 s");
    }
}
