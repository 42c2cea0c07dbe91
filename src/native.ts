// Loads the compiled addon. It is built from source by `npm install` into native/.
import type { NativeDatabase as NativeDatabaseClass, NativeOpenOptions } from '../native/binding';
import { join } from 'node:path';

export type { NativeOpenOptions };
export type NativeDatabase = NativeDatabaseClass;

interface Binding {
  NativeDatabase: typeof NativeDatabaseClass;
  MAX_PARAMETERS: number;
  FUNCTION_OP_SCALAR: number;
  FUNCTION_OP_STEP: number;
  FUNCTION_OP_INVERSE: number;
  FUNCTION_OP_VALUE: number;
  FUNCTION_OP_FINAL: number;
}

function load(): Binding {
  const path = join(__dirname, '..', 'native', 'quietsqlite.node');
  try {
    return require(path) as Binding;
  } catch (err) {
    const e = err as Error;
    throw new Error(
      `quietsqlite: could not load the native addon at ${path} (${e.message}). ` +
        'It is built from source by `npm install`; run `npm run build` to build it again.',
      { cause: err },
    );
  }
}

export const binding: Binding = load();
