//! quietsqlite-core: SQLite on native threads, with no Node.js dependency.
//!
//! A [`Database`] owns one writer thread (the read-write connection that runs every write), N
//! reader threads (one read-only connection each, WAL) and, from its first checkpoint on, a
//! checkpoint thread (checkpointer.rs). Requests are queued and return at once;
//! outcomes arrive through a [`CompletionSink`] as owned buffers that a front end turns into
//! its own values. Live queries ([`live`]) re-run only when a committed write touches what
//! they read.

// Links quietsqlite's SQLite (the crate has no Rust API; naming it is what links it).
use quietsqlite_sqlite as _;

pub mod backup;
pub mod batch_parts;
pub mod bind;
pub mod buffer_pool;
mod checkpointer;
pub mod cancel;
pub mod completion;
pub mod connection;
pub mod database;
pub mod deps;
pub mod diagnostics;
pub mod encode;
pub mod error;
pub mod extensions;
pub mod functions;
pub mod hooks;
pub mod inline;
pub mod iterate;
pub mod json;
pub mod live;
pub mod query;
mod quiet_panic;
mod raw_statement;
pub mod read_connection;
pub mod reader;
mod long_reads;
mod reader_queues;
pub mod scratch_files;
pub mod spin;
pub mod statement_rules;
pub mod statements;
mod turns;
pub mod value;
pub mod writer;

pub use backup::{BackupJob, BackupTarget};
pub use cancel::CancelOutcome;
pub use completion::{Completion, CompletionSink, Output, RequestId};
pub use connection::{Cipher, Key, OpenOptions};
pub use database::{Abandoner, Database};
pub use diagnostics::Diagnostics;
pub use error::{Error, Result};
pub use inline::{Inline, InlineReader};
pub use iterate::IterateJob;
pub use query::{BatchSets, ExecOutcome, ReadFormat, ReadOutput};
pub use reader::ReadJob;
pub use statements::{Description, SqlText, Statements};
pub use value::{integer_of, unpack_params, PackedSets, Params, Positional, Value, MAX_PARAMETERS, MAX_VALUE_BYTES};
pub use writer::{ChangeListener, TxId, TxMode, WriteJob, WriteKind};
