/* boardd's operator UI, the dialogs (DESIGN §15, §20, §21): the card view (fields, claim,
 * runs with their output, comments, timeline, the actions that fit), create and edit a card,
 * reopen, and the bulk actions over the current filter. Globals from app.js and board.js. */
'use strict';

function openReopen(id) {
  const c = S.cards.get(id);
  const d = $('reopen-dialog');
  d.dataset.card = id;
  $('reopen-what').textContent = (c ? (c.title || id) + ' (' + id + ') is in ' + c.state : id) + '. Choose the working column it goes back to.';
  $('reopen-to').replaceChildren(...workingColumns().map((col) => h('option', { value: col.name, text: col.name })));
  $('reopen-to').value = firstEligible();
  $('reopen-reason').value = '';
  $('reopen-error').replaceChildren();
  showDialog(d);
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
  if (!$('bulk-action').value) return;
  const all = bulkTargets();
  const cap = bulkCap();
  S.bulkPlan = { action: $('bulk-action').value, to: $('bulk-to').value, ids: all.slice(0, cap).map((c) => c.id) };
  $('bulk-out').textContent = all.length + ' card(s) in the current filter qualify; ' + S.bulkPlan.ids.length +
    ' will be acted on (cap ' + cap + ').';
  $('bulk-apply').disabled = S.bulkPlan.ids.length === 0;
}

const BULK_WORDS = {
  requeue: 'Re-queue %n terminal card(s) to the first eligible column',
  reopen: 'Reopen %n terminal card(s) to %to',
  revoke: 'Revoke the claims on %n card(s)',
};

/* Applies the previewed plan, after a confirmation that says what it does and to how many. */
async function bulkApply() {
  const plan = S.bulkPlan;
  if (!plan || !BULK_WORDS[plan.action]) return;
  const what = BULK_WORDS[plan.action].replace('%n', plan.ids.length).replace('%to', plan.to);
  if (!confirm(what + '? (' + plan.ids.slice(0, 5).join(', ') + (plan.ids.length > 5 ? ', …' : '') + ')')) {
    $('bulk-out').textContent = 'Nothing done.';
    return;
  }
  $('bulk-apply').disabled = true;
  $('bulk-preview').focus();
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
  showDialog(d);
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

/* ---- a card's runs (DESIGN §20) ---- */

/* Does this server have GET /v1/cards/{id}/runs? Read once from its own contract
 * (/openapi.json, public): asking a route that is not there would log a 404 in the console
 * each time a card opens. Unknown (the contract unreadable): ask, and a 404 or 405 answers. */
let routesKnown = null;
function runsRouteKnown() {
  if (S.runsRoute !== null) return Promise.resolve(S.runsRoute);
  if (!routesKnown) {
    routesKnown = fetch('/openapi.json', { cache: 'no-store' }).then((r) => (r.ok ? r.json() : null))
      .then((doc) => {
        if (doc && doc.paths && S.runsRoute === null) S.runsRoute = !!(doc.paths['/v1/cards/{id}/runs'] && doc.paths['/v1/cards/{id}/runs'].get);
        return S.runsRoute;
      }).catch(() => null);
  }
  return routesKnown;
}

/* The card's runs, newest first; null when the server has no such listing (the section is
 * then not drawn). */
async function cardRuns(c) {
  if ((await runsRouteKnown()) === false) return null;
  try {
    const r = await api('GET', '/v1/cards/' + enc(c.id) + '/runs');
    S.runsRoute = true;
    return Array.isArray(r) ? r : (r && r.runs) || [];
  } catch (e) {
    if (e.status === 404 || e.status === 405) {
      S.runsRoute = false;
      return null;
    }
    throw e;
  }
}

/* The card's last run, or why it is not shown: {run} or {why}. A run the card's give-up
 * names as pruned or gone, or one the card's runs listing no longer has, is not asked for (it
 * would only answer 404). */
async function lastRun(c, runs) {
  const id = c.last_run_id;
  if (!id) return { why: 'No run recorded.' };
  const g = c.gave_up;
  if (g && g.run_id === id && /pruned|gone/.test(g.reason || '')) return { why: 'Run ' + id + ': pruned (' + g.reason + ').' };
  if (runs) {
    const listed = runs.find((r) => r.id === id);
    if (!listed) return { why: 'Run ' + id + ': pruned or gone (not among the card\'s runs).' };
    if (listed.output !== undefined) return { run: listed };
  }
  try {
    return { run: await api('GET', '/v1/runs/' + enc(id)) };
  } catch (e) {
    return { why: 'Run ' + id + ': ' + (e.status === 404 ? 'pruned or gone.' : problemText(e)) };
  }
}

function outputBlock(run) {
  if (typeof run.output !== 'string') return null;
  return run.output ? h('pre', { class: 'output', 'data-output': run.id, tabindex: 0, 'aria-label': 'Output of run ' + run.id, text: run.output })
    : h('p', { class: 'muted', text: 'No output.' });
}

/* A row of the runs table; its output is read on demand (GET /v1/runs/{id}, 64 KiB at most). */
function runRow(run) {
  const show = h('button', { type: 'button', 'data-action': 'output-' + run.id, 'aria-expanded': 'false' }, 'Output');
  const out = h('div', { class: 'run-output', hidden: true });
  show.addEventListener('click', async () => {
    const open = show.getAttribute('aria-expanded') !== 'true';
    show.setAttribute('aria-expanded', String(open));
    out.hidden = !open;
    if (!open || out.childElementCount) return;
    out.replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
    try {
      const full = run.output !== undefined ? run : await api('GET', '/v1/runs/' + enc(run.id));
      out.replaceChildren(outputBlock(full) || h('p', { class: 'muted', text: 'This server keeps no output.' }));
    } catch (e) {
      out.replaceChildren(h('p', { class: 'error', text: e.status === 404 ? 'Pruned or gone.' : problemText(e) }));
    }
  });
  return h('li', { 'data-run': run.id },
    h('span', { class: 'run-head' }, h('code', { text: run.id }), ' ', h('strong', { text: run.status }),
      run.claim_epoch !== undefined && run.claim_epoch !== null ? ' · claim e' + run.claim_epoch : '',
      run.owner ? ' · ' + run.owner : '', ' · ', timeEl(run.created_at, 'ago'),
      run.error ? h('span', { class: 'error' }, ' — ' + run.error) : null, ' ', show),
    out);
}

/* ---- the card dialog ---- */

/* Renders may overlap (the opening one and a live refresh): only the newest writes. */
let cardTicket = 0;

/* The card view's actions, each where the token may do it (ACTIONS); null when none. */
function cardActions(c, reasons, run) {
  const btns = actionsFor(c, reasons);
  if (run && !['finished', 'failed', 'cancelled'].includes(run.status) && !btns.some((b) => b.dataset.action === 'cancel-run') && may('run', c.board)) {
    btns.push(h('button', { type: 'button', 'data-action': 'cancel-run', onclick: () => act(() => api('POST', '/v1/runs/' + enc(run.id) + '/cancel'), 'Cancelled run ' + run.id) }, 'Cancel run'));
  }
  if (!isTerminal(c.state) && c.state !== firstEligible() && mayRequeue(c)) {
    btns.push(h('button', { type: 'button', 'data-action': 'requeue', onclick: () => act(() => requeue(c), 'Re-queued ' + c.id) }, 'Re-queue'));
  }
  if (mayEdit(c)) btns.unshift(h('button', { type: 'button', 'data-action': 'edit', onclick: () => openEdit(c.id) }, 'Edit…'));
  /* A terminal card leaves by Reopen (the server refuses a move): no Move for it here. */
  const targets = isTerminal(c.state) || !may('move', c.board) ? [] : workingColumns().filter((col) => col.name !== c.state);
  if (targets.length) {
    const sel = h('select', { id: 'card-move-to', 'aria-label': 'Move to column' }, targets.map((col) => h('option', { value: col.name, text: col.name })));
    btns.push(h('span', { class: 'move' }, h('label', { for: 'card-move-to' }, 'Move to'), sel,
      h('button', { type: 'button', 'data-action': 'move', onclick: () => moveCard(c.id, sel.value) }, 'Move')));
  }
  return btns.length ? h('div', { class: 'card-actions' }, btns) : null;
}

async function renderCardDialog(id) {
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
  if (S.board && c.board === S.board.name) S.cards.set(id, c);
  let runs = null;
  let runsErr = null;
  try { runs = await cardRuns(c); } catch (e) { runsErr = problemText(e); }
  const last = await lastRun(c, runs);
  const run = last.run || null;
  const events = await cardTimeline(c).catch(() => []);
  if (S.openCard !== id || ticket !== cardTicket) return;
  const reasons = S.attention.get(id) || [];
  $('card-title').textContent = c.title || c.id;
  const parts = [];
  const actions = cardActions(c, reasons, run);
  if (actions) parts.push(actions);
  parts.push(fieldList([
    ['id', c.id], ['board', c.board], ['state', h('span', {}, c.state + ' (', timeEl(c.state_at, 'in'), ')')], ['state reason', c.state_reason],
    ['priority', c.priority], ['labels', (c.labels || []).join(', ')], ['blockers', (c.blockers || []).join(', ')],
    ['claim epoch', c.claim_epoch], ['awaiting input', c.awaiting_input ? 'yes' : null],
    ['created', timeEl(c.created_at, 'ago')], ['updated', timeEl(c.updated_at, 'ago')],
    ['not before', c.not_before ? timeEl(c.not_before, 'ago') : null], ['attempts', c.attempts],
    ['needs attention', reasons.length ? reasons.join(', ') : null],
  ]));
  if (c.body) parts.push(h('h3', { text: 'Body' }), h('p', { class: 'body', text: c.body }));
  parts.push(h('h3', { text: 'Claim' }), c.claim ? fieldList([
    ['marker', c.claim.marker], ['holder', c.claim.holder], ['epoch', c.claim_epoch], ['taken from', c.claim.from],
    ['claimed', timeEl(c.claim.claimed_at, 'ago')], ['lease ends', timeEl(c.claim.lease_until, 'ago')], ['lease', leaseTag(c.claim)],
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
      ['owner', run.owner], ['lock until', run.lock_until ? timeEl(run.lock_until, 'ago') : null], ['error', run.error],
      ['started', run.created_at ? timeEl(run.created_at, 'ago') : null], ['updated', run.updated_at ? timeEl(run.updated_at, 'ago') : null],
      ['result', run.result !== undefined && run.result !== null ? h('pre', { class: 'json', text: JSON.stringify(run.result, null, 2) }) : null],
    ]));
    const out = outputBlock(run);
    if (out) parts.push(h('h4', { text: 'Output' }), out);
  } else {
    parts.push(h('p', { class: 'muted', 'data-run-missing': '', text: last.why }));
  }
  if (runs) {
    parts.push(h('h3', { text: 'Runs (' + runs.length + ')' }),
      runs.length ? h('ul', { class: 'runs', id: 'card-runs' }, runs.map(runRow)) : h('p', { class: 'muted', text: 'No run.' }));
  } else if (runsErr) {
    parts.push(h('h3', { text: 'Runs' }), h('p', { class: 'error', text: runsErr }));
  }
  if (c.gave_up) {
    parts.push(h('h3', { text: 'Gave up' }), fieldList([['reason', c.gave_up.reason], ['run', c.gave_up.run_id], ['in state', c.gave_up.state], ['at', c.gave_up.at ? timeEl(c.gave_up.at, 'ago') : null]]));
  }
  parts.push(h('h3', { text: 'Comments (' + (c.comments || []).length + ')' }),
    h('ul', { class: 'comments' }, (c.comments || []).map((m) => h('li', {}, h('strong', { text: m.author || '?' }), ' ', timeEl(m.created_at, 'ago', 'muted'), h('div', { text: m.body })))));
  if (may('comment', c.board)) {
    /* The answer to awaiting_input (and a note on any card): POST /v1/cards/{id}/comments. */
    parts.push(h('form', { id: 'comment-form', class: 'comment-form', onsubmit: (ev) => submitComment(ev, c.id) },
      h('label', { for: 'comment-body' }, 'Add a comment'),
      h('textarea', { id: 'comment-body', rows: 3, required: true }),
      h('div', { id: 'comment-error', class: 'error', role: 'alert' }),
      h('div', { class: 'buttons' }, h('button', { type: 'submit', id: 'comment-submit' }, 'Comment'))));
  }
  parts.push(h('h3', { text: 'Timeline' }),
    h('ol', { class: 'timeline' }, events.map((e) => h('li', {},
      timeEl(e.at, 'ago', 'muted'), ' ', h('strong', { text: e.type }),
      e.payload && e.payload.from ? ' ' + e.payload.from + ' → ' + e.payload.to : '',
      e.actor ? ' by ' + e.actor : (e.machine ? ' (machine)' : ''),
      e.reason ? ' — ' + e.reason : ''))));
  /* A live re-render must keep what the operator is typing, the open outputs and where the
   * focus is. */
  const draft = $('comment-body');
  const keep = draft ? { value: draft.value, focused: document.activeElement === draft, at: draft.selectionStart } : null;
  const a = document.activeElement;
  const inside = !!(a && $('card-body').contains(a));
  const action = inside && a.dataset ? a.dataset.action : null;
  const aid = inside && !action ? a.id : null;
  const moveTo = $('card-move-to') ? $('card-move-to').value : null;
  const opened = [...$('card-body').querySelectorAll('[data-action^="output-"][aria-expanded="true"]')].map((b) => b.dataset.action);
  $('card-body').replaceChildren(...parts);
  if (moveTo && $('card-move-to') && [...$('card-move-to').options].some((o) => o.value === moveTo)) $('card-move-to').value = moveTo;
  for (const o of opened) {
    const b = $('card-body').querySelector('[data-action="' + o + '"]');
    if (b) b.click();
  }
  const box = $('comment-body');
  if (box && keep) {
    box.value = keep.value;
    if (keep.focused) {
      box.focus();
      box.setSelectionRange(keep.at, keep.at);
    }
  }
  if (action || aid) {
    const el = action ? $('card-body').querySelector('[data-action="' + action + '"]') : $(aid);
    if (el) el.focus();
    else if (a && !a.isConnected) $('card-dialog').querySelector('.close').focus();
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
  if (!body || submitComment.busy) return;
  /* Not disabled while it is sent: a disabled button drops the keyboard focus. */
  submitComment.busy = true;
  $('comment-error').textContent = '';
  try {
    await api('POST', '/v1/cards/' + enc(id) + '/comments', { body });
    /* A live redraw may have replaced the box meanwhile (carrying the draft over): clear the
     * one there now, unless it holds something else by then. */
    const now = S.openCard === id ? $('comment-body') : null;
    if (now && now.value.trim() === body) now.value = '';
    toast('Comment added to ' + id);
  } catch (e) {
    if ($('comment-error')) $('comment-error').textContent = problemText(e);
  }
  submitComment.busy = false;
  if (S.openCard === id) refreshOpenCard();
}

/* ---- create and edit a card ---- */

function parseLabels(text) {
  return [...new Set(text.split(',').map((l) => l.trim()).filter(Boolean))];
}

/* An RFC 3339 time as a datetime-local input's value (local time, to the second), in the
 * normalized form the input itself gives back: no ':00' on a whole minute (HTML's value
 * sanitization drops it), so a value read from the form compares equal to this one. */
function localInput(iso) {
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  const s = d.getSeconds() ? ':' + p(d.getSeconds()) : '';
  return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes()) + s;
}

/* What the form's fields hold, as the form gives them back. */
function editFields() {
  return {
    title: $('edit-title').value,
    body: $('edit-body').value,
    labels: parseLabels($('edit-labels').value),
    priority: $('edit-priority').value,
    notBefore: $('edit-not-before').value,
  };
}

/* Opens the card form: id null creates a card on the board on screen (POST /v1/cards), else
 * edits that card (PATCH /v1/cards/{id}: title, body, priority, not_before; PATCH .../labels).
 * An edit sends only what the operator changed, compared with what the form showed when it
 * opened (not with the card as it is by then: another client's change meanwhile survives,
 * and a title or body the form cannot show exactly, a newline or a CRLF, is not rewritten). */
function openEdit(id) {
  const c = id ? S.cards.get(id) : null;
  if (id && !c) return;
  const d = $('edit-dialog');
  d.dataset.card = id || '';
  $('edit-heading').textContent = c ? 'Edit ' + c.id : 'New card on ' + S.board.name;
  $('edit-submit').textContent = c ? 'Save' : 'Create';
  $('edit-title').value = c ? c.title || '' : '';
  $('edit-body').value = c ? c.body || '' : '';
  $('edit-labels').value = c ? (c.labels || []).join(', ') : '';
  $('edit-priority').value = String(c ? c.priority || 0 : 0);
  $('edit-not-before').value = c && c.not_before ? localInput(c.not_before) : '';
  $('edit-create-only').hidden = !!c;
  /* An edit offers the fields the token may change: PATCH /v1/cards/{id} needs board.create,
   * PATCH .../labels board.label (a create sends its labels with POST: board.create). */
  const fields = !c || may('edit', c.board);
  const labels = !c || may('label', c.board);
  for (const f of ['edit-title', 'edit-body', 'edit-priority', 'edit-not-before']) $(f).disabled = !fields;
  $('edit-labels').disabled = !labels;
  $('edit-note').hidden = fields && labels;
  $('edit-note').textContent = fields && labels ? '' : 'This token may change only the ' +
    (fields ? 'title, body, priority and schedule (it lacks board.label).' : 'labels (it lacks board.create).');
  if (!c) {
    const sel = $('edit-column');
    sel.replaceChildren(...workingColumns().map((col) => h('option', { value: col.name, text: col.name })));
    const f = $('f-state').value;
    sel.value = f && !isTerminal(f) ? f : (workingColumns()[0] || {}).name;
    $('edit-id').value = '';
  }
  d.shown = c ? editFields() : null;
  $('edit-error').textContent = '';
  showDialog(d);
  (fields ? $('edit-title') : $('edit-labels')).focus();
}

async function submitEdit(ev) {
  ev.preventDefault();
  const d = $('edit-dialog');
  const id = d.dataset.card;
  /* An edit never creates, even when the card is gone meanwhile: its PATCH answers 404. */
  const shown = id ? d.shown : null;
  const prio = Number($('edit-priority').value || 0);
  if (!Number.isInteger(prio)) {
    $('edit-error').textContent = 'Priority is a whole number.';
    $('edit-priority').focus();
    return;
  }
  const nbText = $('edit-not-before').value;
  const nbMs = nbText ? new Date(nbText).getTime() : null;
  if (nbText && !Number.isFinite(nbMs)) {
    $('edit-error').textContent = 'Not before is a date and a time.';
    $('edit-not-before').focus();
    return;
  }
  /* DESIGN §17: RFC 3339 in UTC; null clears the schedule. */
  const notBefore = nbText ? new Date(nbMs).toISOString() : null;
  const now = editFields();
  const title = now.title.trim();
  const body = now.body;
  const labels = now.labels;
  if (submitEdit.busy) return;
  submitEdit.busy = true;
  $('edit-error').textContent = '';
  try {
    let card;
    if (!id) {
      const req = { board: S.board.name, title, state: $('edit-column').value };
      if (body) req.body = body;
      if (labels.length) req.labels = labels;
      if (prio) req.priority = prio;
      if (notBefore) req.not_before = notBefore;
      if ($('edit-id').value.trim()) req.id = $('edit-id').value.trim();
      card = await api('POST', '/v1/cards', req);
    } else {
      const patch = {};
      if (now.title !== shown.title) patch.title = title;
      if (body !== shown.body) patch.body = body;
      if (now.priority !== shown.priority) patch.priority = prio;
      if (nbText !== shown.notBefore) patch.not_before = notBefore;
      card = Object.keys(patch).length ? await api('PATCH', '/v1/cards/' + enc(id), patch) : null;
      /* The labels as a difference (one atomic step): a label another client added or
       * removed meanwhile stays so. */
      const add = labels.filter((l) => !shown.labels.includes(l));
      const remove = shown.labels.filter((l) => !labels.includes(l));
      if (add.length || remove.length) {
        const req = {};
        if (add.length) req.add = add;
        if (remove.length) req.remove = remove;
        card = await api('PATCH', '/v1/cards/' + enc(id) + '/labels', req);
      }
    }
    if (card) {
      S.cards.set(card.id, card);
      renderLabels();
      renderBoard();
    }
    hideAlert();
    toast((id ? 'Saved ' : 'Created ') + (card ? card.id : id));
    /* A new card: the focus goes to its chip when the filter shows it (by id too: a live update
     * may redraw the board before the dialog's close event restores the focus). */
    const chipEl = id ? null : $('board').querySelector('button.chip[data-card="' + CSS.escape(card.id) + '"]');
    if (chipEl) d.returnTo = { el: chipEl, card: card.id, where: 'board' };
    d.close();
    if (card && S.openCard === card.id) refreshOpenCard();
  } catch (e) {
    $('edit-error').textContent = problemText(e);
  }
  submitEdit.busy = false;
}
