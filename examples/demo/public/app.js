// The page: renders whatever the server's live queries push; user actions are plain requests.
// It never re-fetches after a change: the change comes back as an emission, in every tab.
const $ = (id) => document.getElementById(id);

async function call(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : undefined,
    body: body ? JSON.stringify(body) : undefined,
  });
  if (!res.ok && res.status !== 404) alert((await res.json()).error ?? res.statusText);
}

function renderTodos(rows) {
  const list = $('todos');
  list.replaceChildren(...rows.map((row) => {
    const li = document.createElement('li');
    li.dataset.id = String(row.id);
    li.className = row.done ? 'done' : '';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.checked = Boolean(row.done);
    box.setAttribute('aria-label', `done: ${row.title}`);
    box.addEventListener('change', () => call('POST', `/api/todos/${row.id}/toggle`));
    const title = document.createElement('span');
    title.className = 'title';
    title.textContent = row.title; // text, never HTML
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'delete';
    del.textContent = '×';
    del.setAttribute('aria-label', `delete: ${row.title}`);
    del.addEventListener('click', () => call('DELETE', `/api/todos/${row.id}`));
    li.append(box, title, del);
    return li;
  }));
}

function renderStats(s) {
  const emitted = Object.values(s.emissions).reduce((a, b) => a + b, 0);
  $('stat-emissions').textContent = String(emitted);
  $('stat-writes').textContent = String(s.writes);
  $('stat-pages').textContent = String(s.pages);
  const r = s.registry;
  $('stat-runs').textContent = String(r.runs);
  $('stat-skipped').textContent = String(r.skippedByHash);
  $('stat-groups').textContent = String(r.groups);
  $('stat-source').textContent = `Registry counters from ${r.source}.`;
  $('queries').replaceChildren(...Object.entries(s.queries).map(([name, sql]) => {
    const li = document.createElement('li');
    const code = document.createElement('code');
    code.textContent = sql;
    li.append(`${name} (${s.emissions[name]} emissions): `, code);
    return li;
  }));
}

const events = new EventSource('/events');
events.addEventListener('open', () => {
  $('connection').textContent = 'live';
  $('connection').className = 'status live';
});
events.addEventListener('error', () => {
  $('connection').textContent = 'reconnecting…';
  $('connection').className = 'status';
});
const render = {
  todos: renderTodos,
  open: (rows) => { $('open-n').textContent = String(rows[0].n); },
  done: (rows) => { $('done-n').textContent = String(rows[0].n); },
};
events.addEventListener('rows', (e) => {
  const { query, rows } = JSON.parse(e.data);
  render[query]?.(rows);
});
events.addEventListener('stats', (e) => renderStats(JSON.parse(e.data)));
events.addEventListener('failure', (e) => console.error('live query failed', JSON.parse(e.data)));

$('add').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = $('title');
  const title = input.value.trim();
  if (!title) return;
  input.value = '';
  await call('POST', '/api/todos', { title });
});
$('clear').addEventListener('click', () => call('POST', '/api/clear-done'));
