// Self-test of the sqllogictest runner: a scripted fake adapter, no engine.
// Each case checks that the runner passes what it should AND fails what it
// should, so the conformance suite cannot go green by accident.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { parseScript, runScript, formatValue, formatReal, realToText } from './sqllogictest.mjs';

// Adapter answering from a table: sql -> rows, or an Error to throw.
function fakeAdapter(answers = {}) {
  const executed = [];
  return {
    executed,
    async execute(sql) {
      executed.push(sql);
      if (answers[sql] instanceof Error) throw answers[sql];
    },
    async query(sql) {
      const a = answers[sql];
      if (a === undefined) throw new Error(`fake adapter: no answer for ${sql}`);
      if (a instanceof Error) throw a;
      return a;
    },
  };
}

const run = (script, answers, options) => runScript(script, fakeAdapter(answers), options);

test('parser: records, line numbers, comments, CRLF, conditions', () => {
  const script = [
    '# leading comment', // 1
    'statement ok', // 2
    'CREATE TABLE t(a)', // 3
    '', // 4
    'skipif mysql # trailing words are ignored', // 5
    'onlyif sqlite', // 6
    'query IT rowsort my-label', // 7
    'SELECT a,', // 8
    '# a comment inside a record is dropped', // 9
    '  b FROM t', // 10
    '----', // 11
    '1', // 12
    'x', // 13
    '   ', // 14: whitespace-only separates records
    'halt', // 15
  ].join('\r\n');
  const [s, q, h] = parseScript(script);
  assert.deepEqual(
    { kind: s.kind, line: s.line, sql: s.sql, expectError: s.expectError },
    { kind: 'statement', line: 2, sql: 'CREATE TABLE t(a)', expectError: false },
  );
  assert.equal(q.kind, 'query');
  assert.equal(q.line, 7);
  assert.equal(q.sql, 'SELECT a,\n  b FROM t');
  assert.deepEqual([q.types, q.sortMode, q.label], ['IT', 'rowsort', 'my-label']);
  assert.deepEqual(q.expected, ['1', 'x']);
  assert.deepEqual(
    q.conditions.map((c) => [c.op, c.engine]),
    [
      ['skipif', 'mysql'],
      ['onlyif', 'sqlite'],
    ],
  );
  assert.equal(h.kind, 'halt');
  assert.equal(h.line, 15);
});

test('parser: query defaults and malformed records', () => {
  const [q, bad1, bad2, bad3] = parseScript(
    'query I\nSELECT 1\n\nquery X nosort\nSELECT 1\n\nquery I sideways\nSELECT 1\n\nfrobnicate\n',
  );
  assert.equal(q.sortMode, 'nosort');
  assert.equal(q.label, null);
  assert.deepEqual(q.expected, []); // no "----": an empty result is expected
  assert.deepEqual([bad1.kind, bad2.kind, bad3.kind], ['invalid', 'invalid', 'invalid']);
});

test('value rendering: NULL, empty, control characters, I/T/R', () => {
  assert.equal(formatValue(null, 'I'), 'NULL');
  assert.equal(formatValue(null, 'T'), 'NULL');
  assert.equal(formatValue('', 'T'), '(empty)');
  assert.equal(formatValue('a\tb\x7f', 'T'), 'a@b@');
  assert.equal(formatValue('é', 'T'), '@@'); // per UTF-8 byte, as the reference does
  assert.equal(formatValue(Buffer.from('hi'), 'T'), 'hi');
  assert.equal(formatValue(42, 'T'), '42');
  assert.equal(formatValue(0.5, 'T'), '0.5');
  assert.equal(formatValue(12345678901234567890n, 'T'), '12345678901234567890');

  assert.equal(formatValue(-7, 'I'), '-7');
  assert.equal(formatValue(2.9, 'I'), '2'); // truncation toward zero
  assert.equal(formatValue(-2.9, 'I'), '-2');
  assert.equal(formatValue(9007199254740993n, 'I'), '9007199254740993');
  assert.equal(formatValue('12abc', 'I'), '12'); // SQLite's text-to-integer prefix rule
  assert.equal(formatValue('false', 'I'), '0');
  assert.equal(formatValue(1e300, 'I'), '9223372036854775807'); // saturates

  assert.equal(formatValue(1 / 3, 'R'), '0.333');
  assert.equal(formatValue(7, 'R'), '7.000');
  assert.equal(formatValue('2.5xyz', 'R'), '2.500');
  assert.equal(formatValue('abc', 'R'), '0.000');
  assert.throws(() => formatValue({}, 'T'), TypeError);
});

test('%.3f follows SQLite printf: ties up, at most 16 significant digits', () => {
  assert.equal(formatReal(0.0625), '0.063');
  assert.equal(formatReal(-0.0004), '-0.000');
  assert.equal(formatReal(-0), '0.000');
  assert.equal(formatReal(1234567890123.4567), '1234567890123.457');
  assert.equal(formatReal(12345678901234.567), '12345678901234.570');
  assert.equal(formatReal(-(2 ** 63)), '-9223372036854776000.000');
  assert.equal(formatReal(-18446744073709551616), '-18446744073709550000.000');
  assert.equal(formatReal(Infinity), 'Inf');
});

test('real to text follows SQLite %!.15g', () => {
  assert.equal(realToText(0.1 + 0.2), '0.3');
  assert.equal(realToText(100.25), '100.25');
  assert.equal(realToText(1e20), '1.0e+20');
  assert.equal(realToText(1.5e-7), '1.5e-07');
  assert.equal(realToText(-123456789012345.6), '-123456789012346.0');
});

test('statement ok / statement error', async () => {
  const boom = new Error('no such table');
  const ok = await run('statement ok\nA\n\nstatement error\nB\n', { A: [], B: boom });
  assert.deepEqual([ok.passed, ok.failed], [2, 0]);

  const bad = await run('statement ok\nB\n\nstatement error\nA\n', { A: [], B: boom });
  assert.equal(bad.failed, 2);
  assert.match(bad.failures[0].message, /no such table/);
  assert.equal(bad.failures[1].line, 4);
});

test('query comparison: values, order, count, column count, errors', async () => {
  const script = 'query IT nosort\nQ\n----\n1\na\n2\nb\n';
  assert.equal((await run(script, { Q: [[1, 'a'], [2, 'b']] })).passed, 1);
  for (const rows of [
    [[2, 'b'], [1, 'a']], // order matters for nosort
    [[1, 'a']], // missing row
    [[1, 'a'], [2, 'b'], [3, 'c']], // extra row (the reference would not notice)
    [[1, 'a'], [2, 'B']], // wrong value
    [[1, 'a', 0], [2, 'b', 0]], // wrong column count
    new Error('syntax error'),
  ]) {
    const r = await run(script, { Q: rows });
    assert.equal(r.failed, 1, `should fail for ${rows}`);
    assert.equal(r.failures[0].line, 1);
  }
  // Empty expectation: an empty result passes, any row fails.
  assert.equal((await run('query I nosort\nQ\n', { Q: [] })).passed, 1);
  assert.equal((await run('query I nosort\nQ\n----\n', { Q: [[1]] })).failed, 1);
});

test('rowsort and valuesort use strcmp order of rendered text', async () => {
  // "10" < "9" as text; rows stay together under rowsort.
  const rows = [[9, 'z'], [10, 'y'], [1, 'x']];
  const rowsort = await run('query IT rowsort\nQ\n----\n1\nx\n10\ny\n9\nz\n', { Q: rows });
  assert.equal(rowsort.failed, 0, rowsort.failures[0]?.message);
  const valuesort = await run('query IT valuesort\nQ\n----\n1\n10\n9\nx\ny\nz\n', { Q: rows });
  assert.equal(valuesort.failed, 0, valuesort.failures[0]?.message);
  // A prefix sorts first, column by column: ("a","z") before ("ab","a").
  const prefix = await run('query TT rowsort\nQ\n----\na\nz\nab\na\n', { Q: [['ab', 'a'], ['a', 'z']] });
  assert.equal(prefix.failed, 0, prefix.failures[0]?.message);
});

test('hashing: default threshold 8, hash-threshold records, MD5 of value+newline', async () => {
  const nine = Array.from({ length: 9 }, (_, i) => [i + 1]);
  const md5 = createHash('md5').update('1\n2\n3\n4\n5\n6\n7\n8\n9\n').digest('hex');
  const hashed = `query I nosort\nQ\n----\n9 values hashing to ${md5}\n`;
  assert.equal((await run(hashed, { Q: nine })).passed, 1);
  // Same values listed one per line do not match while hashing applies.
  const listed = 'query I nosort\nQ\n----\n1\n2\n3\n4\n5\n6\n7\n8\n9\n';
  assert.equal((await run(listed, { Q: nine })).failed, 1);
  assert.equal((await run(`hash-threshold 0\n\n${listed}`, { Q: nine })).passed, 1);
  assert.equal((await run(`hash-threshold 20\n\n${listed}`, { Q: nine })).passed, 1);
  // A different row changes the hash.
  const other = nine.map((r) => [...r]);
  other[4][0] = 50;
  assert.equal((await run(hashed, { Q: other })).failed, 1);
});

test('labels: equal results agree, different results fail', async () => {
  const script = 'query I rowsort L\nA\n----\n1\n2\n\nquery I rowsort L\nB\n----\n1\n2\n';
  assert.equal((await run(script, { A: [[2], [1]], B: [[1], [2]] })).passed, 2);
  // Both queries match their own listing, but disagree with each other.
  const bad = 'query I rowsort L\nA\n----\n1\n2\n\nquery I rowsort L\nB\n----\n1\n3\n';
  const r = await run(bad, { A: [[1], [2]], B: [[1], [3]] });
  assert.equal(r.failed, 1);
  assert.match(r.failures[0].message, /labeled result \[L\]/);
  // A skipped labeled query's recorded result is checked too.
  const skipped = 'query I rowsort L\nA\n----\n1\n2\n\nonlyif mysql\nquery I rowsort L\nB\n----\n1\n3\n';
  assert.equal((await run(skipped, { A: [[1], [2]] })).failed, 1);
});

test('skipif/onlyif select records for the engine; halt obeys them too', async () => {
  const script = [
    'skipif sqlite', // 1
    'query I nosort',
    'NOPE',
    '',
    'onlyif mysql', // 5
    'statement ok',
    'NOPE',
    '',
    'onlyif SQLite', // 9: engine names compare case-insensitively
    'query I nosort',
    'Q',
    '----',
    '1',
    '',
    'onlyif mssql', // 15
    'halt', // 16
    '',
    'statement ok', // 18
    'A',
    '',
    'halt', // 21
    '',
    'statement ok',
    'NOPE',
  ].join('\n');
  const r = await run(script, { Q: [[1]], A: [], NOPE: new Error('must not run') });
  assert.deepEqual([r.passed, r.failed, r.skipped, r.halted], [2, 0, 3, 21]);
  // For another engine, different records run, and its halt applies.
  const m = await run(script, { Q: [[1]], A: [], NOPE: [] }, { engine: 'mssql' });
  assert.equal(m.halted, 16);
});

test('known deviations are accepted only exactly as described', async () => {
  const script = 'query I nosort\nQ\n----\n';
  const knownDeviations = [{ line: 1, message: /integer overflow/, reason: 'test' }];
  const hit = await run(script, { Q: new Error('integer overflow') }, { knownDeviations });
  assert.deepEqual([hit.failed, hit.knownDeviations.length], [0, 1]);
  // Failing differently is a normal failure, and the stale entry is reported.
  const other = await run(script, { Q: new Error('disk I/O error') }, { knownDeviations });
  assert.equal(other.failed, 2);
  // Passing makes the entry stale: a failure.
  const passing = await run(script, { Q: [] }, { knownDeviations });
  assert.deepEqual([passing.passed, passing.failed], [1, 1]);
});
