// The caller's AbortSignals: checked once (`checkSignal`), then read and watched only through
// Node's own functions (`signalState`), never through the signal's properties.

const ABORTED = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;
const REASON = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'reason')!.get!;
const { addEventListener: ADD_LISTENER, removeEventListener: REMOVE_LISTENER } = EventTarget.prototype;
const THROW_IF_ABORTED = AbortSignal.prototype.throwIfAborted;

/** A checked signal's state and listeners, through Node's own functions, never the
 * signal's properties: any code, a getter of a call's parameters while its request is sent
 * among it, may give the signal own properties that shadow them, and nothing may throw
 * once a request is sent (or in a finalizer). */
export const signalState = {
  aborted: (s: AbortSignal): boolean => ABORTED.call(s) as boolean,
  reason: (s: AbortSignal): unknown => REASON.call(s),
  throwIfAborted: (s: AbortSignal | undefined): void => {
    if (s !== undefined) THROW_IF_ABORTED.call(s);
  },
  listen: (s: AbortSignal, listener: () => void): void => {
    try {
      ADD_LISTENER.call(s, 'abort', listener, { once: true });
    } catch {
      // Node reads `aborted` through the property when a listener is added to a signal
      // of AbortSignal.timeout() or .any(): a getter put there that throws ends here. The
      // signal then cannot cancel; the call goes on and settles as if it had none.
    }
  },
  unlisten: (s: AbortSignal, listener: () => void): void => REMOVE_LISTENER.call(s, 'abort', listener),
};

/**
 * Every `signal` option passes here: undefined, or a real AbortSignal, one Node made. A
 * request is sent before its signal is watched, so an object that only looked like one
 * (made from AbortSignal's prototype, with methods that throw) made a call reject after
 * its statement ran; it is refused before anything is sent. A real signal's state and
 * listeners are then used through `signalState` only.
 */
export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  try {
    // Node's getter checks the receiver's brand: it throws for anything but an AbortSignal.
    ABORTED.call(signal);
  } catch {
    throw new TypeError('signal must be an AbortSignal');
  }
  return signal as AbortSignal;
}
