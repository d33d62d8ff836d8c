/* boardd's operator UI, the board (DESIGN §21): the columns and their chips, relative times,
 * the keyboard and drag and drop on the board, the Needs-attention lane and the reaper panel
 * (each folded to a bar with counts until asked for). Globals from app.js. */
'use strict';

/* ---- times: "3 min ago", the exact time on hover ---- */

function span(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min';
  if (s < 48 * 3600) return Math.floor(s / 3600) + ' h';
  return Math.floor(s / 86400) + ' d';
}

/* f: 'ago' ("3 min ago", "in 5 min" ahead), 'in' ("in column 3 min"), 'age' ("age 3 min"),
 * 'until' ("in 4 s", then "now": a not_before). */
function timeText(iso, f, now) {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return iso || '';
  const d = (now || Date.now()) - t;
  if (f === 'in') return 'in column ' + span(d);
  if (f === 'age') return 'age ' + span(d);
  if (f === 'until') return d < 0 ? 'in ' + span(-d) : 'now'; /* a schedule: exact to the second */
  if (d < -10000) return 'in ' + span(-d);
  return d < 10000 ? 'just now' : span(d) + ' ago';
}

/* A <time> that says how long ago, with the exact ISO time as its title; tickTimes keeps it
 * current. */
function timeEl(iso, f, cls) {
  const el = document.createElement('time');
  if (cls) el.className = cls;
  if (!iso) return el;
  el.dateTime = iso;
  el.title = iso;
  el.setAttribute('data-f', f || 'ago');
  el.textContent = timeText(iso, f);
  return el;
}

function tickTimes() {
  const now = Date.now();
  for (const el of document.querySelectorAll('time[data-f]')) {
    const t = timeText(el.dateTime, el.dataset.f, now);
    if (el.textContent !== t) el.textContent = t;
  }
  renderReaperSummary();
}

function leaseText(claim) {
  if (!claim || !claim.lease_until) return null;
  const left = Date.parse(claim.lease_until) - Date.now();
  const s = Math.round(Math.abs(left) / 1000);
  const span = s >= 3600 ? Math.floor(s / 3600) + 'h' + String(Math.floor(s % 3600 / 60)).padStart(2, '0') + 'm'
    : s >= 60 ? Math.floor(s / 60) + 'm' + String(s % 60).padStart(2, '0') + 's' : s + 's';
  return left >= 0 ? { text: 'lease ' + span, expired: false } : { text: 'expired ' + span + ' ago', expired: true };
}

function leaseTag(claim) {
  const l = leaseText(claim);
  if (!l) return null;
  return h('span', { class: 'tag lease' + (l.expired ? ' expired' : ''), 'data-lease-until': claim.lease_until, text: l.text });
}

function tickLeases() {
  for (const el of document.querySelectorAll('[data-lease-until]')) {
    const l = leaseText({ lease_until: el.getAttribute('data-lease-until') });
    el.textContent = l.text;
    el.classList.toggle('expired', l.expired);
  }
}

/* ---- chips ---- */

/* Chips are drawn again only when their card or its reasons changed: a live update on a board
 * of thousands of cards rebuilt every chip (about 0.2 to 0.6 s at 3000 cards, twice per
 * event). A card read again is a new object (S.cards is never changed in place), so the
 * card's identity says whether it changed. id -> {card, why, drag, el}; entries of cards gone
 * from S.cards are dropped at each render. */
const chipCache = new Map();

function cachedChip(c) {
  const reasons = S.attention.get(c.id);
  const why = reasons ? reasons.join(',') : '';
  const drag = may('move', c.board);
  const hit = chipCache.get(c.id);
  if (hit && hit.card === c && hit.why === why && hit.drag === drag) return hit.el;
  const el = chip(c, reasons);
  chipCache.set(c.id, { card: c, why, drag, el });
  return el;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/* A title with a line-break chance after a slash, underscore, dot or colon inside a word
 * ("backup/" "restore"), so a narrow column wraps there and never inside a word. */
const BREAK_AT = /([/_.:])(?=[^\s/_.:])/;
function breakable(text) {
  if (!BREAK_AT.test(text)) return [document.createTextNode(text)];
  const out = [];
  for (const part of text.split(BREAK_AT)) {
    if (!part) continue;
    out.push(document.createTextNode(part));
    if (part.length === 1 && BREAK_AT.test(part + 'x')) out.push(document.createElement('wbr'));
  }
  return out;
}

/* The chip of a card: a button (Enter opens it), one Tab stop for the whole board (the
 * arrows move between chips), draggable where the token may move it. Built with bare DOM
 * calls: it is the one element drawn thousands of times. */
const CHIP = (() => {
  const li = document.createElement('li');
  const b = el('button', 'chip');
  b.type = 'button';
  b.tabIndex = -1;
  const sub = el('span', 'sub');
  sub.append(el('span', 'id'));
  b.append(el('span', 'title'), sub);
  li.append(b);
  return li;
})();

function chip(c, reasons) {
  const li = CHIP.cloneNode(true);
  const b = li.firstChild;
  if (reasons) b.className = 'chip attn';
  b.setAttribute('data-card', c.id);
  if (may('move', c.board)) b.draggable = true;
  b.setAttribute('aria-label', (c.title || c.id) + ', ' + c.state + (c.claim ? ', claimed by ' + c.claim.marker : '') +
    (reasons ? ', needs attention: ' + reasons.join(', ') : ''));
  b.firstChild.append(...breakable(c.title || '(untitled)'));
  const sub = b.lastChild;
  sub.firstChild.textContent = c.id;
  /* Time in its column, and its age when it has moved since it was created. */
  if (c.state_at && c.state_at !== c.created_at) sub.append(timeEl(c.state_at, 'in', 'since'));
  sub.append(timeEl(c.created_at, 'age', 'since'));
  const meta = [];
  if (c.priority) meta.push(el('span', 'tag prio', 'p' + c.priority));
  if (c.claim) {
    const who = c.claim.holder && c.claim.holder !== c.claim.marker ? c.claim.marker + ' (' + c.claim.holder + ')' : c.claim.marker;
    const t = el('span', 'tag holder', '⚑ ' + who);
    t.title = 'claimed by ' + who + ', epoch ' + c.claim_epoch + ', since ' + c.claim.claimed_at;
    meta.push(t, leaseTag(c.claim));
  }
  /* DESIGN §17: a schedule still ahead, and the attempts a retry policy counts. */
  if (c.not_before && Date.parse(c.not_before) > Date.now()) {
    const t = el('span', 'tag sched', 'due ');
    t.append(timeEl(c.not_before, 'until'));
    t.title = 'not claimable before ' + c.not_before;
    meta.push(t);
  }
  if (c.attempts) {
    const t = el('span', 'tag tries', c.attempts === 1 ? '1 attempt' : c.attempts + ' attempts');
    t.title = c.attempts + ' claim(s) ended without the work done (retries, reaper returns)';
    meta.push(t);
  }
  for (const l of c.labels || []) meta.push(el('span', 'tag', l));
  if ((c.blockers || []).length) {
    const t = el('span', 'tag blk', 'blocked by ' + c.blockers.join(', '));
    t.title = t.textContent;
    meta.push(t);
  }
  /* A stamp the card was since moved out of (a reopen answered it) is history, not a reason. */
  if (c.gave_up) {
    const live = !!(reasons && reasons.includes('gave_up'));
    const t = el('span', live ? 'reason' : 'tag old', (live ? 'gave up: ' : 'gave up earlier: ') + c.gave_up.reason);
    if (!live) t.title = 'an earlier give-up, answered since';
    meta.push(t);
  }
  if (meta.length) {
    const m = el('span', 'meta');
    m.append(...meta.filter(Boolean));
    b.append(m);
  }
  return li;
}

/* Does parent hold exactly these elements, in this order? */
function holds(parent, els) {
  const kids = parent.children;
  if (kids.length !== els.length) return false;
  for (let i = 0; i < els.length; i++) if (kids[i] !== els[i]) return false;
  return true;
}

/* ---- columns ---- */

/* A column's section, kept from render to render (name -> {section, count, ul}): only what
 * changed is put into the page, so a live update does not lay the whole board out again. */
const columnCache = new Map();

/* Live claims taken from column `name` (claim.from), over every card of the board on screen. */
function takenFrom(name) {
  let n = 0;
  for (const c of S.cards.values()) if (c.claim && c.claim.from === name) n++;
  return n;
}

function columnSection(name, col, cards) {
  let e = columnCache.get(name);
  if (!e) {
    const count = h('span', { class: 'count' });
    const ul = h('ul', {});
    e = { section: h('section', { 'data-column': name, 'aria-label': 'Column ' + name }, h('h2', {}, h('span', { class: 'name' }, breakable(name)), count), ul), count, ul };
    columnCache.set(name, e);
  }
  e.section.className = 'column' + (col.terminal ? ' terminal' : '');
  let claimed = 0;
  for (const c of cards) if (c.claim) claimed++;
  let text = cards.length + (claimed ? ' · ' + claimed + ' claimed' : '');
  /* DESIGN §17: the limit bounds the claims taken from this column, wherever those cards
   * went since (claim.from); the server's own count comes with the board (GET /v1/boards). */
  if (col.limit) {
    const taken = takenFrom(name);
    text += ' · ' + taken + '/' + col.limit + ' taken';
    e.section.classList.toggle('full', taken >= col.limit);
  }
  if (e.count.textContent !== text) e.count.textContent = text;
  return e;
}

/* Draws the board from S.cards through the filter and the sort. Only what changed goes into
 * the page; the keyboard focus stays on its card (keepFocus). */
function renderBoard() {
  if (!S.board) return;
  const f = filterState();
  const list = filtered();
  const count = list.length + ' of ' + S.cards.size + ' cards match';
  if ($('f-count').textContent !== count) $('f-count').textContent = count; /* else no relayout */
  const shown = columns().filter((c) => !f.state || c.name === f.state);
  const byState = new Map(shown.map((c) => [c.name, []]));
  for (const c of list) {
    if (!byState.has(c.state)) byState.set(c.state, []);
    byState.get(c.state).push(c);
  }
  const cmp = sorter(f.sort);
  const cols = [];
  const fills = [];
  for (const [name, cards] of byState) {
    const col = column(name) || { name };
    cards.sort(cmp);
    const e = columnSection(name, col, cards);
    const lis = cards.map(cachedChip);
    if (!holds(e.ul, lis)) fills.push([e.ul, lis]);
    cols.push(e.section);
  }
  /* A chip filtered out is kept for when the filter lets it back; a card gone is dropped. */
  for (const id of chipCache.keys()) if (!S.cards.has(id)) chipCache.delete(id);
  for (const name of columnCache.keys()) if (!byState.has(name)) columnCache.delete(name);
  $('board').classList.toggle('one', cols.length === 1);
  if (fills.length || !holds($('board'), cols)) {
    keepFocus($('board'), () => {
      for (const [ul, lis] of fills) ul.replaceChildren(...lis);
      if (!holds($('board'), cols)) $('board').replaceChildren(...cols);
    }, $('board'));
  }
  fixRoving();
}

/* ---- the keyboard on the board: one Tab stop, arrows between chips ---- */

function setRoving(chipEl) {
  if (S.rovingEl && S.rovingEl !== chipEl) S.rovingEl.tabIndex = -1;
  chipEl.tabIndex = 0;
  S.rovingEl = chipEl;
  S.roving = chipEl.dataset.card;
}

/* After a redraw: the Tab stop stays on its card when it is still drawn, else the first. */
function fixRoving() {
  const board = $('board');
  if (S.rovingEl && S.rovingEl.isConnected && board.contains(S.rovingEl)) return;
  const want = S.roving ? board.querySelector('button.chip[data-card="' + CSS.escape(S.roving) + '"]') : null;
  const first = want || board.querySelector('button.chip');
  if (first) setRoving(first);
  else S.rovingEl = null;
}

/* The working column next to `state` in direction dir (-1, 1), skipping terminal ones. */
function adjacentWorking(state, dir) {
  const cols = columns();
  for (let i = cols.findIndex((c) => c.name === state) + dir; i >= 0 && i < cols.length; i += dir) {
    if (!cols[i].terminal) return cols[i].name;
  }
  return null;
}

function chipsOf(section) {
  return [...section.querySelectorAll('button.chip')];
}

function boardKey(ev) {
  const b = ev.target.closest ? ev.target.closest('button.chip') : null;
  if (!b || ev.ctrlKey || ev.metaKey) return;
  const id = b.dataset.card;
  const section = b.closest('section[data-column]');
  const mine = chipsOf(section);
  const i = mine.indexOf(b);
  let go = null;
  const moveDir = ev.altKey && ev.key === 'ArrowLeft' ? -1 : ev.altKey && ev.key === 'ArrowRight' ? 1
    : !ev.altKey && ev.key === ',' ? -1 : !ev.altKey && ev.key === '.' ? 1 : 0;
  if (moveDir) {
    ev.preventDefault();
    const c = S.cards.get(id);
    if (!c || !may('move', c.board)) return;
    const to = adjacentWorking(c.state, moveDir);
    if (to) moveCard(id, to);
    else toast('No working column to the ' + (moveDir < 0 ? 'left' : 'right') + ' of ' + c.state);
    return;
  }
  if (ev.altKey || ev.shiftKey) return;
  if (ev.key === 'ArrowDown') go = mine[i + 1];
  else if (ev.key === 'ArrowUp') go = mine[i - 1];
  else if (ev.key === 'Home') go = mine[0];
  else if (ev.key === 'End') go = mine[mine.length - 1];
  else if (ev.key === 'ArrowRight' || ev.key === 'ArrowLeft') {
    const secs = [...$('board').children];
    const dir = ev.key === 'ArrowRight' ? 1 : -1;
    for (let k = secs.indexOf(section) + dir; k >= 0 && k < secs.length && !go; k += dir) {
      const there = chipsOf(secs[k]);
      if (there.length) go = there[Math.min(Math.max(i, 0), there.length - 1)];
    }
  } else if ((ev.key === 'e' || ev.key === 'E') && S.cards.has(id) && mayEdit(S.cards.get(id))) {
    ev.preventDefault();
    openEdit(id);
    return;
  } else {
    return;
  }
  ev.preventDefault();
  if (go) go.focus();
}

/* ---- drag and drop: a chip onto a working column ---- */

function dropColumn(ev) {
  const sec = ev.target.closest ? ev.target.closest('section[data-column]') : null;
  if (!sec || !S.dragging) return null;
  const col = column(sec.dataset.column);
  const c = S.cards.get(S.dragging);
  if (!col || col.terminal || !c || c.state === col.name) return null;
  return sec;
}

function clearDrop() {
  for (const s of $('board').querySelectorAll('.drop')) s.classList.remove('drop');
}

function wireBoard() {
  const board = $('board');
  board.addEventListener('click', (ev) => {
    const b = ev.target.closest('button.chip');
    if (b) openCardDialog(b.dataset.card);
  });
  board.addEventListener('keydown', boardKey);
  board.addEventListener('focusin', (ev) => {
    if (ev.target.matches && ev.target.matches('button.chip')) setRoving(ev.target);
  });
  board.addEventListener('dragstart', (ev) => {
    const b = ev.target.closest ? ev.target.closest('button.chip') : null;
    const c = b ? S.cards.get(b.dataset.card) : null;
    if (!c || !may('move', c.board)) return;
    S.dragging = b.dataset.card;
    ev.dataTransfer.setData('text/plain', b.dataset.card);
    ev.dataTransfer.effectAllowed = 'move';
    b.classList.add('dragging');
  });
  board.addEventListener('dragover', (ev) => {
    const sec = dropColumn(ev);
    if (!sec) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = 'move';
    if (!sec.classList.contains('drop')) {
      clearDrop();
      sec.classList.add('drop');
    }
  });
  board.addEventListener('dragleave', (ev) => {
    const sec = ev.target.closest ? ev.target.closest('section[data-column]') : null;
    if (sec && !sec.contains(ev.relatedTarget)) sec.classList.remove('drop');
  });
  board.addEventListener('drop', (ev) => {
    const sec = dropColumn(ev);
    const id = S.dragging;
    clearDrop();
    if (!sec) return;
    ev.preventDefault();
    S.dragging = null;
    moveCard(id, sec.dataset.column);
  });
  board.addEventListener('dragend', (ev) => {
    S.dragging = null;
    clearDrop();
    if (ev.target.classList) ev.target.classList.remove('dragging');
  });
}

/* ---- the bars: the lane, the reaper and the bulk actions open on demand ---- */

function setPanel(which, open) {
  $(which).hidden = !open;
  $(which + '-toggle').setAttribute('aria-expanded', String(open));
  $('side').hidden = $('attention').hidden && $('reaper').hidden && $('activity').hidden;
  if (open && which === 'reaper' && S.token && S.board) loadReaper();
  if (open && which === 'activity' && S.token && S.board) loadActivity();
}

function setBulkOpen(open) {
  $('bulk').hidden = !open;
  $('bulk-toggle').setAttribute('aria-expanded', String(open));
  if (!open) {
    $('bulk-action').value = '';
    $('bulk-preview').disabled = true;
    $('bulk-apply').disabled = true;
    $('bulk-to-wrap').hidden = true;
    S.bulkPlan = null;
  }
}

/* ---- the attention lane ---- */

/* The lane's actions on card c, each where the token may do it (ACTIONS). */
function actionsFor(c, reasons) {
  const out = [];
  if (isTerminal(c.state) && may('reopen', c.board)) {
    out.push(h('button', { type: 'button', class: 'primary', 'data-action': 'reopen', onclick: () => openReopen(c.id) }, 'Reopen…'));
    out.push(h('button', { type: 'button', 'data-action': 'requeue', onclick: () => act(() => requeue(c), 'Re-queued ' + c.id) }, 'Re-queue'));
  }
  if (reasons.includes('awaiting_input') && may('comment', c.board)) out.push(h('button', { type: 'button', 'data-action': 'answer', onclick: () => openCardDialog(c.id, true) }, 'Answer…'));
  if (c.claim && may('revoke', c.board)) out.push(h('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: () => act(() => revoke(c.id), 'Revoked the claim on ' + c.id) }, 'Revoke claim'));
  if (c.last_run_id && (reasons.includes('run_paused') || reasons.includes('run_failed')) && may('run', c.board)) {
    if (reasons.includes('run_paused')) out.push(h('button', { type: 'button', 'data-action': 'cancel-run', onclick: () => act(() => api('POST', '/v1/runs/' + enc(c.last_run_id) + '/cancel'), 'Cancelled run ' + c.last_run_id) }, 'Cancel run'));
    /* The one action that cannot be undone (the run is deleted, a tombstone stays; the
     * reaper then reads the card's run as gone and gives the card up): asked first. */
    out.push(h('button', { type: 'button', class: 'danger', 'data-action': 'prune-run', onclick: () => {
      if (!confirm('Prune run ' + c.last_run_id + ' of ' + c.id + '? The run is deleted (only a tombstone stays) and cannot be brought back; the reaper then gives the card up (run_pruned).')) return;
      act(() => api('DELETE', '/v1/runs/' + enc(c.last_run_id)), 'Pruned run ' + c.last_run_id);
    } }, 'Prune run'));
  }
  return out;
}

/* What a reason is about on this card, in a few words (null: nothing to add). */
function reasonDetail(c, r) {
  if (r === 'gave_up' && c.gave_up) return c.gave_up.reason + (c.gave_up.run_id ? ' (run ' + c.gave_up.run_id + ')' : '');
  if ((r === 'recovery_hold' || r === 'lease_expired_kept') && c.claim) {
    const l = leaseText(c.claim);
    return c.claim.marker + (l && r === 'lease_expired_kept' ? ', ' + l.text : '');
  }
  if ((r === 'run_failed' || r === 'run_paused') && c.last_run_id) return 'run ' + c.last_run_id;
  return null;
}

/* The lane, through the board's filter and sort; its bar counts every card and reason (the
 * filter says how many it hides). */
function renderAttention() {
  const all = [...S.attention.entries()].map(([id, reasons]) => [S.cards.get(id), reasons]).filter(([c]) => c);
  const f = filterState();
  const cmp = sorter(f.sort);
  const items = all.filter(([c]) => matches(c, f)).sort((a, b) => cmp(a[0], b[0]));
  const more = S.attentionTruncated ? ': the newest shown, more need attention' : '';
  $('attention-count').textContent = (items.length === all.length ? String(all.length) : items.length + ' of ' + all.length + ' match the filter') + more;
  const per = new Map();
  for (const [, reasons] of all) for (const r of reasons) per.set(r, (per.get(r) || 0) + 1);
  $('attention-reasons').textContent = [...per].map(([r, n]) => r + ' ' + n).join(' · ');
  $('attention-toggle').classList.toggle('hot', all.length > 0);
  const empty = all.length ? 'No card that needs an operator matches the filter.' : 'Nothing needs an operator.';
  const render = () => $('attention-list').replaceChildren(...(items.length ? items.map(([c, reasons]) => h('li', { 'data-card': c.id },
    h('button', { type: 'button', class: 'open', onclick: () => openCardDialog(c.id), 'aria-label': 'Open ' + (c.title || c.id) }, c.title || c.id),
    h('span', { class: 'id muted' }, c.id + ' · ' + c.state + ' · ', timeEl(c.updated_at, 'ago')),
    reasons.map((r) => {
      const d = reasonDetail(c, r);
      return h('span', { class: 'reason', 'data-reason': r }, r, d ? h('span', { class: 'why', text: ': ' + d }) : null);
    }),
    h('span', { class: 'actions' }, actionsFor(c, reasons)))) : [h('li', { class: 'attn-empty', text: empty })]));
  keepFocus($('attention-list'), render, $('attention-title'));
}

/* ---- the reaper ---- */

/* When the last pass ran: the server's time when it gives one, else when this page saw the
 * pass count move (GET /v1/reaper has a count, not a time). {text, stale}. */
function reaperLastPass(now) {
  const r = S.reaper || {};
  const last = r.last_pass || null;
  const at = last && (last.finished_at || last.at || last.ended_at);
  if (at) return { text: 'last pass ' + timeText(at, 'ago', now), iso: at, stale: false };
  const seen = S.reaperSeen;
  if (!seen || typeof r.passes !== 'number') return { text: r.error ? 'status unknown' : 'no pass yet', stale: false };
  if (seen.at) return { text: 'last pass seen ' + timeText(new Date(seen.at).toISOString(), 'ago', now), iso: new Date(seen.at).toISOString(), stale: false };
  const watched = now - seen.since;
  const iv = r.interval_ms || 0;
  const stale = iv > 0 && watched > 3 * iv + 15000;
  if (!stale && watched < Math.max(1.5 * iv, 20000)) return { text: r.passes ? 'last pass before this page opened' : 'no pass yet', stale: false };
  return { text: (r.passes ? 'no pass seen in ' : 'no pass yet in ') + span(watched) + (stale ? ' (one every ' + span(iv) + ' expected: is it running?)' : ''), stale };
}

function renderReaperSummary() {
  const r = S.reaper || {};
  const lp = reaperLastPass(Date.now());
  const parts = [];
  if (r.error) parts.push(r.error);
  if (r.gate) parts.push('gate ' + r.gate);
  if (typeof r.passes === 'number') parts.push(r.passes + (r.passes === 1 ? ' pass' : ' passes'));
  parts.push(lp.text);
  $('reaper-summary').textContent = parts.join(' · ');
  $('reaper-toggle').classList.toggle('warn', !!(lp.stale || r.error));
  const dd = $('reaper-stats').querySelector('[data-last-pass]');
  const short = lp.text.replace(/^last pass /, '');
  if (dd && dd.textContent !== short) dd.textContent = short;
}

function renderReaper() {
  const r = S.reaper || {};
  const rows = [];
  const add = (k, v, attrs) => rows.push(h('dt', { text: k }), h('dd', Object.assign({ text: v }, attrs || {})));
  if (r.error) add('status', r.error);
  if (r.gate) add('gate', r.gate);
  if (r.interval_ms !== undefined) add('interval', Math.round(r.interval_ms / 1000) + ' s');
  if (r.marker) add('marker', r.marker);
  if (r.passes !== undefined) add('passes', String(r.passes));
  const lp = reaperLastPass(Date.now());
  add('last pass ran', lp.text.replace(/^last pass /, ''), { 'data-last-pass': '', title: lp.iso || (r.last_pass ? 'GET /v1/reaper gives no time: this page saw the pass count move' : null) });
  const last = r.last_pass || null;
  if (last) {
    add('its gate', last.gate);
    for (const k of ['listed', 'transferred', 'skipped', 'errors', 'repaired', 'duration_ms']) if (last[k] !== undefined) add(k, String(last[k]));
    if (last.actions) add('actions', Object.entries(last.actions).map(([k, v]) => k + ' ' + v).join(', '));
  }
  $('reaper-stats').replaceChildren(...rows);
  renderReaperSummary();
}
