// A call that waits in JavaScript before it is sent: a parent transaction's call made while
// a nested body runs (src/transaction.ts). Every other call is converted and queued by the
// addon when it is made; this one is sent only once the nested bodies have ended, so what it
// was given is taken when it is made, as for every other call: its parameters (copied, the
// bytes of views too), its options, its signal and the start of its timeout.

import { checkParams, checkParamSets, resolveCallOptions, takeParamSets } from './options';
import { bindable, paramsAsOfNow } from './params';
import type { RowMode } from './rows';
import { signalState } from './signals';
import { startTimer, stopTimer, timeoutError } from './timers';

/** What a held call's parameters are. */
export const enum HeldParams {
  /** One set of parameters (`select`, `execute`, ...). */
  One,
  /** `executeBatch`'s array of sets. */
  Sets,
  /** None (a statement's description). */
  None,
}

export class HeldCall {
  /** The parameters as they were when the call was made. */
  readonly params: unknown;
  readonly #rowMode: RowMode | undefined;
  readonly #signal: AbortSignal | undefined;
  /** When the call times out (performance.now()), or 0. */
  readonly #deadline: number;
  #timer: NodeJS.Timeout | undefined;
  #onAbort: (() => void) | undefined;

  /** Checks and copies the call's inputs, in the order the call itself would (its errors are
   * the call's own): throws what the call would reject with at once. `withRowMode`: the
   * method takes `rowMode`. */
  constructor(what: HeldParams, params: unknown, options: unknown, withRowMode: boolean, defaultTimeoutMs: number) {
    if (what === HeldParams.Sets) {
      checkParamSets(params);
    } else if (what === HeldParams.One) {
      checkParams(params);
      params = bindable(params);
    }
    const o = resolveCallOptions(options, withRowMode, defaultTimeoutMs);
    let taken: unknown;
    if (what === HeldParams.Sets) taken = takeParamSets(params as readonly unknown[]).map(paramsAsOfNow);
    else if (what === HeldParams.One) taken = paramsAsOfNow(params);
    signalState.throwIfAborted(o.signal);
    this.params = taken;
    this.#rowMode = withRowMode ? o.rowMode : undefined;
    this.#signal = o.signal;
    this.#deadline = o.timeoutMs === 0 ? 0 : performance.now() + o.timeoutMs;
  }

  /** Calls `cancel` with the reason when the signal aborts or the time runs out, until
   * `release()`. */
  watch(cancel: (reason: unknown) => void): void {
    if (this.#deadline !== 0) {
      this.#timer = startTimer(() => cancel(timeoutError()), Math.max(0, this.#deadline - performance.now()));
    }
    if (this.#signal !== undefined) {
      const signal = this.#signal;
      this.#onAbort = () => cancel(signalState.reason(signal));
      signalState.listen(signal, this.#onAbort);
    }
  }

  /** Stops watching (the call was cancelled, or is being sent). */
  release(): void {
    if (this.#timer !== undefined) stopTimer(this.#timer);
    if (this.#onAbort !== undefined) signalState.unlisten(this.#signal!, this.#onAbort);
    this.#timer = undefined;
    this.#onAbort = undefined;
  }

  /** The options to send the call with now: its signal, and the time it has left. Throws its
   * timeout's error when that time is up (the timer may not have fired yet). */
  optionsNow(): { rowMode?: RowMode; signal?: AbortSignal; timeoutMs?: number } {
    const out: { rowMode?: RowMode; signal?: AbortSignal; timeoutMs?: number } = {};
    if (this.#rowMode !== undefined) out.rowMode = this.#rowMode;
    if (this.#signal !== undefined) out.signal = this.#signal;
    if (this.#deadline !== 0) {
      const left = Math.ceil(this.#deadline - performance.now());
      if (left <= 0) throw timeoutError();
      out.timeoutMs = left;
    } else {
      // The default timeout, if any, already counted from the call: none from here on.
      out.timeoutMs = 0;
    }
    return out;
  }
}
