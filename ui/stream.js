/* boardd's operator UI, the live stream (DESIGN §15): GET /v1/events/stream read with fetch
 * (EventSource cannot send a bearer token), resumed with Last-Event-ID, and what an event
 * changes: the card re-read (in batches), the lane, the open card view. A refusal stops it and
 * says why; a board gone stops it too. Globals from app.js. */
'use strict';

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
 * read, and the board is drawn once per batch (only the chips whose card changed). */
const pendingCards = new Map(); // id -> deleted?
let pendingTimer = null;

function refreshCard(id, deleted) {
  pendingCards.set(id, !!deleted); /* the last event on a card decides */
  if (!pendingTimer) pendingTimer = setTimeout(flushCards, 100);
}

/* Forgets the batch waiting to be re-read (the board it belongs to is no longer shown). */
function dropPendingCards() {
  clearTimeout(pendingTimer);
  pendingTimer = null;
  pendingCards.clear();
}

async function flushCards() {
  const batch = [...pendingCards.entries()];
  pendingCards.clear();
  pendingTimer = null;
  const board = S.board;
  await Promise.all(batch.map(async ([id, deleted]) => {
    if (deleted) {
      S.cards.delete(id);
      return;
    }
    try {
      const got = await api('GET', '/v1/cards/' + enc(id));
      if (S.board !== board) return; /* signed out or another board meanwhile */
      /* The same card as held (the event of a write this page made and already drew): keep
       * the object, so its chip is not rebuilt under the operator's focus or drag. */
      const held = S.cards.get(id);
      if (!held || JSON.stringify(held) !== JSON.stringify(got)) S.cards.set(id, got);
    } catch (e) {
      if (e.status === 404) S.cards.delete(id);
    }
  }));
  renderLabels();
  renderBoard();
}
