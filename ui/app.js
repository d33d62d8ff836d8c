/* boardd's operator UI: plain JavaScript over the public /v1 API, nothing else.
 *
 * The token is entered once and kept in sessionStorage (never a cookie), sent as
 * Authorization: Bearer. Every action is an ordinary /v1 call, so the UI can do nothing the
 * token could not do with curl; an action is offered only where the token's role, caps and
 * boards let the server accept it (ACTIONS; the server refuses the rest anyway). Live
 * updates come from GET /v1/events/stream, read with fetch (EventSource cannot send a bearer
 * token) and resumed with Last-Event-ID. Text from the server is only ever set as
 * textContent.
 *
 * Five files, loaded in order, one global scope: app.js (this: the API, sign-in, loading,
 * filters, actions and the wiring), stream.js (the live stream), board.js (drawing the board, the
 * Needs-attention lane, the reaper panel; drag and drop and the keyboard on the board) and
 * card.js (the card view with its runs, the create/edit, reopen and bulk dialogs), charts.js
 * (the Activity panel's charts). */
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
  roving: null,      // id of the card whose chip is the board's one Tab stop
  reaperSeen: null,  // {passes, at, since}: when this page saw the reaper's pass count move
  runsRoute: null,   // GET /v1/cards/{id}/runs: null not asked yet, false absent (404/405)
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

/* What each action needs, as the server checks the route it calls (api/router.c, api/auth.c):
 * the operator role (the UI offers actions to operators only), the capability, and the
 * card's board in the token's scope (`board`: every board). GET /v1/whoami gives the token's
 * roles, caps and boards; the UI offers no action these would refuse (the server refuses it
 * anyway). */
const ACTIONS = {
  create: { cap: 'board.create' },  // POST /v1/cards, into a working column
  edit: { cap: 'board.create' },    // PATCH /v1/cards/{id}: title, body, priority, not_before
  label: { cap: 'board.label' },    // PATCH /v1/cards/{id}/labels
  move: { cap: 'board.move' },      // PATCH /v1/cards/{id}/state, to a working column
  comment: { cap: 'board.comment' }, // POST /v1/cards/{id}/comments
  reopen: {},                       // POST /v1/cards/{id}/reopen (the bulk re-queue and reopen)
  revoke: {},                       // POST /v1/cards/{id}/claim/revoke
  run: {},                          // POST /v1/runs/{id}/cancel, DELETE /v1/runs/{id}
  reaper: { board: '*' },           // POST /v1/reaper/pass: a pass spans every board
};

/* May this token do `action` on `board`? */
function may(action, board) {
  const rule = ACTIONS[action];
  if (!rule || !isOperator()) return false;
  if (rule.cap && !(S.me.caps || []).includes(rule.cap)) return false;
  const boards = S.me.boards || [];
  return boards.includes('*') || (rule.board !== '*' && boards.includes(board));
}

/* Re-queue is a reopen of a terminal card, a move of a working one (requeue). */
function mayRequeue(c) {
  return isTerminal(c.state) ? may('reopen', c.board) : may('move', c.board);
}

/* Edit shows the fields the token may change (openEdit). */
function mayEdit(c) {
  return may('edit', c.board) || may('label', c.board);
}

/* The page's own actions, for the board on screen (none without one). */
function showAllowed() {
  const b = S.board ? S.board.name : null;
  $('new-card').hidden = !(b && may('create', b));
  $('bulk-toggle').hidden = !(b && may('reopen', b) && may('revoke', b));
  $('reaper-pass').hidden = !may('reaper', b);
  if ($('bulk-toggle').hidden) setBulkOpen(false);
}

/* The capabilities of ACTIONS this operator's token lacks. */
function missingCaps() {
  const caps = new Set(Object.values(ACTIONS).map((r) => r.cap).filter(Boolean));
  return [...caps].filter((c) => !(S.me.caps || []).includes(c)).sort();
}

function toast(msg) {
  const t = $('toast');
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.textContent = ''; }, 6000);
}

/* A refusal or a failure stays on screen (role=alert) until dismissed or replaced: an
 * operator must be able to read the server's detail, not catch it in passing. While a modal
 * dialog is open the rest of the page is inert (not clickable, not announced), so the alert
 * is shown inside the topmost one and goes back to the page when hidden or when that dialog
 * closes (placeAlert). */
function showAlert(msg) {
  placeAlert();
  $('alert-text').textContent = msg;
  $('alert').hidden = false;
}

function hideAlert() {
  const a = $('alert');
  const host = a.closest('dialog');
  const focused = a.contains(document.activeElement);
  a.hidden = true;
  $('alert-text').textContent = '';
  document.querySelector('main').append(a);
  /* Dismissed from the keyboard inside a dialog: the focus stays in that dialog. */
  if (focused && host && host.open) (host.querySelector('.close') || host.querySelector('input, select, textarea, button') || host).focus();
}

/* The modal dialogs open, in the order they were opened (the last is on top). */
const modals = [];

function placeAlert() {
  /* A dialog closed a moment ago is still listed until its close event (a task later). */
  const open = modals.filter((d) => d.open);
  const top = open.length ? open[open.length - 1] : null;
  const a = $('alert');
  if (top) {
    if (a.parentNode !== top) top.append(a);
  } else if (a.closest('dialog')) {
    document.querySelector('main').append(a);
  }
}

/* What went wrong, for a person: the status, the problem code and the server's detail
 * (problem+json), or that boardd did not answer at all. */
function problemText(e) {
  if (!(e instanceof ApiError)) return 'Failed: ' + (e && e.message ? e.message : String(e));
  if (e.status === 0) return 'Failed: ' + e.message;
  const code = e.problem.code ? ' ' + e.problem.code : '';
  const verb = e.status >= 500 ? 'Failed' : 'Refused';
  const title = typeof e.problem.title === 'string' && e.problem.title && e.problem.title !== e.message ? e.problem.title + ': ' : '';
  let hint = e.status >= 500 ? ' Nothing was changed by this answer; try again in a moment.' : '';
  if (e.problem.code === 'terminal_state_exit') hint = ' A card leaves a terminal column by Reopen.';
  return verb + ' (' + e.status + code + '): ' + title + e.message.replace(/([^.!?])$/, '$1.') + hint;
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
  const token = S.token;
  const headers = { Authorization: 'Bearer ' + token };
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
    /* A request of a session already signed out says nothing about the current one. */
    if (resp.status === 401 && path !== '/v1/whoami' && token === S.token) signOut('The token was refused (401).');
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
  const missing = isOperator() ? missingCaps() : [];
  $('limited').hidden = !missing.length;
  $('limited').textContent = 'Limited: this token lacks ' + missing.join(', ') + ', so the board offers no action that needs ' +
    (missing.length === 1 ? 'it' : 'one of them') + ' (the server would refuse those too).';
  showAllowed();
  hideNotice();
  hideAlert();
  setLive('', 'connecting');
  try {
    await loadBoards();
  } catch (e) {
    showNotice('The boards could not be read: ' + problemText(e), { label: 'Try again', run: backToBoards });
  }
}

function signOut(why) {
  clearBoard();
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
    clearBoard();
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

/* Forgets the board on screen and draws nothing in its place (signed out, or no board to
 * show): its cards, lane, reaper and activity figures and live badge must not stay for the
 * next token to see. Stops its stream and any board still loading. */
function clearBoard() {
  boardTicket++;
  if (S.stream) S.stream.abort();
  S.stream = null;
  clearTimeout(attentionTimer);
  dropPendingCards();
  for (const d of [...modals].reverse()) d.close();
  S.board = null;
  S.cards = new Map();
  S.attention = new Map();
  S.attentionTruncated = false;
  S.reaper = null;
  S.reaperSeen = null;
  S.activity = null;
  S.lastId = null;
  S.openCard = null;
  S.roving = null;
  S.rovingEl = null;
  chipCache.clear();
  columnCache.clear();
  $('board').replaceChildren();
  $('f-count').textContent = '';
  renderLabels();
  renderAttention();
  $('attention-count').textContent = '';
  $('reaper-stats').replaceChildren();
  $('reaper-summary').textContent = '';
  $('reaper-out').textContent = '';
  $('reaper-toggle').classList.remove('warn');
  $('activity-summary').textContent = '';
  $('activity-toggle').classList.remove('warn');
  $('activity-charts').replaceChildren();
  showAllowed();
  $('bulk-out').textContent = '';
  setLive('', 'no board');
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
  showAllowed();
  setLive('refused', 'stopped: no board ' + name);
  showNotice('Board ' + name + ' does not exist (any more): ' + why + ' It was removed or renamed, or this server has another store; the cards shown are as they were. ',
    { label: 'Back to the board list', run: backToBoards });
}

/* Board openings may overlap (a board chosen while the previous choice still loads): only
 * the newest one writes; an older one drops what it read and opens no stream. */
let boardTicket = 0;

async function openBoard(name) {
  const ticket = ++boardTicket;
  if (S.stream) S.stream.abort();
  S.stream = null;
  let board;
  try {
    board = await api('GET', '/v1/boards/' + enc(name));
  } catch (e) {
    if (ticket !== boardTicket) return;
    if (e.status === 404) boardGone(name, e.message.replace(/\.?$/, '.'));
    else showNotice('Board ' + name + ' could not be opened: ' + problemText(e), { label: 'Back to the board list', run: backToBoards });
    return;
  }
  /* The tail first, then the cards: the stream resumes after that tail, so nothing written
   * while the cards load is missed (re-reading a card twice is harmless). */
  let tail;
  let cards;
  try {
    tail = await tailSeq(name);
    cards = await allCards(name);
  } catch (e) {
    if (ticket !== boardTicket) return;
    throw e;
  }
  if (ticket !== boardTicket) return;
  S.board = board;
  showAllowed();
  S.cards = new Map(cards.map((c) => [c.id, c]));
  S.lastId = tail;
  const sel = $('bulk-to');
  sel.replaceChildren(...workingColumns().map((c) => h('option', { value: c.name, text: c.name })));
  sel.value = firstEligible();
  const st = $('f-state');
  const cur = st.value;
  st.replaceChildren(h('option', { value: '', text: 'any' }), ...columns().map((c) => h('option', { value: c.name, text: c.name })));
  st.value = column(cur) ? cur : '';
  await Promise.all([loadAttention(), loadReaper(), loadActivity()]);
  if (ticket !== boardTicket) return;
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
  const board = S.board;
  if (!board) return;
  const r = await api('GET', '/v1/attention?board=' + enc(board.name));
  if (S.board !== board) return; /* another board (or none) opened meanwhile */
  S.attention = new Map();
  S.attentionTruncated = !!r.truncated;
  for (const item of r.cards) {
    S.attention.set(item.card.id, item.reasons);
    /* The same card read again stays the same object: the chip cache goes by identity. */
    const old = S.cards.get(item.card.id);
    if (!old || JSON.stringify(old) !== JSON.stringify(item.card)) S.cards.set(item.card.id, item.card);
  }
  renderAttention();
}

async function loadReaper() {
  try {
    S.reaper = await api('GET', '/v1/reaper');
    noteReaperPasses(S.reaper, Date.now());
  } catch (e) {
    S.reaper = { error: e.message };
  }
  renderReaper();
}

/* GET /v1/reaper says how many passes ran, not when the last one did: the page notes when it
 * saw the count move (between two reads), which is when a pass last ended, give or take one
 * poll. `since`: when this page started watching. */
function noteReaperPasses(r, now) {
  const seen = S.reaperSeen;
  if (typeof r.passes !== 'number') return;
  if (!seen) {
    S.reaperSeen = { passes: r.passes, at: null, prev: now, since: now };
    return;
  }
  if (r.passes !== seen.passes) {
    seen.passes = r.passes;
    seen.at = now;
    seen.after = seen.prev;
  }
  seen.prev = now;
}

let attentionTimer = null;
function refreshAttentionSoon() {
  clearTimeout(attentionTimer);
  attentionTimer = setTimeout(() => { loadAttention().then(renderBoard).catch(() => {}); }, 250);
}

/* ---- filters ---- */

/* One filter for the board, the lane and the bulk actions: text over id, title and holder,
 * the column, a label, the holder (claimed, unclaimed or one marker); and one sort. */
function filterState() {
  return {
    text: $('f-text').value.trim().toLowerCase(),
    state: $('f-state').value,
    label: $('f-label').value,
    holder: $('f-holder').value,
    sort: $('f-sort').value,
  };
}

function filterActive(f) {
  return !!(f.text || f.state || f.label || f.holder);
}

function matches(c, f) {
  if (f.state && c.state !== f.state) return false;
  if (f.label && !(c.labels || []).includes(f.label)) return false;
  if (f.holder === '*' && !c.claim) return false;
  if (f.holder === '-' && c.claim) return false;
  if (f.holder.startsWith('m:') && !(c.claim && c.claim.marker === f.holder.slice(2))) return false;
  if (f.text) {
    const cl = c.claim || {};
    const hay = [c.id, c.title || '', cl.marker || '', cl.holder || ''];
    if (!hay.some((t) => t.toLowerCase().includes(f.text))) return false;
  }
  return true;
}

function filtered() {
  const f = filterState();
  return [...S.cards.values()].filter((c) => matches(c, f));
}

const byStr = (x, y) => (x < y ? -1 : x > y ? 1 : 0);

/* The comparator of a sort: priority (highest first, then the oldest: claim-next's order),
 * age either way, or the longest in its column first. Ties by id. */
function sorter(sort) {
  if (sort === 'oldest') return (a, b) => byStr(a.created_at, b.created_at) || byStr(a.id, b.id);
  if (sort === 'newest') return (a, b) => byStr(b.created_at, a.created_at) || byStr(a.id, b.id);
  if (sort === 'column') return (a, b) => byStr(a.state_at || a.updated_at, b.state_at || b.updated_at) || byStr(a.id, b.id);
  return (a, b) => (b.priority || 0) - (a.priority || 0) || byStr(a.created_at, b.created_at) || byStr(a.id, b.id);
}

/* The label and holder choices, from the cards loaded (a choice that is gone falls back to
 * any). */
function renderLabels() {
  const labels = new Set();
  const markers = new Set();
  for (const c of S.cards.values()) {
    for (const l of c.labels || []) labels.add(l);
    if (c.claim) markers.add(c.claim.marker);
  }
  const sel = $('f-label');
  const cur = sel.value;
  const want = ['', ...[...labels].sort()];
  if (!sameOptions(sel, want)) {
    sel.replaceChildren(...want.map((l) => h('option', { value: l, text: l || 'any' })));
    sel.value = labels.has(cur) ? cur : '';
  }
  const hs = $('f-holder');
  const hcur = hs.value;
  const hwant = ['', '*', '-', ...[...markers].sort().map((m) => 'm:' + m)];
  if (!sameOptions(hs, hwant)) {
    const names = { '': 'any', '*': 'claimed', '-': 'unclaimed' };
    hs.replaceChildren(...hwant.map((v) => h('option', { value: v, text: names[v] !== undefined ? names[v] : v.slice(2) })));
    hs.value = hwant.includes(hcur) ? hcur : '';
  }
}

function sameOptions(sel, values) {
  const o = sel.options;
  if (o.length !== values.length) return false;
  for (let i = 0; i < o.length; i++) if (o[i].value !== values[i]) return false;
  return true;
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

/* Moves a card to another working column: PATCH state, a compare-and-swap on the column the
 * board shows it in, so the server's rules decide (a terminal card is refused: it leaves by
 * Reopen; a stale board is refused too). A refusal shows its problem detail; the focus stays
 * on the card's chip, wherever it now is. */
async function moveCard(id, to) {
  const c = S.cards.get(id);
  if (!c || c.state === to) return;
  try {
    const card = await api('PATCH', '/v1/cards/' + enc(id) + '/state', { from: c.state, to });
    S.cards.set(id, card || c);
    hideAlert();
    toast('Moved ' + id + ' to ' + to);
    renderBoard();
  } catch (e) {
    showAlert(problemText(e));
  }
  refreshAttentionSoon();
}

/* ---- dialogs: the focus goes back where it was ---- */

/* Opens a modal dialog and remembers where the focus was: on close it goes back there, or,
 * when a redraw replaced that element, to the same action or the same card's chip. */
function showDialog(d) {
  if (d.open) return;
  const a = document.activeElement;
  const holder = a && a.closest ? a.closest('[data-card]') : null;
  d.returnTo = a && a !== document.body ? {
    el: a,
    card: holder ? holder.dataset.card : (a.closest && a.closest('#card-dialog') ? S.openCard : null),
    action: a.dataset ? a.dataset.action || null : null,
    where: a.closest && a.closest('#card-dialog') ? 'card' : a.closest && a.closest('#attention') ? 'lane' : 'board',
  } : null;
  d.showModal();
  modals.push(d);
  placeAlert();
}

function restoreFocus(d) {
  const r = d.returnTo;
  d.returnTo = null;
  if (!r) return;
  /* The close event is a task after the dialog hides: a key pressed in between ("/" to the
   * search) may have put the focus in a field already; never take it from there. */
  const a = document.activeElement;
  if (a && !d.contains(a) && a.matches('input, textarea, select')) return;
  let el = r.el && r.el.isConnected && !r.el.disabled && r.el.offsetParent !== null ? r.el : null;
  if (!el && r.where === 'card' && $('card-dialog').open) {
    el = (r.action && $('card-body').querySelector('[data-action="' + r.action + '"]')) || $('card-dialog').querySelector('.close');
  }
  if (!el && r.card) {
    const sel = '[data-card="' + CSS.escape(r.card) + '"]';
    el = (r.where === 'lane' && $('attention-list').querySelector(sel + ' button')) || $('board').querySelector('button' + sel);
  }
  if (el) el.focus();
}

function typing(t) {
  return !!(t && (t.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(t.tagName)));
}

/* The page's own keys (the board's are in board.js), never while typing or in a dialog. */
function globalKey(ev) {
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
  if (document.querySelector('dialog[open]') || $('app').hidden) return;
  if (ev.key === '/') {
    ev.preventDefault();
    $('f-text').focus();
  } else if ((ev.key === 'n' || ev.key === 'N') && S.board && may('create', S.board.name)) {
    ev.preventDefault();
    openEdit(null);
  } else if (ev.key === 'a' || ev.key === 'A') {
    ev.preventDefault();
    const open = $('attention').hidden;
    setPanel('attention', open);
    (open ? $('attention-title') : $('attention-toggle')).focus();
  } else if (ev.key === '?') {
    ev.preventDefault();
    showDialog($('keys-dialog'));
  }
}

function filterChanged() {
  renderBoard();
  renderAttention();
  $('bulk-apply').disabled = true;
  S.bulkPlan = null;
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
  for (const id of ['f-state', 'f-label', 'f-holder', 'f-sort']) $(id).addEventListener('input', filterChanged);
  /* Typing redraws once it pauses (a keystroke each redraw of thousands of chips lags). */
  let typed = null;
  $('f-text').addEventListener('input', () => {
    clearTimeout(typed);
    typed = setTimeout(filterChanged, 120);
  });
  $('filters').addEventListener('submit', (ev) => ev.preventDefault());
  $('bulk-toggle').addEventListener('click', () => setBulkOpen($('bulk').hidden));
  $('bulk-preview').addEventListener('click', bulkPreview);
  $('bulk-apply').addEventListener('click', bulkApply);
  $('bulk-action').addEventListener('change', () => {
    $('bulk-apply').disabled = true;
    $('bulk-preview').disabled = !$('bulk-action').value;
    $('bulk-out').textContent = '';
    S.bulkPlan = null;
    $('bulk-to-wrap').hidden = $('bulk-action').value !== 'reopen';
  });
  $('attention-toggle').addEventListener('click', () => setPanel('attention', $('attention').hidden));
  $('reaper-toggle').addEventListener('click', () => setPanel('reaper', $('reaper').hidden));
  $('activity-toggle').addEventListener('click', () => setPanel('activity', $('activity').hidden));
  $('new-card').addEventListener('click', () => openEdit(null));
  $('keys-open').addEventListener('click', () => showDialog($('keys-dialog')));
  $('edit-form').addEventListener('submit', submitEdit);
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
  for (const d of document.querySelectorAll('dialog')) {
    d.addEventListener('close', () => {
      if (modals.includes(d)) modals.splice(modals.indexOf(d), 1);
      placeAlert();
      restoreFocus(d);
    });
  }
  $('card-dialog').addEventListener('close', () => { S.openCard = null; });
  document.addEventListener('keydown', globalKey);
  wireBoard();
  setInterval(tickLeases, 1000);
  setInterval(tickTimes, 15000);
  /* Every 5 s while the reaper panel is open (when did the last pass run?), else every 15 s. */
  let reaperTick = 0;
  setInterval(() => { if (S.token && S.board && (!$('reaper').hidden || ++reaperTick % 3 === 0)) loadReaper(); }, 5000);
  /* The activity counts move by the minute: every 15 s while its panel is open, else each minute. */
  let activityTick = 0;
  setInterval(() => { if (S.token && S.board && (!$('activity').hidden || ++activityTick % 4 === 0)) loadActivity(); }, 15000);
  /* Leases expire without an event: the lane is re-read now and then as well. */
  setInterval(() => { if (S.token && S.board) refreshAttentionSoon(); }, 10000);
}

document.addEventListener('DOMContentLoaded', () => {
  wire();
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) signIn(saved);
  else showLogin();
});
