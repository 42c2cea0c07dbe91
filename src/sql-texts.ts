/**
 * SQL texts a database is given again and again, registered with the addon as prepared
 * statements are, so that a request carries the text's number instead of the text
 * (docs/experiments/071-sql-texts-by-number.md). Copying the text out of the JS string,
 * checking its UTF-8 and freeing the copy on another thread cost more than the rest of what
 * the JS thread does to send a point query.
 *
 * A text is registered the second time it is seen, so one-off texts (values written into
 * the SQL) cost a set lookup and fill nothing; the table stops growing when full and keeps
 * what it holds while the database is open. What is kept is bounded: TEXTS texts of at most
 * TEXT_CHARS characters each, here and in the addon, and SEEN texts seen once. Each is kept
 * as a copy: the caller's string may be a slice of a far larger one (a SQL dump split into
 * statements), which V8 would keep whole for as long as the slice.
 */
const TEXTS = 256;
const TEXT_CHARS = 1024;
const SEEN = 256;

export class SqlTexts {
  readonly #numbers = new Map<string, number>();
  readonly #seen = new Set<string>();

  /** `register` gives a text its number in the addon (as `prepare` does). */
  constructor(private readonly register: (sql: string) => number) {}

  /** The number of `sql` when it has one; a checked text (no NUL). */
  numberOf(sql: string): number | undefined {
    return this.#numbers.get(sql);
  }

  /** What to send for a checked text that has no number yet: a number, when this is its
   * second time; the text itself otherwise. */
  noteText(sql: string): string | number {
    if (sql.length > TEXT_CHARS || this.#numbers.size >= TEXTS) return sql;
    if (!this.#seen.has(sql)) {
      if (this.#seen.size >= SEEN) this.#seen.clear();
      this.#seen.add(copyOf(sql));
      return sql;
    }
    this.#seen.delete(sql);
    let number: number;
    try {
      number = this.register(sql);
    } catch {
      // Only a shortcut: a text the addon will not register (the database closed, or more
      // statements than it allows are open) is sent as text, and its request reports any
      // error of its own.
      return sql;
    }
    this.#numbers.set(copyOf(sql), number);
    // Full: nothing seen once will be registered any more.
    if (this.#numbers.size >= TEXTS) this.#seen.clear();
    return number;
  }

  /** The database closed: nothing is sent any more. */
  clear(): void {
    this.#numbers.clear();
    this.#seen.clear();
  }
}

/** A string of its own with the text of `s` (never a slice of the string `s` may be). */
function copyOf(s: string): string {
  return Buffer.from(s, 'utf16le').toString('utf16le');
}
