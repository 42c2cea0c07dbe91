// The CPU time of this process's reader threads, for probes that compare builds by what their
// readers spend (reader-cpu.mjs, inproc-reader-cpu.mjs).
import { readdirSync, readFileSync } from 'node:fs';

/** Nanoseconds on a CPU (the kernel's schedstat) of every live reader thread of the process;
 * a thread that ended is not counted, and readers live as long as their database. */
export function readerThreadsCpuNs() {
  let ns = 0;
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      if (!readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').startsWith('quietsqlite-rea')) continue;
      ns += Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // The thread ended between listing and reading: not counted.
    }
  }
  return ns;
}
