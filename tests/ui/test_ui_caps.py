#!/usr/bin/env python3
"""The operator UI offers an action only where the token's caps and boards let the server accept
it (DESIGN §13, §15), in Debian's chromium headless through Playwright, against the boardd of
this build. GET /v1/whoami gives the token's roles, caps and boards; the UI used to look at the
role alone, so an operator token without board.move still saw Move (and got a 403).

Checks, per token: a full operator sees every action; an operator with board.read only sees no
Edit, Move (button, drag or keys), working-card Re-queue, Answer, comment form or New card, and
a banner naming what it lacks, while the actions that need no cap (Reopen, Re-queue of a
terminal card, Revoke, Prune) stay and work; an operator with board.label only gets an Edit
whose other fields are disabled, and saves labels; an operator scoped to another board gets no
"Run a pass now" (a pass spans every board) and may() says no for a board outside its scope;
the server refuses each hidden action for that token; axe-core finds no serious or critical
violation in the limited views.

usage: test_ui_caps.py path/to/boardd
env:   BOARDD_CHROMIUM (default /usr/bin/chromium)
"""
import os
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boardd_test as bt  # noqa: E402
from boardd_test import Board, check  # noqa: E402
from test_ui_browser import T, browser_tools, end_run, in_column, run_flows, sign_in  # noqa: E402,E501

# name -> (roles, caps); 'scoped' (an operator and bot scoped to board `other`) is the Board's
TOKENS = {
    'opread': (['operator'], ['board.read']),
    'oplabel': (['operator'], ['board.read', 'board.label']),
}


def seed(srv):
    for name, (roles, caps) in TOKENS.items():
        srv.tok[name] = bt.token_add(srv.binary, srv.tokens_file, name, roles, caps=caps)
    srv.srv.send_signal(signal.SIGHUP)
    for name in TOKENS:
        bt.wait_for(lambda n=name: srv.call('GET', '/v1/whoami', n)[0] == 200, timeout=10)
    # on default: a working card, a give-up (terminal), a failed run, a card awaiting input
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'k-todo', 'title': 'Sort the backlog',
                                        'state': 'backlog', 'labels': ['one']})
    srv.give_up('k-gave', 'Migrate the billing tables')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'k-fail', 'title': 'Rotate the signing keys',
                                        'state': 'in_progress'})
    ep = srv.claim('k-fail', 'worker-3', lease_ms=600000)['epoch']
    srv.run_with_status('k-fail', ep, 'r-fail', 'failed', marker='worker-3')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'k-ask', 'title': 'Ask legal', 'state': 'in_progress'})
    ep = srv.claim('k-ask', 'worker-5', lease_ms=600000, who='worker2')['epoch']
    srv.owned('PUT', '/v1/cards/k-ask/awaiting-input', ep,
              {'marker': 'worker-5', 'awaiting_input': True}, who='worker2')
    # board `other`, the scoped token's only one
    cfg = srv.ok('GET', '/v1/boards/default')
    body = {k: cfg[k] for k in ('columns', 'running', 'completed', 'failed', 'waiting')}
    body['columns'] = [{k: c[k] for k in ('name', 'terminal', 'eligible')} for c in cfg['columns']]
    srv.ok('PUT', '/v1/boards/other', 'op', body)
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'o-todo', 'board': 'other', 'title': 'On other',
                                        'state': 'backlog'})


def lane_actions(page, cid):
    return sorted(page.eval_on_selector_all(
        '#attention-list li[data-card="%s"] [data-action]' % cid, 'els => els.map((e) => e.dataset.action)'))


def open_card(page, col, cid):
    """Opens the card view; returns its actions (data-action) and whether it has a comment form."""
    page.click(in_column(col, cid))
    page.locator('#card-dialog').wait_for(state='visible', timeout=T)
    page.wait_for_selector('#card-body h3:has-text("Timeline")', timeout=T)
    acts = sorted(page.eval_on_selector_all('#card-body [data-action]', 'els => els.map((e) => e.dataset.action)'))
    return acts, page.locator('#comment-form').count() == 1


def close_card(page):
    page.keyboard.press('Escape')
    page.locator('#card-dialog').wait_for(state='hidden', timeout=T)


def hidden(page, el_id):
    """Is the element hidden (or not there at all)?"""
    return page.evaluate('(id) => { const e = document.getElementById(id); return !e || e.hidden; }', el_id)


def text(page, sel):
    return page.locator(sel).inner_text() if page.locator(sel).count() else ''



def serious(page, name):
    from axe_playwright_python.sync_playwright import Axe
    res = Axe().run(page).response
    bad = [(v['id'], v['impact'], len(v['nodes'])) for v in res['violations']
           if v['impact'] in ('serious', 'critical')]
    check(not bad, 'axe-core: no serious or critical violation in %s (%s)' % (name, bad))


def full_operator(page, srv):
    """Every action, as before: the rule narrows only what caps and boards forbid."""
    sign_in(page, srv, 'op')
    page.wait_for_selector('#attention-list li[data-card="k-ask"]', timeout=T)
    check(lane_actions(page, 'k-gave') == ['reopen', 'requeue'], 'op: the give-up offers Reopen, Re-queue')
    check(lane_actions(page, 'k-fail') == ['prune-run', 'revoke'], 'op: the failed run offers Revoke, Prune')
    check(lane_actions(page, 'k-ask') == ['answer', 'revoke'], 'op: awaiting input offers Answer')
    check(not hidden(page, 'new-card') and not hidden(page, 'bulk-toggle') and
          not hidden(page, 'reaper-pass'), 'op: New card, Bulk and Run a pass now')
    check(hidden(page, 'limited') and hidden(page, 'readonly'), 'op: no banner')
    check(page.get_attribute(in_column('backlog', 'k-todo'), 'draggable') == 'true', 'op: a chip is draggable')
    acts, form = open_card(page, 'backlog', 'k-todo')
    check(acts == ['edit', 'move', 'requeue'] and form,
          'op: the card view offers Edit, Re-queue, Move and a comment (%s, %s)' % (acts, form))
    close_card(page)


def read_only_caps(page, srv):
    """An operator with board.read only: the actions that need a cap are gone, the others stay
    (the server asks no cap for reopen, revoke, run cancel and prune) and work."""
    patches = []
    page.on('request', lambda r: patches.append(r.url) if r.method in ('PATCH', 'POST') and
            '/v1/cards' in r.url else None)
    sign_in(page, srv, 'opread')
    page.wait_for_selector('#live.on', timeout=T)
    page.wait_for_selector('#attention-list li[data-card="k-ask"]', timeout=T)
    check(lane_actions(page, 'k-gave') == ['reopen', 'requeue'], 'read-only caps: Reopen, Re-queue stay')
    check(lane_actions(page, 'k-fail') == ['prune-run', 'revoke'], 'and Revoke, Prune')
    check(lane_actions(page, 'k-ask') == ['revoke'], 'but no Answer (board.comment) (%s)'
          % lane_actions(page, 'k-ask'))
    check(hidden(page, 'new-card'), 'no New card (board.create)')
    check(not hidden(page, 'bulk-toggle') and not hidden(page, 'reaper-pass'),
          'Bulk and Run a pass now stay (operator, every board)')
    banner = text(page, '#limited')
    check(not hidden(page, 'limited') and all(c in banner for c in
          ('board.create', 'board.label', 'board.move', 'board.comment')),
          'a banner names the caps it lacks (%r)' % banner)
    chip = in_column('backlog', 'k-todo')
    check(page.get_attribute(chip, 'draggable') is None, 'a chip is not draggable (board.move)')
    acts, form = open_card(page, 'backlog', 'k-todo')
    check(acts == [] and not form and page.locator('#card-body .card-actions').count() == 0,
          'the card view offers no Edit, Move, Re-queue or comment (%s, %s)' % (acts, form))
    close_card(page)
    page.focus(chip)
    page.keyboard.press('.')
    page.keyboard.press('e')
    page.keyboard.press('Escape')
    page.keyboard.press('n')
    page.wait_for_timeout(400)
    check(not page.locator('#edit-dialog').is_visible(), 'E and N open no form')
    if page.locator('#edit-dialog').is_visible():
        page.keyboard.press('Escape')
    check(not patches and srv.ok('GET', '/v1/cards/k-todo')['state'] == 'backlog',
          'and "." moves nothing (%s)' % patches)
    serious(page, 'the board of a token with board.read only')
    # the server agrees: each hidden action is refused for this token
    for method, path, body in (
            ('PATCH', '/v1/cards/k-todo/state', {'from': 'backlog', 'to': 'ready'}),
            ('PATCH', '/v1/cards/k-todo', {'title': 'x'}),
            ('PATCH', '/v1/cards/k-todo/labels', {'add': ['x']}),
            ('POST', '/v1/cards/k-ask/comments', {'body': 'x'}),
            ('POST', '/v1/cards', {'title': 'x', 'state': 'backlog'})):
        st = srv.call(method, path, 'opread', body)[0]
        check(st == 403, 'the server refuses %s %s for it (%s)' % (method, path, st))
    # and a shown one that needs no cap works: Re-queue of the give-up reopens it
    page.locator('#attention-list li[data-card="k-gave"] [data-action="requeue"]').click()
    page.wait_for_selector(in_column('ready', 'k-gave'), timeout=T)
    check(srv.ok('GET', '/v1/cards/k-gave')['state'] == 'ready', 'its Re-queue of a terminal card is accepted')


def label_only(page, srv):
    """board.label without board.create: Edit opens with only the labels to change."""
    sign_in(page, srv, 'oplabel', lane=False)
    page.wait_for_selector('#live.on', timeout=T)
    acts, form = open_card(page, 'backlog', 'k-todo')
    check(acts == ['edit'] and not form, 'label only: the card view offers Edit alone (%s, %s)' % (acts, form))
    page.click('#card-body [data-action="edit"]')
    page.locator('#edit-dialog').wait_for(state='visible', timeout=T)
    off = page.evaluate("""() => ['edit-title', 'edit-body', 'edit-labels', 'edit-priority', 'edit-not-before']
        .filter((id) => document.getElementById(id).disabled)""")
    check(off == ['edit-title', 'edit-body', 'edit-priority', 'edit-not-before'],
          'only the labels can be changed (disabled: %s)' % off)
    check(page.evaluate('document.activeElement.id') == 'edit-labels', 'and the focus is there')
    note = text(page, '#edit-note')
    check(not hidden(page, 'edit-note') and 'board.create' in note, 'the form says why (%r)' % note)
    serious(page, 'the card form of a label-only token')
    page.fill('#edit-labels', 'one, two')
    page.click('#edit-submit')
    page.locator('#edit-dialog').wait_for(state='hidden', timeout=T)
    c = srv.ok('GET', '/v1/cards/k-todo')
    check(c['labels'] == ['one', 'two'] and c['title'] == 'Sort the backlog',
          'its save changed the labels only (%r, %r)' % (c['labels'], c['title']))
    close_card(page)


def scoped_board(page, srv):
    """An operator scoped to board `other`: its board's actions, no reaper pass (a pass spans
    every board), and no action on a board outside its scope."""
    sign_in(page, srv, 'scoped', lane=False)
    page.wait_for_selector('#live.on', timeout=T)
    check(page.locator('#board-select').input_value() == 'other', 'scoped: board other opens')
    check(hidden(page, 'reaper-pass'), 'scoped: no Run a pass now')
    check(not hidden(page, 'new-card') and hidden(page, 'limited'), 'but New card, and no banner')
    got = page.evaluate("""() => typeof may !== 'function' ? null :
        ['create', 'edit', 'label', 'move', 'comment', 'reopen', 'revoke', 'run', 'reaper']
        .map((a) => [a, may(a, 'other'), may(a, 'default')])""")
    check(got and all(here != (a == 'reaper') for a, here, _ in got),
          'may(action, its board): all but the reaper (%s)' % got)
    check(got and not any(there for _, _, there in got), 'may(action, another board): none (%s)' % got)
    acts, form = open_card(page, 'backlog', 'o-todo')
    check(acts == ['edit', 'move', 'requeue'] and form, 'its card offers Edit, Re-queue, Move, a comment (%s)' % acts)
    close_card(page)
    st = srv.call('POST', '/v1/reaper/pass', 'scoped')[0]
    check(st == 403, 'the server refuses its reaper pass (%s)' % st)
    st = srv.call('PATCH', '/v1/cards/k-todo/state', 'scoped', {'from': 'backlog', 'to': 'ready'})[0]
    check(st == 403, 'and its move on board default (%s)' % st)


def main():
    sync_playwright = browser_tools()

    srv = Board(sys.argv[1], ['--lease-min-ms', '100'])
    profile = tempfile.mkdtemp(prefix='boardd-chromium-')
    try:
        seed(srv)
        with sync_playwright() as p:
            errors = run_flows(p, profile, srv,
                               (full_operator, label_only, scoped_board, read_only_caps))
            check(not errors, 'no console errors: nothing shown was refused (%s)' % errors)
    finally:
        end_run(srv, profile)


if __name__ == '__main__':
    main()
