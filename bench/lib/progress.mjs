// Live progress: on a terminal one status line is redrawn in place; otherwise (CI, pipes)
// a line is printed when the case changes and at most every 10 s.
import { formatDuration } from './format.mjs';

export class Progress {
  constructor(stream = process.stdout) {
    this.stream = stream;
    this.tty = Boolean(stream.isTTY);
    this.t0 = Date.now();
    this.last = '';
    this.lastKey = '';
    this.lastPrint = 0;
  }

  elapsed() {
    return formatDuration(Date.now() - this.t0);
  }

  /** s = { suite, caseId, peer, iter, of, warm } */
  status(s) {
    const text = `[${this.elapsed()}] ${s.suite} › ${s.caseId} › ${s.peer} › ${s.warm ? 'warm-up' : `iteration ${s.iter}/${s.of}`}`;
    if (this.tty) {
      this.last = text;
      this.stream.write(`\r\x1b[K${text.slice(0, (this.stream.columns || 120) - 1)}`);
      return;
    }
    const key = `${s.suite}/${s.caseId}`;
    const nowMs = Date.now();
    if (key !== this.lastKey || nowMs - this.lastPrint > 10_000) {
      this.stream.write(`${text}\n`);
      this.lastKey = key;
      this.lastPrint = nowMs;
    }
  }

  /** A permanent line (the status line is redrawn below it). */
  log(line) {
    if (this.tty) this.stream.write(`\r\x1b[K${line}\n${this.last}`);
    else this.stream.write(`${line}\n`);
  }

  done() {
    if (this.tty) this.stream.write('\r\x1b[K');
    this.last = '';
  }
}
