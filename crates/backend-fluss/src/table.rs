//! The log table: its columns and bucket key, and the checks open makes of an existing table.

use crate::config::FlussConfig;
use crate::error::FlussError;
use crate::retention;
use fluss::error::Error as ClientError;
use fluss::metadata::{DataType, DataTypes, Schema, TableInfo};

/// The columns of the log table, in order.
pub const COLUMNS: [&str; 3] = ["state_key", "payload", "key_id"];

/// The bucket-key column.
pub const BUCKET_KEY: &str = "key_id";

/// The table property that sets a table's replication factor ([`FlussConfig::replication`]).
pub(crate) const REPLICATION_PROPERTY: &str = "table.replication.factor";

/// The schema of the log table: [`COLUMNS`], each of bytes.
pub(crate) fn log_schema() -> Result<Schema, ClientError> {
    Schema::builder()
        .column(COLUMNS[0], DataTypes::bytes())
        .column(COLUMNS[1], DataTypes::bytes())
        .column(COLUMNS[2], DataTypes::bytes())
        .build()
}

/// Checks an existing table against the configuration and the log layout.
pub(crate) fn check_table(config: &FlussConfig, info: &TableInfo) -> Result<(), FlussError> {
    let table = config.table_name();
    let incompatible = |detail: String| FlussError::IncompatibleTable { table: table.clone(), detail };
    let columns: Vec<(&str, &DataType)> =
        info.get_row_type().fields().iter().map(|f| (f.name(), f.data_type())).collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
    if names != COLUMNS {
        return Err(incompatible(format!("columns {names:?}, expected {COLUMNS:?}")));
    }
    if let Some((name, ty)) = columns.iter().find(|(_, ty)| !matches!(ty, DataType::Bytes(_))) {
        return Err(incompatible(format!("column {name} has type {ty:?}, expected BYTES")));
    }
    if info.has_primary_key() {
        return Err(incompatible("it has a primary key (a log table has none)".into()));
    }
    if info.is_partitioned() {
        return Err(incompatible("it is partitioned".into()));
    }
    if info.get_bucket_keys() != [BUCKET_KEY] {
        return Err(incompatible(format!("bucket key {:?}, expected [\"{BUCKET_KEY}\"]", info.get_bucket_keys())));
    }
    match info.get_table_config().get_datalake_format() {
        Ok(None) => {}
        Ok(Some(format)) => {
            return Err(incompatible(format!("data-lake format {format:?} changes the bucket function")));
        }
        Err(e) => return Err(incompatible(format!("unreadable data-lake format: {e}"))),
    }
    let found = u32::try_from(info.get_num_buckets())
        .map_err(|_| FlussError::Unexpected(format!("bucket count {}", info.get_num_buckets())))?;
    if config.read_only {
        // Reads whatever the table keeps, with the buckets it has.
        return Ok(());
    }
    if found != config.buckets {
        return Err(FlussError::BucketsChanged { table, configured: config.buckets, found });
    }
    check_retention(config, info)
}

/// Refuses a table that deletes records by age sooner than the configuration accepts.
pub(crate) fn check_retention(config: &FlussConfig, info: &TableInfo) -> Result<(), FlussError> {
    let property = retention::LOG_TTL_PROPERTY;
    let value = info.get_properties().get(property).map(String::as_str);
    retention::check_log_ttl(value, config.log_ttl).map_err(|problem| FlussError::LogRetention {
        table: config.table_name(),
        property,
        value: value.map_or_else(|| "not set (Fluss's default: 7 d)".to_owned(), |v| format!("'{v}'")),
        problem,
    })
}

/// What a read-only open says about a table it reads as it is: one whose TTL deletes records
/// by age may already have lost records that a checkpoint needs (a marker below the earliest
/// offsets is then reported as data loss).
pub(crate) fn warn_read_only(config: &FlussConfig, info: &TableInfo) {
    let value = info.get_properties().get(retention::LOG_TTL_PROPERTY).map(String::as_str);
    let Err(problem) = retention::check_log_ttl(value, None) else { return };
    let shown = value.unwrap_or("not set (Fluss's default: 7 d)");
    match problem.table_ttl() {
        Some(ttl) => tracing::warn!(
            table = %config.table_name(),
            property = retention::LOG_TTL_PROPERTY,
            value = shown,
            "the table deletes records older than {ttl:?} by age: records a checkpoint needs may already be gone, \
             and the tools read what is left"
        ),
        None => tracing::warn!(
            table = %config.table_name(),
            property = retention::LOG_TTL_PROPERTY,
            value = shown,
            "reading the table without knowing whether it deletes records by age ({problem})"
        ),
    }
}

/// Refuses a database or table name the log does not use.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), FlussError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(FlussError::InvalidConfig(format!(
            "{what} name {name:?} must be non-empty ASCII letters, digits, `_` and `-`"
        )));
    }
    Ok(())
}
