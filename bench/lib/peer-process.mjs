// A peer's worker process seen from the coordinator: request/response over IPC with a
// timeout, stderr kept for error messages, and a crash turning pending requests into errors.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const WORKER = fileURLToPath(new URL('../worker.mjs', import.meta.url));

export class PeerProcess {
  constructor(peer, { execPath = process.execPath, execArgv = [] } = {}) {
    this.peer = peer;
    this.nextId = 1;
    this.pending = new Map();
    this.stderr = '';
    this.exited = false;
    // JSON serialization: the Node 24 worker and the Node 20 coordinator must agree.
    this.child = fork(WORKER, [peer], { execPath, execArgv, stdio: ['ignore', 'inherit', 'pipe', 'ipc'], serialization: 'json' });
    this.child.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-4000);
    });
    this.child.on('message', (msg) => {
      const p = this.pending.get(msg.id);
      if (!p) {
        if (msg.error) this.stderr += `\n${msg.error}`;
        return;
      }
      this.pending.delete(msg.id);
      clearTimeout(p.timer);
      p.resolve(msg);
    });
    this.child.on('exit', (code, signal) => {
      this.exited = true;
      for (const p of this.pending.values()) {
        clearTimeout(p.timer);
        p.resolve({ error: `worker exited (${signal ?? code})${this.stderr ? `: ${this.stderr.trim().split('\n').slice(-3).join(' / ')}` : ''}` });
      }
      this.pending.clear();
    });
  }

  /** Resolves with the worker's reply ({ ok } | { na } | { error }); never rejects. */
  request(cmd, payload = {}, timeoutMs = 180_000) {
    if (this.exited) return Promise.resolve({ error: 'worker not running' });
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({ error: `timed out after ${timeoutMs / 1000} s (${cmd})` });
        this.kill();
      }, timeoutMs);
      this.pending.set(id, { resolve, timer });
      this.child.send({ id, cmd, ...payload });
    });
  }

  async close() {
    if (this.exited) return;
    await this.request('close', {}, 20_000);
    await new Promise((resolve) => {
      if (this.exited) return resolve();
      const t = setTimeout(() => {
        this.kill();
        resolve();
      }, 5_000);
      this.child.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  kill() {
    if (!this.exited) this.child.kill('SIGKILL');
  }
}
