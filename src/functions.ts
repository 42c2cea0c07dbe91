// User-defined functions: validation and the dispatcher every call goes through. The
// native side registers each function on every connection and, for each call, blocks the
// connection thread until the dispatcher (on this thread) answered (crates/node/src/functions.rs).

import type { AsyncResource } from 'node:async_hooks';
import { keepThrown } from './errors';
import { binding, type NativeDatabase } from './native';
import { checkKeys } from './options';
import type { IntMode, SqlValue } from './rows';
import { callbackScope } from './transaction';

/** What a user-defined function may return (docs/api.md, Values): `null`, `undefined` or
 * nothing for NULL, a boolean as 1 or 0, a Buffer, typed array or DataView as a BLOB of its
 * bytes. Not a Promise: functions are synchronous. */
export type FunctionResult = number | bigint | string | boolean | null | undefined | void | ArrayBufferView;

/** A scalar function: its arguments are SQL values (the Values table, per `intMode`), or
 * undefined past the last one given (`varargs`). Declared as a method so that its
 * parameters compare both ways: `(name: string, n?: number) => ...` is accepted, as the
 * caller knows what the SQL passes it. */
export type ScalarFunction = { call(...args: (SqlValue | undefined)[]): FunctionResult }['call'];

/** An aggregate's `step` or `inverse`: the accumulator, checked strictly (one that may be
 * `null` must be taken as such), then the row's arguments, typed as the caller declares
 * them (`any`: a method type would make the accumulator's check two-way as well). */
export type AggregateStep<A> = (accumulator: A, ...args: any[]) => A | void;

export interface FunctionOptions {
  /** Same arguments, same result: lets SQLite use it in indexes, generated columns and
   * CHECK constraints, and evaluate it once per statement where it can. Default false. */
  deterministic?: boolean | undefined;
  /** Takes any number of arguments; otherwise exactly as many as the function declares
   * (its `length`). Default false. */
  varargs?: boolean | undefined;
  /** Usable only in SQL written directly in a query, never from views, triggers or
   * schema (indexes, CHECK, generated columns). Default false. */
  directOnly?: boolean | undefined;
}

export interface AggregateOptions<A = unknown> extends FunctionOptions {
  /** The first accumulator of each group (a function is called for each group); default null. */
  start?: A | (() => A) | undefined;
  /** Takes the accumulator and one row's arguments; returns the next accumulator
   * (returning undefined keeps the accumulator). */
  step: AggregateStep<A>;
  /** The group's result from the final accumulator; default: the accumulator itself. */
  result?: ((accumulator: A) => FunctionResult) | undefined;
  /** Takes a row out of the accumulator again: makes the aggregate a window function. */
  inverse?: AggregateStep<A> | undefined;
}

const INT_MODES: Record<IntMode, number> = { auto: 0, number: 1, bigint: 2 };
const KIND_SCALAR = 0;
const KIND_AGGREGATE = 1;
const KIND_WINDOW = 2;
const FLAG_DETERMINISTIC = 1;
const FLAG_DIRECT_ONLY = 2;
const { FUNCTION_OP_SCALAR, FUNCTION_OP_STEP, FUNCTION_OP_INVERSE, FUNCTION_OP_VALUE, FUNCTION_OP_FINAL } = binding;

type AnyFunction = (...args: unknown[]) => unknown;

interface Definition {
  name: string;
  fn: AnyFunction | undefined;
  start: unknown;
  step: AnyFunction | undefined;
  result: AnyFunction | undefined;
  inverse: AnyFunction | undefined;
  /** The async context of the definition, which every call runs in (see callbackScope). */
  scope: AsyncResource;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return (
    v !== null &&
    (typeof v === 'object' || typeof v === 'function') &&
    typeof (v as { then?: unknown }).then === 'function'
  );
}

function isAsyncFunction(f: unknown): boolean {
  const name = (f as { constructor?: { name?: unknown } }).constructor?.name;
  return name === 'AsyncFunction' || name === 'AsyncGeneratorFunction';
}

function messageOf(err: unknown): string {
  // Anything may throw here (a Proxy, a `message` getter) or not be text: the message is
  // only for the native side's error, the thrown value itself is what the caller gets.
  try {
    if (err instanceof Error) {
      const m: unknown = err.message;
      return typeof m === 'string' ? m : String(m);
    }
    return String(err);
  } catch {
    return 'a user-defined function threw a value that has no text';
  }
}

function flagsOf(what: string, options: FunctionOptions | undefined, extra: readonly string[]): number {
  if (options === undefined) return 0;
  if (options === null || typeof options !== 'object') throw new TypeError(`${what} options must be an object`);
  checkKeys(what, options, ['deterministic', 'varargs', 'directOnly', ...extra]);
  let flags = 0;
  for (const key of ['deterministic', 'varargs', 'directOnly'] as const) {
    const v = options[key];
    if (v !== undefined && typeof v !== 'boolean') throw new TypeError(`${what}: option '${key}' must be a boolean`);
  }
  if (options.deterministic === true) flags |= FLAG_DETERMINISTIC;
  if (options.directOnly === true) flags |= FLAG_DIRECT_ONLY;
  return flags;
}

function checkName(what: string, name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) throw new TypeError(`${what} takes the function's name (a non-empty string)`);
  return name;
}

function checkBody(what: string, label: string, f: unknown, required: boolean): AnyFunction | undefined {
  if (f === undefined && !required) return undefined;
  if (typeof f !== 'function') throw new TypeError(`${what}: ${label} must be a function`);
  if (isAsyncFunction(f)) {
    throw new TypeError(`${what}: ${label} is an async function; user-defined functions must be synchronous`);
  }
  return f as AnyFunction;
}

/** The user-defined functions of one database. */
export class Functions {
  readonly #native: NativeDatabase;
  readonly #intMode: number;
  readonly #defs: Definition[] = [];
  /** Aggregate accumulators, by the native side's number for one group. */
  readonly #accumulators = new Map<number, unknown>();
  /** Groups whose step or inverse threw: their final call must not run `result`. */
  readonly #failed = new Set<number>();

  constructor(native: NativeDatabase, intMode: IntMode) {
    this.#native = native;
    this.#intMode = INT_MODES[intMode];
  }

  defineScalar(name: unknown, fn: unknown, options: FunctionOptions | undefined): void {
    const n = checkName('function()', name);
    const body = checkBody('function()', 'the function', fn, true)!;
    const flags = flagsOf('function()', options, []);
    const arity = options?.varargs === true ? -1 : body.length;
    this.#register(n, arity, KIND_SCALAR, flags, { name: n, fn: body, start: null, step: undefined, result: undefined, inverse: undefined, scope: callbackScope('quietsqlite.function') });
  }

  defineAggregate(name: unknown, options: AggregateOptions | undefined): void {
    const n = checkName('aggregate()', name);
    if (options === null || typeof options !== 'object') {
      throw new TypeError('aggregate() takes the name and an object { start, step, result, inverse }');
    }
    const flags = flagsOf('aggregate()', options, ['start', 'step', 'result', 'inverse']);
    const step = checkBody('aggregate()', 'step', options.step, true)!;
    const result = checkBody('aggregate()', 'result', options.result, false);
    const inverse = checkBody('aggregate()', 'inverse', options.inverse, false);
    if (typeof options.start === 'function' && isAsyncFunction(options.start)) {
      throw new TypeError('aggregate(): start is an async function; user-defined functions must be synchronous');
    }
    // The accumulator is step's first parameter; the rest are the SQL arguments.
    const arity = options.varargs === true ? -1 : Math.max(0, step.length - 1);
    const kind = inverse === undefined ? KIND_AGGREGATE : KIND_WINDOW;
    this.#register(n, arity, kind, flags, { name: n, fn: undefined, start: options.start ?? null, step, result, inverse, scope: callbackScope('quietsqlite.function') });
  }

  #register(name: string, arity: number, kind: number, flags: number, def: Definition): void {
    const id = this.#defs.length;
    this.#native.defineFunction(name, id, arity, kind, flags, this.#dispatch, this.#intMode);
    this.#defs.push(def);
  }

  // User callbacks are called with `this` undefined (as documented), never on the
  // definition object, which they could otherwise change.
  #start(def: Definition): unknown {
    return typeof def.start === 'function' ? Reflect.apply(def.start as AnyFunction, undefined, []) : def.start;
  }

  #accumulator(def: Definition, state: number): unknown {
    return this.#accumulators.has(state) ? this.#accumulators.get(state) : this.#start(def);
  }

  /** What the native side calls. It reaches this object through a WeakRef only: the
   * threadsafe function holds it strongly (a GC root), and a strong path from there to the
   * database (or to user functions that close over it) would keep an unclosed database, its
   * threads and its file locks alive forever. */
  readonly #dispatch = ((weak: WeakRef<Functions>) =>
    (op: number, id: number, state: number, args: unknown[]): unknown => {
      const self = weak.deref();
      if (self === undefined) throw new Error('the database of this function was garbage-collected');
      return self.#call(op, id, state, args);
    })(new WeakRef(this));

  /** Every call of every function: `(op, id, state, args)`. A failure throws the marker the
   * native side reads (`{ token, message }`); the error itself stays here under its token. */
  #call(op: number, id: number, state: number, args: unknown[]): unknown {
    const def = this.#defs[id]!;
    return def.scope.runInAsyncScope(this.#run, this, def, op, state, args);
  }

  #run(def: Definition, op: number, state: number, args: unknown[]): unknown {
    try {
      let out: unknown;
      switch (op) {
        case FUNCTION_OP_SCALAR:
          out = Reflect.apply(def.fn!, undefined, args);
          break;
        case FUNCTION_OP_STEP:
        case FUNCTION_OP_INVERSE: {
          const acc = this.#accumulator(def, state);
          const next = Reflect.apply(op === FUNCTION_OP_STEP ? def.step! : def.inverse!, undefined, [acc, ...args]);
          this.#check(def, next);
          this.#accumulators.set(state, next === undefined ? acc : next);
          return null;
        }
        case FUNCTION_OP_VALUE: {
          const acc = this.#accumulator(def, state);
          out = def.result === undefined ? acc : Reflect.apply(def.result, undefined, [acc]);
          break;
        }
        case FUNCTION_OP_FINAL: {
          // SQLite ends a group whose step threw too (the statement has failed): its result
          // is not asked for, and could only replace the step's error with its own.
          if (this.#failed.delete(state)) {
            this.#accumulators.delete(state);
            return null;
          }
          const acc = state === 0 ? this.#start(def) : this.#accumulator(def, state);
          this.#accumulators.delete(state);
          out = def.result === undefined ? acc : Reflect.apply(def.result, undefined, [acc]);
          break;
        }
        default:
          throw new Error(`quietsqlite: unknown function call kind ${op} (a bug)`);
      }
      this.#check(def, out);
      return out;
    } catch (err) {
      if (op === FUNCTION_OP_FINAL) this.#accumulators.delete(state);
      else if (op === FUNCTION_OP_STEP || op === FUNCTION_OP_INVERSE) this.#failed.add(state);
      throw { token: keepThrown(err), message: messageOf(err) };
    }
  }

  /** A function that returned a promise was not synchronous: the statement fails (and the
   * promise's own rejection, if any, is not left unhandled). */
  #check(def: Definition, v: unknown): void {
    if (!isThenable(v)) return;
    try {
      v.then(undefined, () => {});
    } catch {
      // a thenable whose then() throws: nothing to silence
    }
    throw new TypeError(
      `function '${def.name}' returned a Promise; user-defined functions must be synchronous (no async, no await)`,
    );
  }
}
