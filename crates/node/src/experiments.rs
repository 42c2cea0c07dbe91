//! Experiment support, not used by the library: candidate 1 of
//! docs/experiments/001-result-path.md (rows built with Node-API calls on the JS thread),
//! kept so `bench/experiments/result-path.mjs` can reproduce the comparison.

use crate::values::{number, ok, set, string, NapiResult};
use napi::sys;
use std::ffi::c_void;
use std::ptr;

/// Builds the row objects with Node-API calls straight from the encoded buffer.
/// Malformed input panics on a slice bound (the exported method catches it); it never reads
/// outside `bytes`.
pub unsafe fn rows_from_encoding(env: sys::napi_env, bytes: &[u8]) -> NapiResult<sys::napi_value> {
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
    let (rows, cols, names_len) = (u32_at(1) as usize, u32_at(2) as usize, u32_at(4) as usize);
    let (row_chunks, cell_chunks, bigs) = (u32_at(5) as usize, u32_at(6) as usize, u32_at(7) as usize);
    let cells = rows * cols;
    let nums_at = quietsqlite_core::encode::HEADER_BYTES;
    let chunks_at = nums_at + cells * 8 + bigs * 8;
    let f64_at = |at: usize| f64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    // Chunks tile the text section: its length is the largest chunk end.
    let row_chunk = |k: usize| (f64_at(chunks_at + k * 24) as usize, f64_at(chunks_at + k * 24 + 16) as usize);
    let cell_end = |k: usize| f64_at(chunks_at + row_chunks * 24 + k * 16 + 8) as usize;
    let mut text_len = 0;
    if row_chunks > 0 {
        text_len = row_chunk(row_chunks - 1).1;
    }
    if cell_chunks > 0 {
        text_len = text_len.max(cell_end(cell_chunks - 1));
    }
    let tags_at = chunks_at + row_chunks * 24 + cell_chunks * 16;
    let mut next_row_chunk = 0;
    let names_at = tags_at + cells;
    let text_at = names_at + names_len;
    let blob_at = text_at + text_len;
    let names: Vec<std::ffi::CString> = bytes[names_at..names_at + names_len]
        .split(|&b| b == 0)
        .take(cols)
        .map(|n| std::ffi::CString::new(n).unwrap())
        .collect();
    let text = &bytes[text_at..blob_at];
    let mut out = ptr::null_mut();
    ok(sys::napi_create_array_with_length(env, rows, &mut out))?;
    let (mut tp, mut bp) = (0usize, 0usize);
    // Byte offsets: the encoding stores UTF-16 ends, so re-measure each UTF-8 cell.
    let mut text_bytes = 0usize;
    for r in 0..rows {
        if next_row_chunk < row_chunks && row_chunk(next_row_chunk).0 == r {
            tp = 0; // offsets restart in each text chunk
            next_row_chunk += 1;
        }
        let mut obj = ptr::null_mut();
        ok(sys::napi_create_object(env, &mut obj))?;
        for c in 0..cols {
            let i = r * cols + c;
            let num = f64::from_le_bytes(bytes[nums_at + i * 8..nums_at + i * 8 + 8].try_into().unwrap());
            let tag = bytes[tags_at + i];
            let v = match tag {
                1 | 5 => number(env, num)?,
                2 | 6 => {
                    if tag == 6 {
                        tp = 0; // offsets restart in each text chunk
                    }
                    let units = num as usize - tp;
                    tp = num as usize;
                    let start = text_bytes;
                    // SAFETY: the encoding's text section is UTF-8 written by the core, and
                    // `start` is a character boundary (advanced by whole characters).
                    let s = std::str::from_utf8_unchecked(&text[start..]);
                    let mut seen = 0;
                    let mut end = start;
                    for ch in s.chars() {
                        if seen == units {
                            break;
                        }
                        seen += ch.len_utf16();
                        end += ch.len_utf8();
                    }
                    text_bytes = end;
                    // SAFETY: `start..end` spans whole characters of that UTF-8 text.
                    string(env, std::str::from_utf8_unchecked(&text[start..end]))?
                }
                3 => {
                    let end = num as usize;
                    let mut data = ptr::null_mut();
                    let mut b = ptr::null_mut();
                    let slice = &bytes[blob_at + bp..blob_at + end];
                    ok(sys::napi_create_buffer_copy(env, slice.len(), slice.as_ptr() as *const c_void, &mut data, &mut b))?;
                    bp = end;
                    b
                }
                _ => {
                    let mut n = ptr::null_mut();
                    ok(sys::napi_get_null(env, &mut n))?;
                    n
                }
            };
            ok(sys::napi_set_named_property(env, obj, names[c].as_ptr(), v))?;
        }
        set(env, out, r as u32, obj)?;
    }
    Ok(out)
}
