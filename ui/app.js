/* boardd's operator UI: plain JavaScript over the public /v1 API, nothing else.
 *
 * The token is entered once and kept in sessionStorage (never a cookie), sent as
 * Authorization: Bearer. Every action is an ordinary /v1 call, so the UI can do nothing the
 * token could not do with curl; a token without the operator role gets no action buttons
 * (and the server refuses the calls anyway). Live updates come from GET /v1/events/stream,
 * read with fetch (EventSource cannot send a bearer token) and resumed with Last-Event-ID.
 * Text from the server is only ever set as textContent. */
'use strict';

const TOKEN_KEY = 'boardd.token';
const BULK_CAP_MAX = 500;

const S = {
  token: null,
  me: null,
  boards: [],
  board: null,       // the board's config {name, columns:[{name, terminal, eligible}], ...}
  cards: new Map(),  // id -> card
  attention: new Map(), // id -> reasons[]
  reaper: null,
  stream: null,      // AbortController of the live stream
  lastId: null,      // the last event seq received
  openCard: null,    // id shown in the card dialog
  bulkPlan: null,
};

const $ = (id) => document.getElementById(id);

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

/* Re-renders `root` with `render` and gives the keyboard focus back to the same card's
 * element (live updates must not steal it from a keyboard user). When that card left the
 * list (an action answered it), the focus goes on from the same place: the item now there,
 * the last one, or `fallback` when the list is empty — never lost to the page. */
function keepFocus(root, render, fallback) {
  const a = document.activeElement;
  const holder = a && root.contains(a) ? a.closest('[data-card]') : null;
  const id = holder ? holder.dataset.card : null;
  const index = holder ? [...root.querySelectorAll('[data-card]')].indexOf(holder) : -1;
  const action = a && a.dataset ? a.dataset.action || (a.classList.contains('open') ? 'open' : null) : null;
  render();
  if (!id) return;
  const sel = '[data-card="' + CSS.escape(id) + '"]';
  let el = root.querySelector(sel + (action === 'open' ? ' button.open' : action ? ' [data-action="' + action + '"]' : ''));
  if (!el) el = root.querySelector(sel);
  if (!el) {
    const all = root.querySelectorAll('[data-card]');
    el = all.length ? all[Math.min(index, all.length - 1)] : fallback;
  }
  if (el && el !== fallback && el.tagName !== 'BUTTON') el = el.querySelector('button') || el;
  if (el) el.focus();
}

function isOperator() {
  return !!(S.me && S.me.roles.includes('operator'));
}

function toast(msg) {
  const t = $('toast');
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.textContent = ''; }, 6000);
}

/* A refusal or a failure stays on screen (role=alert) until dismissed or replaced: an
 * operator must be able to read the server's detail, not catch it in passing. */
function showAlert(msg) {
  $('alert-text').textContent = msg;
  $('alert').hidden = false;
}

function hideAlert() {
  $('alert').hidden = true;
  $('alert-text').textContent = '';
}

/* What went wrong, for a person: the status, the problem code and the server's detail
 * (problem+json), or that boardd did not answer at all. */
function problemText(e) {
  if (!(e instanceof ApiError)) return 'Failed: ' + (e && e.message ? e.message : String(e));
  if (e.status === 0) return 'Failed: ' + e.message;
  const code = e.problem.code ? ' ' + e.problem.code : '';
  const verb = e.status >= 500 ? 'Failed' : 'Refused';
  const hint = e.status >= 500 ? ' Nothing was changed by this answer; try again in a moment.' : '';
  return verb + ' (' + e.status + code + '): ' + e.message + hint;
}

/* The banner over the board, for a state of the page (the board is gone, the address named
 * no board), with at most one action. */
function showNotice(text, action) {
  $('notice-text').textContent = text;
  $('notice-actions').replaceChildren(...(action ? [h('button', { type: 'button', id: 'notice-action', onclick: action.run }, action.label)] : []),
    h('button', { type: 'button', id: 'notice-close', onclick: hideNotice }, 'Dismiss'));
  $('notice').hidden = false;
}

function hideNotice() {
  $('notice').hidden = true;
  $('notice-text').textContent = '';
  $('notice-actions').replaceChildren();
}

/* ---- the API ---- */

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || ('HTTP ' + status));
    this.status = status;
    this.problem = problem || {};
  }
}

async function api(method, path, body) {
  const headers = { Authorization: 'Bearer ' + S.token };
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, { detail: 'boardd did not answer (' + (e && e.message ? e.message : 'network error') + '); nothing is known to have changed.' });
  }
  if (resp.status === 204) return null;
  let data = null;
  const text = await resp.text();
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = null; }
  }
  if (!resp.ok) {
    if (resp.status === 401 && path !== '/v1/whoami') signOut('The token was refused (401).');
    throw new ApiError(resp.status, data);
  }
  return data;
}

const enc = encodeURIComponent;

async function allCards(board) {
  const out = [];
  let after = null;
  for (let page = 0; page < 100; page++) {
    const q = '/v1/cards?board=' + enc(board) + '&limit=1000' + (after ? '&after=' + enc(after) : '');
    const r = await api('GET', q);
    out.push(...r.cards);
    if (!r.next) break;
    after = r.next;
  }
  return out;
}

/* ---- sign in / out ---- */

async function signIn(token) {
  S.token = token;
  try {
    S.me = await api('GET', '/v1/whoami');
  } catch (e) {
    S.token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    $('login-error').textContent = e.status === 401 ? 'That token is not valid.' : 'Sign-in failed: ' + e.message;
    showLogin();
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $('login').hidden = true;
  $('app').hidden = false;
  $('session').hidden = false;
  $('whoami').textContent = S.me.name + ' (' + S.me.roles.join(', ') + ')';
  $('readonly').hidden = isOperator();
  $('bulk').hidden = !isOperator();
  $('reaper-pass').hidden = !isOperator();
  hideNotice();
  hideAlert();
  try {
    await loadBoards();
  } catch (e) {
    showNotice('The boards could not be read: ' + problemText(e), { label: 'Try again', run: backToBoards });
  }
}

function signOut(why) {
  if (S.stream) S.stream.abort();
  S.stream = null;
  hideNotice();
  hideAlert();
  S.token = null;
  S.me = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $('login-error').textContent = why || '';
  showLogin();
}

function showLogin() {
  $('app').hidden = true;
  $('session').hidden = true;
  $('login').hidden = false;
  $('token').value = '';
  $('token').focus();
}

/* ---- loading ---- */

async function loadBoards() {
  const r = await api('GET', '/v1/boards');
  S.boards = r.boards || r;
  const sel = $('board-select');
  sel.replaceChildren(...S.boards.map((b) => h('option', { value: b.name, text: b.name })));
  const want = new URLSearchParams(location.hash.slice(1)).get('board');
  const pick = S.boards.find((b) => b.name === want) || S.boards.find((b) => b.name === 'default') || S.boards[0];
  if (!pick) {
    showNotice('This token sees no board.', null);
    return;
  }
  if (want && want !== pick.name) {
    showNotice('There is no board "' + want + '" (named in the address): showing board ' + pick.name + ' instead.', null);
    history.replaceState(null, '', '#board=' + enc(pick.name));
  }
  sel.value = pick.name;
  await openBoard(pick.name);
}

/* Back to the board list: re-read it and open the default board (the way out when the board
 * on screen is gone). */
async function backToBoards() {
  hideNotice();
  if (S.stream) S.stream.abort();
  S.stream = null;
  history.replaceState(null, '', location.pathname);
  try {
    await loadBoards();
  } catch (e) {
    showNotice('The boards could not be read: ' + problemText(e), { label: 'Try again', run: backToBoards });
  }
}

/* The board on screen does not exist (any more): stop following it and say so, with the way
 * back. `why`: the server's detail. */
function boardGone(name, why) {
  if (S.stream) S.stream.abort();
  S.stream = null;
  S.board = null; /* nothing re-reads it now: the lane and the cards stay as they were */
  setLive('refused', 'stopped: no board ' + name);
  showNotice('Board ' + name + ' does not exist (any more): ' + why + ' It was removed or renamed, or this server has another store; the cards shown are as they were. ',
    { label: 'Back to the board list', run: backToBoards });
}

async function openBoard(name) {
  if (S.stream) S.stream.abort();
  S.stream = null;
  try {
    S.board = await api('GET', '/v1/boards/' + enc(name));
  } catch (e) {
    if (e.status === 404) boardGone(name, e.message.replace(/\.?$/, '.'));
    else showNotice('Board ' + name + ' could not be opened: ' + problemText(e), { label: 'Back to the board list', run: backToBoards });
    return;
  }
  /* The tail first, then the cards: the stream resumes after that tail, so nothing written
   * while the cards load is missed (re-reading a card twice is harmless). */
  const tail = await tailSeq(name);
  S.cards = new Map((await allCards(name)).map((c) => [c.id, c]));
  S.lastId = tail;
  const sel = $('bulk-to');
  sel.replaceChildren(...workingColumns().map((c) => h('option', { value: c.name, text: c.name })));
  sel.value = firstEligible();
  await Promise.all([loadAttention(), loadReaper()]);
  renderLabels();
  renderBoard();
  startStream();
}

function columns() {
  return (S.board && (S.board.columns || S.board.cols)) || [];
}
function column(name) {
  return columns().find((c) => c.name === name);
}
function isTerminal(state) {
  const c = column(state);
  return !!(c && c.terminal);
}
function workingColumns() {
  return columns().filter((c) => !c.terminal);
}
function firstEligible() {
  const c = columns().find((x) => x.eligible);
  return c ? c.name : (workingColumns()[0] || {}).name;
}

async function loadAttention() {
  const r = await api('GET', '/v1/attention?board=' + enc(S.board.name));
  S.attention = new Map();
  S.attentionTruncated = !!r.truncated;
  for (const item of r.cards) {
    S.attention.set(item.card.id, item.reasons);
    S.cards.set(item.card.id, item.card);
  }
  renderAttention();
}

async function loadReaper() {
  try {
    S.reaper = await api('GET', '/v1/reaper');
  } catch (e) {
    S.reaper = { error: e.message };
  }
  renderReaper();
}

let attentionTimer = null;
function refreshAttentionSoon() {
  clearTimeout(attentionTimer);
  attentionTimer = setTimeout(() => { loadAttention().then(renderBoard).catch(() => {}); }, 250);
}

/* ---- the live stream ---- */

function setLive(state, text) {
  const el = $('live');
  el.className = 'live ' + state;
  el.textContent = text;
}

function startStream() {
  const ctl = new AbortController();
  S.stream = ctl;
  let delay = 500;
  let dropped = false;
  const board = S.board.name;
  const run = async () => {
    while (!ctl.signal.aborted) {
      try {
        if (dropped && !(await boardStillThere(board, ctl))) return;
        const headers = { Authorization: 'Bearer ' + S.token, Accept: 'text/event-stream' };
        if (S.lastId !== null) headers['Last-Event-ID'] = String(S.lastId);
        const resp = await fetch('/v1/events/stream?board=' + enc(board),
          { headers, signal: ctl.signal, cache: 'no-store' });
        if (resp.status === 401 || resp.status === 403) {
          /* A refusal is not a network error: retrying cannot help until the token changes,
           * so stop and say why (a new sign-in or board choice starts a new stream). */
          const why = await problemDetail(resp);
          if (ctl.signal.aborted) return;
          if (resp.status === 401) {
            signOut('The token was refused (401): ' + why + ' Sign in again with a valid token.');
          } else {
            setLive('refused', 'Live updates stopped: the token was refused (403): ' + why +
              ' Check the token\'s role and boards, or sign in with another token.');
          }
          return;
        }
        if (resp.status === 404) {
          /* Not a network error either: the board (or the stream route) is not there, and
           * asking again will not bring it back. */
          const why = await problemDetail(resp);
          if (ctl.signal.aborted) return;
          if (await boardStillThere(board, ctl)) {
            if (ctl.signal.aborted) return;
            setLive('refused', 'Live updates stopped: the event stream answered 404 (' + why.replace(/\.$/, '') +
              '). This server does not serve it; the board is not updated live.');
            S.stream = null;
          }
          return;
        }
        if (!resp.ok || !resp.body) throw new Error('HTTP ' + resp.status);
        setLive('on', 'live');
        delay = 500;
        await readSSE(resp.body, ctl.signal, onEvent);
      } catch (e) {
        if (ctl.signal.aborted) return;
      }
      dropped = true;
      setLive('off', 'reconnecting');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  };
  run();
}

/* Before following a board again after a drop (a restart may bring up another store), and
 * when its stream answers 404: is the board still there? A 404 stops the stream and says so
 * (boardGone); any other failure counts as "still there" (the stream's own retry goes on). */
async function boardStillThere(name, ctl) {
  try {
    await api('GET', '/v1/boards/' + enc(name));
    return true;
  } catch (e) {
    if (e.status !== 404 || ctl.signal.aborted) return true;
    boardGone(name, e.message.replace(/\.?$/, '.'));
    return false;
  }
}

/* The problem+json detail (or title) of a refused answer, for the operator to read. */
async function problemDetail(resp) {
  let p = null;
  try { p = JSON.parse(await resp.text()); } catch (e) { p = null; }
  const d = p && (p.detail || p.title);
  return typeof d === 'string' && d ? d.replace(/\.?$/, '.') : 'HTTP ' + resp.status + '.';
}

/* The seq of the board's newest event: where a stream that follows a freshly loaded board
 * starts. Found by galloping and bisection over `after` with limit=1 (is there an event of
 * this board after a?), about 2 log2(seq) tiny requests, however long the audit tail is. */
async function firstAfter(board, a) {
  const r = await api('GET', '/v1/events?board=' + enc(board) + '&after=' + a + '&limit=1');
  return r.events.length ? r.events[0].seq : null;
}

async function tailSeq(board) {
  let lo = await firstAfter(board, 0);
  if (lo === null) return 0;
  let step = 1024;
  let hi;
  for (;;) {
    const s = await firstAfter(board, lo + step);
    if (s === null) { hi = lo + step; break; }
    lo = s;
    step *= 2;
  }
  /* an event of the board at lo, none after hi */
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    const s = await firstAfter(board, mid);
    if (s === null) hi = mid;
    else lo = s;
  }
  const last = await firstAfter(board, lo);
  return last === null ? lo : last;
}

async function readSSE(body, signal, onMessage) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let ev = { id: null, event: 'message', data: [] };
  while (!signal.aborted) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (ev.data.length) onMessage(ev);
        ev = { id: null, event: 'message', data: [] };
      } else if (line.startsWith(':')) {
        /* a heartbeat comment */
      } else {
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'id') ev.id = val;
        else if (field === 'event') ev.event = val;
        else if (field === 'data') ev.data.push(val);
      }
    }
  }
}

function onEvent(msg) {
  let e;
  try { e = JSON.parse(msg.data.join('\n')); } catch (x) { return; }
  if (msg.id !== null) S.lastId = Number(msg.id);
  if (!S.board || e.board !== S.board.name) return;
  if (e.type === 'board_updated') { openBoard(S.board.name); return; }
  if (e.card_id) refreshCard(e.card_id, e.type === 'card_deleted');
  refreshAttentionSoon();
  if (S.openCard && S.openCard === e.card_id) refreshOpenCard();
}

/* One re-render of the open card at a time; events during it ask for one more after it. */
let cardRender = null;
let cardAgain = false;
function refreshOpenCard() {
  if (cardRender) {
    cardAgain = true;
    return;
  }
  cardRender = renderCardDialog(S.openCard, false).finally(() => {
    cardRender = null;
    if (cardAgain && S.openCard) {
      cardAgain = false;
      refreshOpenCard();
    }
  });
}

/* Cards named by events are re-read in batches: a burst of events on one card costs one
 * read, and the board is drawn once per batch. */
const pendingCards = new Map(); // id -> deleted?
let pendingTimer = null;

function refreshCard(id, deleted) {
  pendingCards.set(id, !!deleted); /* the last event on a card decides */
  if (!pendingTimer) pendingTimer = setTimeout(flushCards, 100);
}

async function flushCards() {
  const batch = [...pendingCards.entries()];
  pendingCards.clear();
  pendingTimer = null;
  await Promise.all(batch.map(async ([id, deleted]) => {
    if (deleted) {
      S.cards.delete(id);
      return;
    }
    try {
      S.cards.set(id, await api('GET', '/v1/cards/' + enc(id)));
    } catch (e) {
      if (e.status === 404) S.cards.delete(id);
    }
  }));
  renderLabels();
  renderBoard();
}

/* ---- filters ---- */

function filterState() {
  return {
    text: $('f-text').value.trim().toLowerCase(),
    label: $('f-label').value,
    claimed: $('f-claimed').value,
  };
}

function matches(c, f) {
  if (f.text && !(c.id.toLowerCase().includes(f.text) || (c.title || '').toLowerCase().includes(f.text))) return false;
  if (f.label && !(c.labels || []).includes(f.label)) return false;
  if (f.claimed === '1' && !c.claim) return false;
  if (f.claimed === '0' && c.claim) return false;
  return true;
}

function filtered() {
  const f = filterState();
  return [...S.cards.values()].filter((c) => matches(c, f));
}

function renderLabels() {
  const sel = $('f-label');
  const cur = sel.value;
  const all = new Set();
  for (const c of S.cards.values()) for (const l of c.labels || []) all.add(l);
  sel.replaceChildren(h('option', { value: '', text: 'any' }),
    ...[...all].sort().map((l) => h('option', { value: l, text: l })));
  sel.value = all.has(cur) ? cur : '';
}

/* ---- rendering: the board ---- */

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

/* Chips are drawn again only when their card or its reasons changed: a live update on a board
 * of thousands of cards rebuilt every chip (about 0.2 to 0.6 s at 3000 cards, twice per
 * event). id -> {key, el}; entries of cards no longer drawn are dropped at each render. */
const chipCache = new Map();

function cachedChip(c) {
  const reasons = S.attention.get(c.id);
  const key = JSON.stringify(c) + '\u0000' + (reasons ? reasons.join(',') : '') + '\u0000' + isOperator();
  const hit = chipCache.get(c.id);
  if (hit && hit.key === key) return hit.el;
  const el = chip(c);
  chipCache.set(c.id, { key, el });
  return el;
}

function chip(c) {
  const reasons = S.attention.get(c.id);
  const meta = [];
  if (c.priority !== undefined && c.priority !== 0) meta.push(h('span', { class: 'tag prio', text: 'p' + c.priority }));
  if (c.claim) {
    const who = c.claim.holder ? c.claim.marker + ' (' + c.claim.holder + ')' : c.claim.marker;
    meta.push(h('span', { class: 'tag holder', title: 'claimed by marker (token), epoch', text: '⚑ ' + who + ' · e' + c.claim_epoch }));
    meta.push(leaseTag(c.claim));
  } else if (c.claim_epoch) {
    meta.push(h('span', { class: 'tag', title: 'claim epoch', text: 'epoch ' + c.claim_epoch }));
  }
  for (const l of c.labels || []) meta.push(h('span', { class: 'tag', text: l }));
  if ((c.blockers || []).length) meta.push(h('span', { class: 'tag blk', title: 'blocked by ' + c.blockers.join(', '), text: 'blocked by ' + c.blockers.join(', ') }));
  /* A stamp the card was since moved out of (a reopen answered it) is history, not a reason. */
  if (c.gave_up) {
    const live = !!(reasons && reasons.includes('gave_up'));
    meta.push(h('span', { class: live ? 'reason' : 'tag old', title: live ? null : 'an earlier give-up, answered since', text: (live ? 'gave up: ' : 'gave up earlier: ') + c.gave_up.reason }));
  }
  const label = (c.title || c.id) + ', ' + c.state + (reasons ? ', needs attention: ' + reasons.join(', ') : '');
  return h('li', {},
    h('button', { type: 'button', class: 'chip' + (reasons ? ' attn' : ''), 'data-card': c.id, 'aria-label': label, onclick: () => openCardDialog(c.id) },
      h('span', { class: 'title', text: c.title || '(untitled)' }),
      h('span', { class: 'id', text: c.id }),
      meta.length ? h('span', { class: 'meta' }, meta) : null));
}

/* Does parent hold exactly these elements, in this order? */
function holds(parent, els) {
  const kids = parent.children;
  if (kids.length !== els.length) return false;
  for (let i = 0; i < els.length; i++) if (kids[i] !== els[i]) return false;
  return true;
}

/* A name as text nodes with a line-break chance after each underscore (<wbr>), so a narrow
 * column header wraps "awaiting_input" as "awaiting_" / "input", not inside a word. */
function breakable(name) {
  return name.split('_').flatMap((part, i, all) => i < all.length - 1 ? [part + '_', h('wbr', {})] : [part]);
}

/* A column's section, kept from render to render (name -> {section, count, ul}): only what
 * changed is put into the page, so a live update does not lay the whole board out again. */
const columnCache = new Map();

function columnSection(name, col, n) {
  let e = columnCache.get(name);
  if (!e) {
    const count = h('span', { class: 'count' });
    const ul = h('ul', {});
    e = { section: h('section', { 'data-column': name, 'aria-label': 'Column ' + name }, h('h2', {}, h('span', {}, breakable(name)), count), ul), count, ul };
    columnCache.set(name, e);
  }
  e.section.className = 'column' + (col.terminal ? ' terminal' : '');
  if (e.count.textContent !== String(n)) e.count.textContent = String(n);
  return e;
}

function renderBoard() {
  if (!S.board) return;
  const list = filtered();
  $('f-count').textContent = list.length + ' of ' + S.cards.size + ' cards match';
  const byState = new Map(columns().map((c) => [c.name, []]));
  for (const c of list) {
    if (!byState.has(c.state)) byState.set(c.state, []);
    byState.get(c.state).push(c);
  }
  const cols = [];
  const fills = [];
  for (const [name, cards] of byState) {
    const col = column(name) || { name };
    cards.sort((a, b) => (b.priority || 0) - (a.priority || 0) || a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
    const e = columnSection(name, col, cards.length);
    const lis = cards.map(cachedChip);
    if (!holds(e.ul, lis)) fills.push([e.ul, lis]);
    cols.push(e.section);
  }
  const drawn = new Set(list.map((c) => c.id));
  for (const id of chipCache.keys()) if (!drawn.has(id)) chipCache.delete(id);
  for (const name of columnCache.keys()) if (!byState.has(name)) columnCache.delete(name);
  if (!fills.length && holds($('board'), cols)) return;
  keepFocus($('board'), () => {
    for (const [ul, lis] of fills) ul.replaceChildren(...lis);
    if (!holds($('board'), cols)) $('board').replaceChildren(...cols);
  }, $('board'));
}

/* ---- rendering: the attention lane ---- */

function actionsFor(c, reasons) {
  if (!isOperator()) return [];
  const out = [];
  if (isTerminal(c.state)) {
    out.push(h('button', { type: 'button', class: 'primary', 'data-action': 'reopen', onclick: () => openReopen(c.id) }, 'Reopen…'));
    out.push(h('button', { type: 'button', 'data-action': 'requeue', onclick: () => act(() => requeue(c), 'Re-queued ' + c.id) }, 'Re-queue'));
  }
  if (reasons.includes('awaiting_input')) out.push(h('button', { type: 'button', 'data-action': 'answer', onclick: () => openCardDialog(c.id, true) }, 'Answer…'));
  if (c.claim) out.push(h('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: () => act(() => revoke(c.id), 'Revoked the claim on ' + c.id) }, 'Revoke claim'));
  if (c.last_run_id && (reasons.includes('run_paused') || reasons.includes('run_failed'))) {
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

function renderAttention() {
  const items = [...S.attention.entries()].map(([id, reasons]) => [S.cards.get(id), reasons]).filter(([c]) => c);
  $('attention-count').textContent = '(' + items.length + (S.attentionTruncated ? ': the newest shown, more need attention' : '') + ')';
  const render = () => $('attention-list').replaceChildren(...(items.length ? items.map(([c, reasons]) => h('li', { 'data-card': c.id },
    h('button', { type: 'button', class: 'open', onclick: () => openCardDialog(c.id), 'aria-label': 'Open ' + (c.title || c.id) }, c.title || c.id),
    h('span', { class: 'id muted', text: c.id + ' · ' + c.state }),
    reasons.map((r) => {
      const d = reasonDetail(c, r);
      return h('span', { class: 'reason', 'data-reason': r }, r, d ? h('span', { class: 'why', text: ': ' + d }) : null);
    }),
    h('span', { class: 'actions' }, actionsFor(c, reasons)))) : [h('li', { class: 'attn-empty', text: 'Nothing needs an operator.' })]));
  keepFocus($('attention-list'), render, $('attention-title'));
}

/* ---- rendering: the reaper ---- */

function renderReaper() {
  const r = S.reaper || {};
  const rows = [];
  const add = (k, v) => rows.push(h('dt', { text: k }), h('dd', { text: v }));
  if (r.error) add('status', r.error);
  if (r.gate) add('gate', r.gate);
  if (r.interval_ms !== undefined) add('interval', Math.round(r.interval_ms / 1000) + ' s');
  if (r.marker) add('marker', r.marker);
  if (r.passes !== undefined) add('passes', String(r.passes));
  const last = r.last_pass || null;
  if (last) {
    add('last pass', 'gate ' + last.gate);
    for (const k of ['listed', 'transferred', 'skipped', 'errors', 'repaired', 'duration_ms']) if (last[k] !== undefined) add(k, String(last[k]));
    if (last.actions) add('actions', Object.entries(last.actions).map(([k, v]) => k + ' ' + v).join(', '));
  } else if (!r.error) {
    add('last pass', 'none yet');
  }
  $('reaper-stats').replaceChildren(...rows);
}

/* ---- actions ---- */

async function act(fn, done) {
  try {
    await fn();
    hideAlert();
    toast(done);
  } catch (e) {
    showAlert(problemText(e));
  }
  refreshAttentionSoon();
}

function revoke(id) {
  return api('POST', '/v1/cards/' + enc(id) + '/claim/revoke');
}

/* Back to the dispatch pool: a terminal card is reopened to the first eligible column, a
 * working card is moved there (compare-and-swap on the column it is in). */
function requeue(c) {
  const to = firstEligible();
  if (isTerminal(c.state)) return api('POST', '/v1/cards/' + enc(c.id) + '/reopen', { to, reason: 'requeue' });
  return api('PATCH', '/v1/cards/' + enc(c.id) + '/state', { from: c.state, to });
}

function openReopen(id) {
  const c = S.cards.get(id);
  const d = $('reopen-dialog');
  d.dataset.card = id;
  $('reopen-what').textContent = (c ? (c.title || id) + ' (' + id + ') is in ' + c.state : id) + '. Choose the working column it goes back to.';
  $('reopen-to').replaceChildren(...workingColumns().map((col) => h('option', { value: col.name, text: col.name })));
  $('reopen-to').value = firstEligible();
  $('reopen-reason').value = '';
  $('reopen-error').replaceChildren();
  if (!d.open) d.showModal();
  $('reopen-to').focus();
}

async function submitReopen(ev) {
  ev.preventDefault();
  const d = $('reopen-dialog');
  const id = d.dataset.card;
  const body = { to: $('reopen-to').value };
  if ($('reopen-reason').value.trim()) body.reason = $('reopen-reason').value.trim();
  try {
    const card = await api('POST', '/v1/cards/' + enc(id) + '/reopen', body);
    S.cards.set(id, card);
    d.close();
    toast('Reopened ' + id + ' to ' + body.to);
    renderBoard();
    refreshAttentionSoon();
  } catch (e) {
    const err = $('reopen-error');
    err.replaceChildren(h('p', { text: problemText(e) }));
    if (e.problem && e.problem.code === 'dependents_outstanding') {
      const deps = await dependents(id).catch(() => []);
      err.append(h('p', { text: 'These cards are blocked on it and have already moved on:' }),
        h('ul', { class: 'deps' }, deps.map((c) => h('li', { 'data-dependent': c.id, text: c.id + ' — ' + (c.title || '') + ' (' + c.state + ')' }))));
    }
  }
}

/* The cards that list id as a blocker and are outside the waiting column: what refuses a
 * reopen out of done (DESIGN §4). Read fresh from /v1/cards. */
async function dependents(id) {
  const waiting = (S.board && S.board.waiting) || 'waiting_deps';
  const cards = await allCards(S.board.name);
  return cards.filter((c) => (c.blockers || []).includes(id) && c.state !== waiting);
}

/* ---- bulk actions over the current filter ---- */

function bulkTargets() {
  const action = $('bulk-action').value;
  return filtered().filter((c) => {
    if (action === 'revoke') return !!c.claim;
    return isTerminal(c.state);
  }).sort((a, b) => a.id.localeCompare(b.id));
}

function bulkCap() {
  const n = parseInt($('bulk-cap').value, 10);
  return Math.max(1, Math.min(BULK_CAP_MAX, Number.isFinite(n) ? n : 50));
}

function bulkPreview() {
  const all = bulkTargets();
  const cap = bulkCap();
  S.bulkPlan = { action: $('bulk-action').value, to: $('bulk-to').value, ids: all.slice(0, cap).map((c) => c.id) };
  $('bulk-out').textContent = all.length + ' card(s) in the current filter qualify; ' + S.bulkPlan.ids.length +
    ' will be acted on (cap ' + cap + ').';
  $('bulk-apply').disabled = S.bulkPlan.ids.length === 0;
}

async function bulkApply() {
  const plan = S.bulkPlan;
  if (!plan) return;
  $('bulk-apply').disabled = true;
  let ok = 0;
  const failed = [];
  for (const id of plan.ids) {
    const c = S.cards.get(id);
    if (!c) continue;
    try {
      if (plan.action === 'revoke') await revoke(id);
      else if (plan.action === 'reopen') await api('POST', '/v1/cards/' + enc(id) + '/reopen', { to: plan.to, reason: 'bulk' });
      else await requeue(c);
      ok++;
    } catch (e) {
      failed.push(id + ': ' + ((e.problem && e.problem.code) || e.message));
    }
  }
  S.bulkPlan = null;
  $('bulk-out').textContent = ok + ' done' + (failed.length ? ', ' + failed.length + ' refused (' + failed.slice(0, 5).join('; ') + (failed.length > 5 ? '; …' : '') + ')' : '') + '.';
  refreshAttentionSoon();
}

/* ---- the card dialog ---- */

function openCardDialog(id, focusComment) {
  S.openCard = id;
  S.focusComment = !!focusComment;
  const c = S.cards.get(id);
  /* Never show (or let anyone click) the previous card's content while this one loads. */
  $('card-title').textContent = c ? c.title || id : id;
  $('card-body').replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
  const d = $('card-dialog');
  if (!d.open) d.showModal();
  renderCardDialog(id, true);
}

function fieldList(pairs) {
  return h('dl', { class: 'fields' }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== '')
    .flatMap(([k, v]) => [h('dt', { text: k }), h('dd', {}, v instanceof Node ? v : String(v))]));
}

/* The card's events, read back from the tail in windows of 1000 seqs until its creation
 * (at most 20 windows: the timeline of an old card on a busy board is its recent part). */
async function cardTimeline(c) {
  const out = [];
  let hi = await tailSeq(c.board);
  for (let page = 0; page < 20 && hi > 0; page++) {
    const lo = Math.max(0, hi - 1000);
    const r = await api('GET', '/v1/events?board=' + enc(c.board) + '&after=' + lo + '&limit=1000');
    const mine = r.events.filter((e) => e.seq <= hi && e.card_id === c.id);
    out.unshift(...mine);
    if (mine.some((e) => e.type === 'card_created')) break;
    hi = lo;
  }
  return out;
}

/* Renders may overlap (the opening one and a live refresh): only the newest writes. */
let cardTicket = 0;

async function renderCardDialog(id, full) {
  const ticket = ++cardTicket;
  let c;
  try {
    c = await api('GET', '/v1/cards/' + enc(id));
  } catch (e) {
    if (ticket !== cardTicket) return;
    $('card-title').textContent = id;
    $('card-body').replaceChildren(h('p', { class: 'error', text: e.status === 404 ? 'This card is gone.' : e.message }));
    return;
  }
  S.cards.set(id, c);
  let run = null;
  let runErr = null;
  if (c.last_run_id) {
    try { run = await api('GET', '/v1/runs/' + enc(c.last_run_id)); } catch (e) { runErr = e.status === 404 ? 'pruned or gone' : e.message; }
  }
  const events = await cardTimeline(c).catch(() => []);
  if (S.openCard !== id || ticket !== cardTicket) return;
  const reasons = S.attention.get(id) || [];
  $('card-title').textContent = c.title || c.id;
  const parts = [
    fieldList([
      ['id', c.id], ['board', c.board], ['state', c.state], ['state reason', c.state_reason],
      ['priority', c.priority], ['labels', (c.labels || []).join(', ')], ['blockers', (c.blockers || []).join(', ')],
      ['claim epoch', c.claim_epoch], ['awaiting input', c.awaiting_input ? 'yes' : null],
      ['created', c.created_at], ['updated', c.updated_at],
      ['needs attention', reasons.length ? reasons.join(', ') : null],
    ]),
  ];
  if (c.body) parts.push(h('h3', { text: 'Body' }), h('p', { text: c.body }));
  parts.push(h('h3', { text: 'Claim' }), c.claim ? fieldList([
    ['marker', c.claim.marker], ['holder', c.claim.holder], ['epoch', c.claim_epoch],
    ['claimed at', c.claim.claimed_at], ['lease until', c.claim.lease_until], ['lease', leaseTag(c.claim)],
  ]) : h('p', { class: 'muted', text: 'Not claimed.' }));
  parts.push(h('h3', { text: 'Run' }));
  if (run) {
    /* The lane's rule (core_attention_reasons): while the card is claimed, only a run of that
     * claim is its current run. Say so when the recorded run is an earlier claim's. */
    const ofClaim = c.claim && run.claim_epoch === c.claim_epoch && run.owner === c.claim.marker;
    if (c.claim && !ofClaim) {
      parts.push(h('p', { class: 'muted', 'data-run-earlier': '', text: 'The recorded run is of an earlier claim' + (run.claim_epoch ? ' (epoch ' + run.claim_epoch + ')' : '') + ', not of the claim the card has now: it says nothing about the current holder.' }));
    } else if (!c.claim && ['paused_waiting_human', 'paused_operator'].includes(run.status)) {
      parts.push(h('p', { class: 'muted', 'data-run-earlier': '', text: 'The claim this paused run was created under is gone: the run holds nothing and its owner can no longer write it.' }));
    }
    parts.push(fieldList([
      ['id', run.id], ['status', run.status], ['claim epoch', run.claim_epoch], ['continuation', run.continuation], ['failure code', run.failure_code],
      ['owner', run.owner], ['lock until', run.lock_until], ['error', run.error],
      ['result', run.result !== undefined && run.result !== null ? h('pre', { class: 'json', text: JSON.stringify(run.result, null, 2) }) : null],
    ]));
  } else {
    parts.push(h('p', { class: 'muted', text: c.last_run_id ? 'Run ' + c.last_run_id + ': ' + runErr : 'No run recorded.' }));
  }
  if (c.gave_up) {
    parts.push(h('h3', { text: 'Gave up' }), fieldList([['reason', c.gave_up.reason], ['run', c.gave_up.run_id], ['in state', c.gave_up.state], ['at', c.gave_up.at]]));
  }
  if (isOperator()) {
    const btns = actionsFor(c, reasons);
    if (run && !['finished', 'failed', 'cancelled'].includes(run.status) && !btns.some((b) => b.dataset.action === 'cancel-run')) {
      btns.push(h('button', { type: 'button', 'data-action': 'cancel-run', onclick: () => act(() => api('POST', '/v1/runs/' + enc(run.id) + '/cancel'), 'Cancelled run ' + run.id) }, 'Cancel run'));
    }
    if (!isTerminal(c.state) && c.state !== firstEligible()) {
      btns.push(h('button', { type: 'button', 'data-action': 'requeue', onclick: () => act(() => requeue(c), 'Re-queued ' + c.id) }, 'Re-queue'));
    }
    if (btns.length) parts.push(h('div', { class: 'card-actions' }, btns));
  }
  parts.push(h('h3', { text: 'Comments (' + (c.comments || []).length + ')' }),
    h('ul', { class: 'comments' }, (c.comments || []).map((m) => h('li', {}, h('strong', { text: m.author || '?' }), ' ', h('span', { class: 'muted', text: m.created_at }), h('div', { text: m.body })))));
  if (isOperator()) {
    /* The answer to awaiting_input (and a note on any card): POST /v1/cards/{id}/comments. */
    parts.push(h('form', { id: 'comment-form', class: 'comment-form', onsubmit: (ev) => submitComment(ev, c.id) },
      h('label', { for: 'comment-body' }, 'Add a comment'),
      h('textarea', { id: 'comment-body', rows: 3, required: true }),
      h('div', { id: 'comment-error', class: 'error', role: 'alert' }),
      h('div', { class: 'buttons' }, h('button', { type: 'submit', id: 'comment-submit' }, 'Comment'))));
  }
  parts.push(h('h3', { text: 'Timeline' }),
    h('ol', { class: 'timeline' }, events.map((e) => h('li', {},
      h('span', { class: 'muted', text: e.at + ' ' }), h('strong', { text: e.type }),
      e.payload && e.payload.from ? ' ' + e.payload.from + ' → ' + e.payload.to : '',
      e.actor ? ' by ' + e.actor : (e.machine ? ' (machine)' : ''),
      e.reason ? ' — ' + e.reason : ''))));
  /* A live re-render must keep what the operator is typing and where the focus is. */
  const draft = $('comment-body');
  const keep = draft ? { value: draft.value, focused: document.activeElement === draft, at: draft.selectionStart } : null;
  const a = document.activeElement;
  const action = a && $('card-body').contains(a) && a.dataset ? a.dataset.action : null;
  $('card-body').replaceChildren(...parts);
  const box = $('comment-body');
  if (box && keep) {
    box.value = keep.value;
    if (keep.focused) {
      box.focus();
      box.setSelectionRange(keep.at, keep.at);
    }
  }
  if (action) {
    const el = $('card-body').querySelector('[data-action="' + action + '"]');
    if (el) el.focus();
  }
  if (box && S.focusComment) {
    S.focusComment = false;
    box.focus();
  }
}

async function submitComment(ev, id) {
  ev.preventDefault();
  const box = $('comment-body');
  const body = box.value.trim();
  if (!body) return;
  $('comment-submit').disabled = true;
  $('comment-error').textContent = '';
  try {
    await api('POST', '/v1/cards/' + enc(id) + '/comments', { body });
    box.value = '';
    toast('Comment added to ' + id);
  } catch (e) {
    if ($('comment-error')) $('comment-error').textContent = problemText(e);
  }
  if ($('comment-submit')) $('comment-submit').disabled = false;
  if (S.openCard === id) refreshOpenCard();
}

/* ---- wiring ---- */

function wire() {
  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    $('login-error').textContent = '';
    signIn($('token').value.trim());
  });
  $('logout').addEventListener('click', () => signOut(''));
  $('board-select').addEventListener('change', (ev) => {
    location.hash = 'board=' + enc(ev.target.value);
    hideNotice();
    openBoard(ev.target.value).catch((e) => showNotice('Board ' + ev.target.value + ' could not be opened: ' + problemText(e), { label: 'Back to the board list', run: backToBoards }));
  });
  for (const id of ['f-text', 'f-label', 'f-claimed']) $(id).addEventListener('input', () => { renderBoard(); $('bulk-apply').disabled = true; });
  $('filters').addEventListener('submit', (ev) => ev.preventDefault());
  $('bulk-preview').addEventListener('click', bulkPreview);
  $('bulk-apply').addEventListener('click', bulkApply);
  $('bulk-action').addEventListener('change', () => {
    $('bulk-apply').disabled = true;
    $('bulk-out').textContent = '';
    $('bulk-to-wrap').hidden = $('bulk-action').value !== 'reopen';
  });
  $('alert-close').addEventListener('click', hideAlert);
  $('reaper-pass').addEventListener('click', async () => {
    $('reaper-out').textContent = 'running…';
    try {
      const r = await api('POST', '/v1/reaper/pass');
      $('reaper-out').textContent = 'pass done: listed ' + r.listed + ', transferred ' + r.transferred + ', repaired ' + r.repaired + ' in ' + r.duration_ms + ' ms';
    } catch (e) {
      $('reaper-out').textContent = problemText(e);
    }
    loadReaper();
    refreshAttentionSoon();
  });
  $('reopen-form').addEventListener('submit', submitReopen);
  for (const b of document.querySelectorAll('[data-close]')) b.addEventListener('click', () => b.closest('dialog').close());
  $('card-dialog').addEventListener('close', () => { S.openCard = null; });
  setInterval(tickLeases, 1000);
  setInterval(() => { if (S.token && S.board) loadReaper(); }, 15000);
  /* Leases expire without an event: the lane is re-read now and then as well. */
  setInterval(() => { if (S.token && S.board) refreshAttentionSoon(); }, 10000);
}

document.addEventListener('DOMContentLoaded', () => {
  wire();
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) signIn(saved);
  else showLogin();
});
