//! quietsqlite's SQLite library. The crate has no Rust API: its build script compiles the
//! amalgamation (see `build.rs`) and links it into whatever depends on this crate, while
//! `libsqlite3-sys` (through rusqlite's `in_gecko` feature) supplies only the bindings.
//! A dependent must name the crate (`use quietsqlite_sqlite as _;`) so that it is linked.
#![no_std]
