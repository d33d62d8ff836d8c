#!/usr/bin/env python3
"""The operator UI in a real browser (DESIGN §15): Debian's chromium, headless, driven by
Playwright (pinned in tests/requirements.txt; the system browser through executable_path, no
browser download), against the boardd of this build.

Checks: sign in; a card created over the API appears live; the attention lane lists a give-up
card with its reason, opens it, and reopens it to ready (it moves); a refused reopen lists the
dependents; a bulk re-queue over a filter previews its count and keeps to its cap; keyboard
operation; the phone-width layout; a read-only (bot) token gets no action buttons and the
server refuses it anyway; an event stream refused 403 stops retrying and says why; every
refused or failed action (409, 5xx, no answer) is an alert with the problem detail; a board
that does not exist (named in the address, its stream answered 404, gone after a restart on
another store) stops the stream, says so and offers the way back to the board list.

usage: test_ui_browser.py path/to/boardd
env:   BOARDD_CHROMIUM (default /usr/bin/chromium)
       BOARDD_UI_SCREENSHOTS=DIR to save board.png, attention.png, reopen.png, ... there
"""
import json
import os
import signal
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import Board, check  # noqa: E402

CHROMIUM = os.environ.get('BOARDD_CHROMIUM', '/usr/bin/chromium')
SHOTS = os.environ.get('BOARDD_UI_SCREENSHOTS')
ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync']
T = 15000  # ms: the most any single wait may take (a live update usually takes milliseconds)


def shot(target, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        target.screenshot(path=os.path.join(SHOTS, name))


def seed(srv):
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-build', 'title': 'Build the release',
                                        'state': 'ready', 'labels': ['release']})
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-docs', 'title': 'Write the operator docs',
                                        'state': 'backlog', 'labels': ['docs']})
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-run', 'title': 'Nightly index rebuild',
                                        'state': 'in_progress', 'labels': ['ops']})
    ep = srv.claim('c-run', 'worker-7', lease_ms=600000)['epoch']
    srv.run_with_status('c-run', ep, 'r-run', 'running', marker='worker-7')
    srv.give_up('c-gave', 'Migrate the billing tables')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-pause', 'title': 'Ask legal about the license',
                                        'state': 'in_progress'})
    ep = srv.claim('c-pause', 'worker-9')['epoch']
    srv.run_with_status('c-pause', ep, 'r-pause', 'paused_waiting_human', marker='worker-9')
    # a run that failed under the claim its worker still holds
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-fail', 'title': 'Rotate the signing keys',
                                        'state': 'in_progress', 'labels': ['ops']})
    ep = srv.claim('c-fail', 'worker-3', lease_ms=600000)['epoch']
    srv.run_with_status('c-fail', ep, 'r-fail', 'failed', marker='worker-3')
    # a done card whose dependent has moved on: its reopen is refused
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-base', 'title': 'Provision the database',
                                        'state': 'ready'})
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-dep', 'title': 'Load the fixtures',
                                        'blockers': ['c-base']})
    srv.ok('PATCH', '/v1/cards/c-base/state', 'op', {'to': 'done'})
    # three failed cards for the bulk re-queue
    for i in range(3):
        cid = 'c-bulk%d' % i
        srv.ok('POST', '/v1/cards', 'bot', {'id': cid, 'title': 'Flaky job %d' % i,
                                            'state': 'ready', 'labels': ['flaky']})
        srv.ok('PATCH', '/v1/cards/%s/state' % cid, 'op', {'to': 'blocked'})


def sign_in(page, srv, who, lane=True):
    """Signs in; with lane, opens the Needs-attention lane (it starts folded to its bar)."""
    page.goto(srv.url + '/ui/')
    page.fill('#token', srv.tok[who])
    page.click('#login-form button[type=submit]')
    page.wait_for_selector('#board [data-column]', timeout=T)
    if lane:
        open_panel(page, 'attention')


def open_panel(page, which):
    """Unfolds the lane ('attention') or the reaper panel from its bar."""
    if page.get_attribute('#%s-toggle' % which, 'aria-expanded') != 'true':
        page.click('#%s-toggle' % which)
    page.locator('#' + which).wait_for(state='visible', timeout=T)


def in_column(col, cid):
    return '#board [data-column="%s"] [data-card="%s"]' % (col, cid)


def operator_flows(page, srv):
    sign_in(page, srv, 'op')
    check(page.locator('#whoami').inner_text().startswith('op'), 'signed in as op')
    check(page.evaluate("sessionStorage.getItem('boardd.token')") == srv.tok['op'],
          'the token is kept in sessionStorage')
    check(page.evaluate('document.cookie') == '', 'and never in a cookie')
    page.wait_for_selector('#live.on', timeout=T)
    chip = page.locator(in_column('in_progress', 'c-run'))
    check('worker-7' in chip.inner_text() and 'lease' in chip.inner_text() and
          ('holder' not in srv.ok('GET', '/v1/cards/c-run')['claim'] or 'worker' in chip.inner_text()),
          'a claimed chip shows its holder and lease countdown (%r)' % chip.inner_text())

    # live: a card created over the API appears without a reload
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-live', 'title': 'Created over the API',
                                        'state': 'ready', 'labels': ['live']})
    page.wait_for_selector(in_column('ready', 'c-live'), timeout=T)
    check(True, 'a card created over the API appeared live')

    # the attention lane
    item = page.locator('#attention-list li[data-card="c-gave"]')
    item.wait_for(timeout=T)
    check('gave_up' in item.inner_text(), 'the lane shows the give-up reason')
    paused = page.locator('#attention-list li[data-card="c-pause"]')
    check('run_paused' in paused.inner_text(), 'the lane shows a paused run')
    check(paused.locator('[data-action="cancel-run"]').count() == 1,
          'a paused run offers Cancel run')
    failed = page.locator('#attention-list li[data-card="c-fail"]')
    check('run_failed' in failed.inner_text(), 'the lane shows a failed run')
    # pruning a run cannot be undone: it is asked first, and a No prunes nothing
    asked = []
    page.once('dialog', lambda d: (asked.append(d.message), d.dismiss()))
    failed.locator('[data-action="prune-run"]').click()
    page.wait_for_timeout(300)
    check(asked and 'r-fail' in asked[0] and 'cannot be brought back' in asked[0],
          'Prune run asks first (%s)' % asked)
    check(srv.call('GET', '/v1/runs/r-fail')[0] == 200, 'and a No prunes nothing')
    page.wait_for_timeout(300)
    shot(page, 'board.png')
    shot(page.locator('#attention'), 'attention.png')

    # open the give-up card from the lane
    item.locator('button.open').click()
    dlg = page.locator('#card-dialog')
    dlg.wait_for(state='visible', timeout=T)
    page.wait_for_selector('#card-body h3:has-text("Gave up")', timeout=T)
    body = page.locator('#card-body').inner_text()
    check('run_pruned' in body and 'blocked' in body, 'the card view shows the gave_up stamp')
    check('card_gave_up' in body, 'and its event timeline')
    shot(page, 'card.png')
    page.keyboard.press('Escape')
    dlg.wait_for(state='hidden', timeout=T)

    # reopen it to ready from the lane, and see it move
    item.locator('[data-action="reopen"]').click()
    page.locator('#reopen-dialog').wait_for(state='visible', timeout=T)
    check(page.locator('#reopen-to option').count() >= 5, 'the reopen dialog lists working columns')
    check(page.locator('#reopen-to option[value="done"]').count() == 0, 'and no terminal one')
    page.select_option('#reopen-to', 'ready')
    page.fill('#reopen-reason', 'the tables are back')
    shot(page, 'reopen.png')
    page.click('#reopen-submit')
    page.wait_for_selector(in_column('ready', 'c-gave'), timeout=T)
    page.wait_for_selector('#attention-list li[data-card="c-gave"]', state='detached', timeout=T)
    check(page.locator(in_column('blocked', 'c-gave')).count() == 0, 'reopened: it moved to ready')
    check(srv.ok('GET', '/v1/cards/c-gave')['state'] == 'ready', 'and the server agrees')

    # a refused reopen lists the dependents
    page.locator(in_column('done', 'c-base')).click()
    page.locator('#card-dialog').wait_for(state='visible', timeout=T)
    page.locator('#card-dialog [data-action="reopen"]').click()
    page.locator('#reopen-dialog').wait_for(state='visible', timeout=T)
    page.select_option('#reopen-to', 'ready')
    page.click('#reopen-submit')
    page.wait_for_selector('#reopen-error [data-dependent="c-dep"]', timeout=T)
    err = page.locator('#reopen-error').inner_text()
    check('dependents_outstanding' in err and 'Load the fixtures' in err,
          'the refusal names the dependents (%r)' % err)
    shot(page, 'reopen-refused.png')
    check(srv.ok('GET', '/v1/cards/c-base')['state'] == 'done', 'nothing changed')
    page.keyboard.press('Escape')
    page.locator('#reopen-dialog').wait_for(state='hidden', timeout=T)
    page.keyboard.press('Escape')
    page.locator('#card-dialog').wait_for(state='hidden', timeout=T)

    # bulk re-queue over the current filter: the bar opens on demand with no action chosen;
    # preview count, then the cap, then a confirmation (a No does nothing)
    check(not page.locator('#bulk').is_visible(), 'the bulk bar is closed until asked for')
    page.click('#bulk-toggle')
    check(page.locator('#bulk-action').input_value() == '' and page.locator('#bulk-preview').is_disabled(),
          'it opens with no action chosen (no destructive default)')
    page.select_option('#f-label', 'flaky')
    check('3 of' in page.locator('#f-count').inner_text(), 'the filter matches three cards')
    page.select_option('#bulk-action', 'requeue')
    page.fill('#bulk-cap', '2')
    page.click('#bulk-preview')
    out = page.locator('#bulk-out').inner_text()
    check('3 card(s)' in out and '2 will be acted on' in out, 'the preview counts and caps (%r)' % out)
    asked = []
    page.once('dialog', lambda d: (asked.append(d.message), d.dismiss()))
    page.click('#bulk-apply')
    page.wait_for_selector('#bulk-out:has-text("Nothing done")', timeout=T)
    check(asked and 'Re-queue 2 terminal card(s)' in asked[0], 'the re-queue asks first (%s)' % asked)
    check(sorted(srv.ok('GET', '/v1/cards/c-bulk%d' % i)['state'] for i in range(3)) == ['blocked'] * 3,
          'and a No re-queues nothing')
    page.once('dialog', lambda d: d.accept())
    page.click('#bulk-apply')
    page.wait_for_selector('#bulk-out:has-text("2 done")', timeout=T)
    states = sorted(srv.ok('GET', '/v1/cards/c-bulk%d' % i)['state'] for i in range(3))
    check(states == ['blocked', 'ready', 'ready'], 'two re-queued, one left by the cap (%s)' % states)
    page.wait_for_selector('#board [data-column="ready"] [data-card^="c-bulk"] >> nth=1', timeout=T)
    page.select_option('#f-label', '')

    # revoke a claim from the lane (the lever when the reaper is off)
    held = page.locator('#attention-list li[data-card="c-pause"]')
    held.locator('[data-action="revoke"]').click()
    page.wait_for_function(
        "() => !document.querySelector('#board [data-card=\"c-pause\"]').textContent.includes('worker-9')",
        timeout=T)
    check(srv.ok('GET', '/v1/cards/c-pause')['claim'] is None, 'revoke dropped the claim')
    # the claim was the paused run's brake: with it gone the run holds nothing, and the lane
    # no longer offers to cancel a run of a claim that is not there (it did: docs/ui)
    page.wait_for_selector('#attention-list li[data-card="c-pause"]', state='detached', timeout=T)
    check(srv.ok('GET', '/v1/runs/r-pause')['status'] == 'paused_waiting_human',
          'the revoked claim\'s paused run left the lane (it is still paused)')
    # claimed again by another worker: last_run_id still names r-pause, which says nothing
    # about the new claim
    srv.claim('c-pause', 'worker-4', lease_ms=600000)
    page.wait_for_function(
        "() => document.querySelector('#board [data-card=\"c-pause\"]').textContent.includes('worker-4')",
        timeout=T)
    page.wait_for_timeout(400)
    check(page.locator('#attention-list li[data-card="c-pause"]').count() == 0,
          'a run of an earlier claim is not the new claim\'s run_paused')
    page.locator(in_column('in_progress', 'c-pause')).click()
    page.wait_for_selector('#card-body [data-run-earlier]', timeout=T)
    check('earlier claim' in page.locator('#card-body [data-run-earlier]').inner_text(),
          'the card view says the recorded run is an earlier claim\'s')
    page.keyboard.press('Escape')
    page.locator('#card-dialog').wait_for(state='hidden', timeout=T)
    # the dialog's close event gives the focus back to the chip that opened it, a task after
    # the dialog is hidden: wait for it, or it lands after the focus below and takes it away
    page.wait_for_function("() => document.activeElement && "
                           "document.activeElement.dataset.card === 'c-pause'", timeout=T)

    # keyboard: a chip is a button; Enter opens it; focus is visible
    page.focus(in_column('ready', 'c-build'))
    page.keyboard.press('Shift+Tab')  # keyboard navigation: focus-visible applies
    page.keyboard.press('Tab')
    check(page.evaluate("document.activeElement.dataset.card") == 'c-build', 'Tab moves between chips')
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    check(outline not in ('', 'none'), 'a focused chip shows a focus ring (%s)' % outline)
    page.keyboard.press('Enter')
    page.locator('#card-dialog').wait_for(state='visible', timeout=T)
    page.wait_for_selector('#card-title:has-text("Build the release")', timeout=T)
    # the open card view follows the card live
    srv.ok('POST', '/v1/cards/c-build/comments', 'bot', {'body': 'release notes are in'})
    page.wait_for_selector('#card-body .comments li:has-text("release notes are in")', timeout=T)
    check('card_comment_added' in page.locator('#card-body .timeline').inner_text(),
          'the open card view shows a new comment and its event live')
    page.keyboard.press('Escape')
    check(page.locator('#board').get_attribute('aria-label') == 'Board columns',
          'the board is labelled for screen readers')

    # the reaper panel
    check('gate off' in page.locator('#reaper-summary').inner_text(), 'the reaper bar shows the gate')
    open_panel(page, 'reaper')
    check('off' in page.locator('#reaper-stats').inner_text(), 'the reaper panel shows the gate')
    page.click('#reaper-pass')
    page.wait_for_selector('#reaper-out:has-text("pass done")', timeout=T)
    check(True, 'run a pass now')

    # phone width: the columns swiped, nothing wider than the screen (the bars folded again)
    page.click('#bulk-toggle')
    page.click('#reaper-toggle')
    page.set_viewport_size({'width': 390, 'height': 844})
    page.wait_for_timeout(200)
    width = page.evaluate('document.documentElement.scrollWidth')
    check(width <= 392, 'no horizontal scrolling at phone width (%d)' % width)
    shot(page, 'phone.png')
    page.set_viewport_size({'width': 1400, 'height': 900})


def readonly_flows(page, srv):
    sign_in(page, srv, 'bot')
    page.wait_for_selector('#attention-list li[data-card="c-fail"]', timeout=T)
    check(page.locator('#readonly').is_visible(), 'a bot token sees the read-only banner')
    check(page.locator('[data-action]').count() == 0, 'and no action buttons')
    check(not page.locator('#bulk').is_visible() and not page.locator('#bulk-toggle').is_visible(),
          'no bulk actions')
    check(not page.locator('#new-card').is_visible(), 'no new card')
    check(not page.locator('#reaper-pass').is_visible(), 'no reaper pass button')
    page.locator(in_column('done', 'c-base')).click()
    page.wait_for_selector('#card-body h3:has-text("Timeline")', timeout=T)
    check(page.locator('#card-dialog [data-action]').count() == 0, 'no actions in the card view')
    page.keyboard.press('Escape')
    status = page.evaluate("""async (tok) => (await fetch('/v1/cards/c-base/reopen', {
        method: 'POST', headers: {Authorization: 'Bearer ' + tok,
        'Content-Type': 'application/json'}, body: JSON.stringify({to: 'ready'})})).status""",
                           srv.tok['bot'])
    check(status == 403, 'and the server refuses its reopen (%s)' % status)


def set_scope(srv, name, boards):
    """Rewrites the tokens file with token `name` scoped to `boards`."""
    with open(srv.tokens_file) as f:
        doc = json.load(f)
    for t in doc['tokens']:
        if t['name'] == name:
            t['boards'] = boards
    tmp = srv.tokens_file + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(doc, f)
    os.replace(tmp, srv.tokens_file)


def refused_flows(page, srv):
    """A stream answered 403 stops retrying and says why (DESIGN §15); a network error
    retries. The operator's token loses the board's scope and boardd restarts on the same port
    (an open stream keeps its token's rights, so the refusal comes with the reconnect)."""
    streams = []
    page.on('request', lambda r: streams.append(r.url) if '/v1/events/stream' in r.url else None)
    sign_in(page, srv, 'op')
    page.wait_for_selector('#live.on', timeout=T)
    set_scope(srv, 'op', ['other'])
    srv.srv.keep_port = True
    check(srv.srv.stop(timeout=15) == 0, 'boardd stopped for the restart')
    page.wait_for_selector('#live.off', timeout=T)
    check(page.locator('#live').inner_text() == 'reconnecting',
          'a dropped stream shows reconnecting')
    ok, detail = srv.srv.start()
    check(ok, 'boardd restarted on its port (%s)' % detail)
    page.wait_for_selector('#live.refused', timeout=T)
    msg = page.locator('#live').inner_text()
    check('refused (403)' in msg and 'default' in msg and 'boards' in msg,
          'the refusal is shown with the problem detail and what to do (%r)' % msg)
    check(page.locator('#live').is_visible(), 'where "reconnecting" was')
    shot(page, 'stream-refused.png')
    n = len(streams)
    # a retrying UI asks again within seconds (its backoff starts at 500 ms and doubles to
    # 10 s); one that stopped never does: poll 4 s and allow no new request
    for _ in range(8):
        page.wait_for_timeout(500)
        if len(streams) != n:
            break
    check(len(streams) == n, 'the UI stopped opening streams (%d, then %d requests)'
          % (n, len(streams)))
    check(page.locator('#app').is_visible() and page.locator('#logout').is_visible(),
          'the page stays signed in and usable')
    # a new sign-in starts a new stream
    set_scope(srv, 'op', ['*'])
    srv.srv.send_signal(signal.SIGHUP)
    bt.wait_for(lambda: srv.call('GET', '/v1/boards/default')[0] == 200, timeout=10)
    page.click('#logout')
    sign_in(page, srv, 'op')
    page.wait_for_selector('#live.on', timeout=T)
    check(len(streams) > n, 'signing in again opened a new live stream')


def action_errors(page, srv):
    """Every refusal or failure an action can get is shown, with the server's problem detail,
    until dismissed (role=alert): a 409 with its code and detail, a 5xx, and no answer at
    all (the old handler crashed on the latter: it read e.problem.code of a TypeError)."""
    sign_in(page, srv, 'op')
    page.wait_for_selector('#live.on', timeout=T)
    alert = page.locator('#alert')
    # a real 409: re-queue (a reopen) of a done card whose dependent has moved on
    page.locator(in_column('done', 'c-base')).click()
    page.locator('#card-dialog').wait_for(state='visible', timeout=T)
    page.locator('#card-dialog [data-action="requeue"]').click()
    alert.wait_for(state='visible', timeout=T)
    text = page.locator('#alert-text').inner_text()
    check('409' in text and 'dependents_outstanding' in text and 'c-dep' in text,
          'a refused re-queue shows the status, code and detail (%r)' % text)
    check(alert.get_attribute('role') == 'alert', 'as an alert')
    check(srv.ok('GET', '/v1/cards/c-base')['state'] == 'done', 'and nothing changed')
    page.keyboard.press('Escape')
    page.locator('#card-dialog').wait_for(state='hidden', timeout=T)
    page.wait_for_timeout(500)
    check(alert.is_visible(), 'the alert stays until dismissed')
    page.click('#alert-close')
    alert.wait_for(state='hidden', timeout=T)
    # a 5xx and no answer, on the lane's revoke of c-fail
    revoke = '**/v1/cards/c-fail/claim/revoke'
    page.route(revoke, lambda route: route.fulfill(
        status=503, content_type='application/problem+json', headers={'Retry-After': '1'},
        body=json.dumps({'type': '/problems/store_unavailable', 'title': 'Service Unavailable',
                         'status': 503, 'code': 'store_unavailable',
                         'detail': 'the store refuses writes'})))
    page.locator('#attention-list li[data-card="c-fail"] [data-action="revoke"]').click()
    alert.wait_for(state='visible', timeout=T)
    text = page.locator('#alert-text').inner_text()
    check('503' in text and 'store_unavailable' in text and 'refuses writes' in text and
          'try again' in text, 'a 5xx says it failed and to try again (%r)' % text)
    page.unroute(revoke)
    page.route(revoke, lambda route: route.abort('connectionrefused'))
    page.locator('#attention-list li[data-card="c-fail"] [data-action="revoke"]').click()
    page.wait_for_selector('#alert-text:has-text("did not answer")', timeout=T)
    check(True, 'no answer at all is said as such (%r)' % page.locator('#alert-text').inner_text())
    page.unroute(revoke)
    check(srv.ok('GET', '/v1/cards/c-fail')['claim'] is not None, 'the claim is still there')
    page.click('#alert-close')


def layout_and_focus(page, srv):
    """Long titles stay inside their boxes; awaiting_input is answered with a comment from the
    lane; the keyboard focus survives a lane item that an action answered; a cut lane says so;
    a give-up answered since is shown as history."""
    long = 'Unbroken' + 'x' * 300
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-long', 'title': long, 'state': 'in_progress'})
    ep = srv.claim('c-long', 'worker-long', lease_ms=600000)['epoch']
    srv.owned('PUT', '/v1/cards/c-long/awaiting-input', ep,
              {'marker': 'worker-long', 'awaiting_input': True})
    srv.give_up('c-gave2', 'Rebuild the search index')
    sign_in(page, srv, 'op')
    page.wait_for_selector('#live.on', timeout=T)
    item = page.locator('#attention-list li[data-card="c-long"]')
    item.wait_for(timeout=T)
    check('awaiting_input' in item.inner_text(), 'a long-titled card in the lane')
    for width in (1280, 390):
        page.set_viewport_size({'width': width, 'height': 800})
        page.wait_for_timeout(200)
        over = page.evaluate("""() => [...document.querySelectorAll(
            '#attention-list li, #board .chip, .column h2')].filter(
            (e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.outerHTML.slice(0, 80))""")
        check(not over, 'nothing overflows its box at width %d (%s)' % (width, over))
        doc = page.evaluate('document.documentElement.scrollWidth')
        check(doc <= width + 2, 'no horizontal scrolling at width %d (%d)' % (width, doc))
    page.set_viewport_size({'width': 1400, 'height': 900})
    # awaiting_input is answered with a comment, from the lane; a live update of the open
    # card while the operator types keeps the draft and the focus
    item.locator('[data-action="answer"]').click()
    page.locator('#card-dialog').wait_for(state='visible', timeout=T)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'comment-body'",
                           timeout=T)
    page.keyboard.type('Use the staging ')
    srv.ok('POST', '/v1/cards/c-long/comments', 'bot', {'body': 'meanwhile, from a bot'})
    page.wait_for_selector('#card-body .comments li:has-text("meanwhile, from a bot")', timeout=T)
    check(page.input_value('#comment-body') == 'Use the staging ' and
          page.evaluate("document.activeElement.id") == 'comment-body',
          'the draft and the focus survive a live update (%r)' % page.input_value('#comment-body'))
    page.keyboard.type('keys.')
    page.click('#comment-submit')
    page.wait_for_selector('#card-body .comments li:has-text("Use the staging keys.")', timeout=T)
    got = [(m['author'], m['body']) for m in srv.ok('GET', '/v1/cards/c-long')['comments']]
    check(('op', 'Use the staging keys.') in got, 'the answer is a comment by the operator (%s)' % got)
    page.wait_for_timeout(300)  # the card view is drawn again for the comment's event
    check(page.evaluate("document.activeElement.id") == 'comment-submit',
          'the focus stays on Comment after the view is redrawn (%s)' % page.evaluate("document.activeElement.id"))
    check(page.input_value('#comment-body') == '', 'and the box is cleared')
    page.keyboard.press('Escape')
    page.locator('#card-dialog').wait_for(state='hidden', timeout=T)
    check('gave up earlier' in page.locator(in_column('ready', 'c-gave')).inner_text(),
          'a give-up answered by a reopen shows as history on the chip, not as a reason')
    # textContent: a chip scrolled out of its column is not laid out (content-visibility),
    # and innerText, which is layout's text, is empty there
    standing = page.locator(in_column('blocked', 'c-gave2')).text_content()
    check('gave up: run_pruned' in standing, 'a standing one as a reason (%r)' % standing)
    # keyboard: Re-queue of c-gave2 from the lane; its item leaves, the focus goes on
    page.focus('#attention-list li[data-card="c-gave2"] [data-action="requeue"]')
    page.keyboard.press('Enter')
    page.wait_for_selector('#attention-list li[data-card="c-gave2"]', state='detached', timeout=T)
    page.wait_for_timeout(300)
    where = page.evaluate("""() => { const a = document.activeElement;
        return a && (a.closest('#attention') ? 'lane' : a.tagName); }""")
    check(where == 'lane', 'the focus stays in the lane when an action answered the item (%s)'
          % where)
    page.keyboard.press('Tab')
    check(page.evaluate("!!document.activeElement.closest('#attention')"),
          'and Tab goes on from there')
    # a live update redraws what changed, not every chip (a board of thousands of cards was
    # laid out again twice per event): an untouched chip stays the same element
    page.evaluate("document.querySelector('#board [data-card=\"c-docs\"]').boarddMark = 'kept'")
    srv.ok('PATCH', '/v1/cards/c-build/state', 'op', {'to': 'review'})
    page.wait_for_selector(in_column('review', 'c-build'), timeout=T)
    page.wait_for_timeout(500)  # and the lane's re-read, which draws the board again
    check(page.evaluate("document.querySelector('#board [data-card=\"c-docs\"]').boarddMark") == 'kept',
          'a live update keeps the chips it did not change')
    # a lane cut at its limit says so
    def cut(route):
        r = route.fetch()
        j = r.json()
        j['truncated'] = True
        route.fulfill(response=r, body=json.dumps(j))
    page.route('**/v1/attention?*', cut)
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'c-poke', 'title': 'poke', 'state': 'inbox'})
    page.wait_for_selector('#attention-count:has-text("more need attention")', timeout=T)
    check(True, 'a truncated lane says more cards need attention')
    page.unroute('**/v1/attention?*')


def gone_flows(page, srv):
    """A board that does not exist: named in the address, its stream answered 404, or gone
    from under an open page (boardd restarted on another store). Each stops following it,
    says so, and offers the way back to the board list (an old UI retried a 404 for ever)."""
    streams = []
    page.on('request', lambda r: streams.append(r.url) if '/v1/events/stream' in r.url else None)
    # the address names no board
    page.goto(srv.url + '/ui/#board=ghost')
    page.fill('#token', srv.tok['op'])
    page.click('#login-form button[type=submit]')
    page.wait_for_selector('#board [data-column]', timeout=T)
    notice = page.locator('#notice')
    notice.wait_for(state='visible', timeout=T)
    check('ghost' in notice.inner_text() and 'default' in notice.inner_text(),
          'a board named in the address that does not exist is said so (%r)' % notice.inner_text())
    check(page.locator('#board-select').input_value() == 'default', 'and the default board opens')
    page.click('#notice-close')
    notice.wait_for(state='hidden', timeout=T)

    # the stream answers 404 (a server or proxy without the route): stop, say why
    cfg = srv.ok('GET', '/v1/boards/default')
    cfg['name'] = 'team-x'
    srv.ok('PUT', '/v1/boards/team-x', 'op', cfg)
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'x-1', 'board': 'team-x', 'title': 'On team x',
                                        'state': 'ready'})
    page.reload()
    page.wait_for_selector('#board [data-column]', timeout=T)
    route = '**/v1/events/stream?board=team-x*'
    page.route(route, lambda r: r.fulfill(
        status=404, content_type='application/problem+json',
        body=json.dumps({'type': '/problems/not_found', 'title': 'Not Found', 'status': 404,
                         'code': 'not_found', 'detail': 'no such route'})))
    page.select_option('#board-select', 'team-x')
    page.wait_for_selector(in_column('ready', 'x-1'), timeout=T)
    page.wait_for_selector('#live.refused', timeout=T)
    msg = page.locator('#live').inner_text()
    check('404' in msg and 'no such route' in msg, 'a stream answered 404 says so (%r)' % msg)
    n = len(streams)
    for _ in range(8):  # a retrying UI asks again within 0.5 to 2 s
        page.wait_for_timeout(500)
        if len(streams) != n:
            break
    check(len(streams) == n, 'and stops asking (%d, then %d stream requests)' % (n, len(streams)))
    page.unroute(route)

    # the board goes from under the open page: boardd comes back on the same port with
    # another (empty) store
    page.select_option('#board-select', 'default')
    page.wait_for_selector('#live.on', timeout=T)
    page.select_option('#board-select', 'team-x')
    page.wait_for_selector('#live.on', timeout=T)
    srv.srv.keep_port = True
    check(srv.srv.stop(timeout=15) == 0, 'boardd stopped for the restart')
    srv.srv.store = 'fs:' + os.path.join(srv.dir, 'data-empty')
    ok, detail = srv.srv.start()
    check(ok, 'boardd restarted on another store (%s)' % detail)
    notice.wait_for(state='visible', timeout=T)
    text = notice.inner_text()
    check('team-x' in text and 'does not exist' in text and 'no board team-x' in text,
          'the board gone from under the page is said so, with the server\'s detail (%r)' % text)
    check(page.locator('#notice-action').inner_text() == 'Back to the board list',
          'with the way back')
    check('team-x' in page.locator('#live').inner_text(), 'the live badge says it stopped')
    shot(page, 'board-gone.png')
    n = len(streams)
    page.wait_for_timeout(2500)
    check(len(streams) == n, 'no stream of the gone board is asked for (%d, then %d)'
          % (n, len(streams)))
    page.click('#notice-action')
    notice.wait_for(state='hidden', timeout=T)
    page.wait_for_selector('#live.on', timeout=T)
    check(page.locator('#board-select').input_value() == 'default',
          'back on the board list: the default board is open and live')
    check(page.locator('#board-select option[value="team-x"]').count() == 0,
          'and the gone board is no longer offered')


def browser_tools():
    """Playwright's sync_playwright, once Debian's chromium and the pinned axe-playwright-python
    are there (else skip, and fail in CI)."""
    if not os.access(CHROMIUM, os.X_OK):
        bt.skip_or_fail('no chromium at %s' % CHROMIUM)
    from playwright.sync_api import sync_playwright
    try:
        import axe_playwright_python  # noqa: F401
    except ImportError:
        bt.skip_or_fail('axe-playwright-python is not installed (tests/requirements.txt)')
    return sync_playwright


def run_flows(p, profile, srv, flows):
    """Runs each flow(page, srv) on a page of its own in one headless chromium of `profile`
    (1400x900); a flow that raises fails its check. Returns the console errors and page
    errors, each prefixed with its flow's name."""
    ctx = p.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=ARGS,
        viewport={'width': 1400, 'height': 900})
    errors = []
    try:
        for flow in flows:
            page = ctx.new_page()
            page.on('console', lambda m, f=flow: errors.append('%s: %s' % (f.__name__, m.text))
                    if m.type == 'error' else None)
            page.on('pageerror', lambda e, f=flow: errors.append('%s: %s' % (f.__name__, e)))
            try:
                flow(page, srv)
            except Exception as e:
                check(False, '%s raised %r' % (flow.__name__, e))
            page.close()
    finally:
        ctx.close()
    return errors


def end_run(srv, profile):
    """Stops boardd (a clean SIGTERM exit is asserted), drops the browser profile, exits with
    the summary."""
    rc = srv.stop()
    check(rc == 0, 'boardd stopped cleanly on SIGTERM (exit %s)' % rc)
    shutil.rmtree(profile, ignore_errors=True)
    sys.exit(bt.summary())


def main():
    if not os.access(CHROMIUM, os.X_OK):
        bt.skip_or_fail('no chromium at %s' % CHROMIUM)
    from playwright.sync_api import sync_playwright

    srv = Board(sys.argv[1], ['--lease-min-ms', '100'])
    profile = tempfile.mkdtemp(prefix='boardd-chromium-')
    try:
        seed(srv)
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                viewport={'width': 1400, 'height': 900})
            errors = []
            try:
                for flow in (operator_flows, readonly_flows, action_errors, layout_and_focus,
                             refused_flows, gone_flows):
                    page = ctx.new_page()
                    # the failures a flow provokes on purpose, as the browser logs them: a
                    # restarting boardd answers 503 for a moment (the UI retries those), a
                    # refused connection, a board or route that is not there (404)
                    allowed = {refused_flows: ('503',),
                               action_errors: ('503', 'ERR_CONNECTION_REFUSED'),
                               gone_flows: ('503', '404', 'net::ERR_')}.get(flow, ())
                    page.on('console', lambda m, allowed=allowed: errors.append(m.text) if (
                        m.type == 'error' and not any(a in m.text for a in allowed)) else None)
                    page.on('pageerror', lambda e: errors.append(str(e)))
                    try:
                        flow(page, srv)
                    except Exception as e:
                        check(False, '%s raised %r' % (flow.__name__, e))
                        shot(page, 'failure-%s.png' % flow.__name__)
                    page.close()
            finally:
                ctx.close()
            csp = [e for e in errors if 'Content Security Policy' in e]
            check(not csp, 'no CSP violations (%s)' % csp)
            bad = [e for e in errors if 'Content Security Policy' not in e and
                   '403' not in e and '409' not in e]
            check(not bad, 'no script errors (%s)' % bad)
    finally:
        rc = srv.stop()
        check(rc == 0, 'boardd stopped cleanly on SIGTERM (exit %s)' % rc)
        shutil.rmtree(profile, ignore_errors=True)
    sys.exit(bt.summary())


if __name__ == '__main__':
    main()
