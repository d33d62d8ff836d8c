#!/usr/bin/env python3
"""The history checker must be able to fail: each check (a..j) fires on a hand-made history
that breaks its invariant, and none fires on the good history they are all made from (a..g:
good(); h..j, DESIGN §17: good_policy(), a board with a column limit, max_claims, a retry
policy and a scheduled card).

usage: test_checker.py      (exit status 0 when every case holds)
"""
import copy
import datetime
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402

ACTORS = {'op': 'operator', 'w0': 'worker', 'w1': 'worker', 'w2': 'worker', 'b0': 'bot'}
T = 1000000.0  # the history's start, seconds


def iso(t):
    return datetime.datetime.fromtimestamp(T + t, datetime.timezone.utc).isoformat(
        timespec='milliseconds').replace('+00:00', 'Z')


def op(actor, kind, t, st=200, card='h', tok=None, resp=None, dt=0.001, **kw):
    o = {'actor': actor, 'kind': kind, 't0': T + t, 't1': T + t + dt, 'st': st, 'card': card,
         'tok': tok, 'resp': resp or {}, 'run': None, 'tag': None, 'lease_ms': 0}
    o.update(kw)
    return o


def ev(t, type_, actor, reason=None, card='h', **payload):
    return {'at': iso(t), 'type': type_, 'card_id': card, 'actor': actor, 'reason': reason,
            'payload': payload}


def good():
    """w0 claims h, runs r1 to finished and dies; the reaper reclaims it after the lease and
    files it done; w0's late write is refused; the operator reopens it; a bot moves it; w1
    claims it, parks its run r2 for a human and goes away (the reaper must keep it)."""
    ops = [
        op('op', 'create', 0.0, 201, resp={'id': 'h'}),
        op('w0', 'claim', 0.010, tok=['w0', 1], resp={'fresh': True, 'epoch': 1},
           lease_ms=1000),
        op('w0', 'run_create', 0.020, 201, tok=['w0', 1], run='r1', status='running',
           lease_ms=1000),
        op('w0', 'last_run', 0.030, tok=['w0', 1], run='r1'),
        op('w0', 'state', 0.040, tok=['w0', 1], tag='w0#1', to='in_progress',
           resp={'state_reason': 'w0#1'}),
        op('w0', 'renew', 0.300, tok=['w0', 1], lease_ms=1000),
        op('w0', 'run_patch', 0.310, tok=['w0', 1], run='r1', status='finished',
           lease_ms=1000),
        op('w0', 'awaiting', 1.500, 409, tok=['w0', 1], awaiting=True),
        op('op', 'reopen', 2.000, to='ready'),
        op('b0', 'move', 2.100, frm='ready', to='review'),
        op('w1', 'claim', 2.200, tok=['w1', 3], resp={'fresh': True, 'epoch': 3},
           lease_ms=1000),
        op('w1', 'run_create', 2.210, 201, tok=['w1', 3], run='r2', status='running',
           lease_ms=1000),
        op('w1', 'last_run', 2.220, tok=['w1', 3], run='r2'),
        op('w1', 'heartbeat', 2.500, tok=['w1', 3], run='r2', lease_ms=1000),
        op('w1', 'run_patch', 2.600, tok=['w1', 3], run='r2', status='paused_waiting_human',
           lease_ms=1000),
    ]
    events = [
        ev(0.0, 'card_created', 'op'),
        ev(0.010, 'card_claimed', 'w0', marker='w0', epoch=1),
        ev(0.020, 'run_created', 'w0', run_id='r1', status='running', marker='w0'),
        ev(0.030, 'card_last_run', 'w0', run_id='r1'),
        ev(0.040, 'card_state_changed', 'w0', 'w0#1', **{'from': 'ready', 'to': 'in_progress'}),
        ev(0.310, 'run_updated', 'w0', run_id='r1', status='finished', marker='w0'),
        ev(1.400, 'card_claimed', '', 'watchdog', marker='reaper:h', epoch=2,
           reclaimed_from={'marker': 'w0', 'epoch': 1}),
        ev(1.400, 'card_state_changed', 'reaper:h', 'run_finished',
           **{'from': 'in_progress', 'to': 'done'}),
        ev(1.400, 'card_released', '', 'watchdog', marker='reaper:h', epoch=2),
        ev(2.000, 'card_state_changed', 'op', None, reopened=True,
           **{'from': 'done', 'to': 'ready'}),
        ev(2.100, 'card_state_changed', 'b0', **{'from': 'ready', 'to': 'review'}),
        ev(2.200, 'card_claimed', 'w1', marker='w1', epoch=3),
        ev(2.210, 'run_created', 'w1', run_id='r2', status='running', marker='w1'),
        ev(2.220, 'card_last_run', 'w1', run_id='r2'),
        ev(2.500, 'run_updated', 'w1', run_id='r2', status='running', marker='w1'),
        ev(2.600, 'run_updated', 'w1', run_id='r2', status='paused_waiting_human',
           marker='w1'),
    ]
    cards = {'h': {'id': 'h', 'state': 'review', 'claim': {'marker': 'w1', 'epoch': 3},
                   'claim_epoch': 3, 'last_run_id': 'r2', 'gave_up': None,
                   'awaiting_input': False}}
    runs = {'r1': {'status': 'finished'}, 'r2': {'status': 'paused_waiting_human'}}
    return {'ops': ops, 'events': events, 'cards': cards, 'runs': runs}


def numbered(h):
    for i, o in enumerate(h['ops']):
        o['i'] = i
    for k, e in enumerate(h['events']):
        e.setdefault('seq', k + 1)
    return h


def run(h, refile='any', cross_doc_order=True, boards=None):
    h = numbered(h)
    return checker.check(h['ops'], h['events'], h['cards'], h['runs'], ACTORS, refile,
                         cross_doc_order=cross_doc_order, boards=boards)


def find_ev(h, type_, **want):
    for k, e in enumerate(h['events']):
        if e['type'] == type_ and all(e['payload'].get(a) == b for a, b in want.items()):
            return k
    raise KeyError((type_, want))


def find_op(h, actor, kind):
    return next(k for k, o in enumerate(h['ops']) if o['actor'] == actor and o['kind'] == kind)


# ---- the broken histories, one per way of breaking an invariant ---------------------------------

def a_epoch_repeats(h):
    """w1's fresh claim is handed epoch 2 again (the reaper's)."""
    h['ops'][find_op(h, 'w1', 'claim')].update(tok=['w1', 2], resp={'fresh': True, 'epoch': 2})
    h['events'][find_ev(h, 'card_claimed', marker='w1')]['payload']['epoch'] = 2


def a_epoch_twice_to_clients(h):
    """Two workers' fresh claims are answered with the same epoch (w2's not in the log)."""
    h['ops'].append(op('w2', 'claim', 2.300, card='h', tok=['w2', 3],
                       resp={'fresh': True, 'epoch': 3}, lease_ms=1000))


def b_zombie_write_accepted(h):
    """w0's late write with its old token (epoch 1) is accepted after w1's claim (epoch 3)."""
    h['ops'].append(op('w0', 'awaiting', 2.300, tok=['w0', 1], awaiting=True))
    h['events'].insert(find_ev(h, 'card_last_run', run_id='r2'),
                       ev(2.300, 'card_updated', 'w0', fields=['awaiting_input']))
    h['cards']['h']['awaiting_input'] = True


def b_release_by_non_holder(h):
    """A release logged for a token that does not hold the card."""
    h['ops'].append(op('w0', 'release', 2.300, tok=['w0', 1]))
    h['events'].insert(find_ev(h, 'card_last_run', run_id='r2'),
                       ev(2.300, 'card_released', 'w0', marker='w0', epoch=1))


def c_two_holders(h):
    """w2 acquires h (epoch 2) while w0 still holds it, without a reclaim."""
    h['ops'].append(op('w2', 'claim', 0.050, tok=['w2', 2], resp={'fresh': True, 'epoch': 2},
                       lease_ms=1000))
    h['events'].insert(5, ev(0.050, 'card_claimed', 'w2', marker='w2', epoch=2))
    e = h['events'][find_ev(h, 'card_claimed', marker='reaper:h')]
    e['payload']['epoch'] = 2
    e['payload']['reclaimed_from'] = {'marker': 'w2', 'epoch': 2}
    # the reaper's reclaim now comes from w2 with the same epoch: bump it
    e['payload']['epoch'] = 3
    h['events'][find_ev(h, 'card_released', marker='reaper:h')]['payload']['epoch'] = 3
    h['ops'][find_op(h, 'w1', 'claim')].update(tok=['w1', 4], resp={'fresh': True, 'epoch': 4})
    for o in h['ops']:
        if o['actor'] == 'w1' and o['tok']:
            o['tok'] = ['w1', 4]
    h['events'][find_ev(h, 'card_claimed', marker='w1')]['payload']['epoch'] = 4
    h['cards']['h'].update(claim={'marker': 'w1', 'epoch': 4}, claim_epoch=4)


def c_reclaim_wrong_holder(h):
    """The reaper's reclaim names a token that never held the card."""
    h['events'][find_ev(h, 'card_claimed', marker='reaper:h')]['payload'][
        'reclaimed_from'] = {'marker': 'w2', 'epoch': 1}


def c_renew_after_newer_claim(h):
    """w0's renewal with epoch 1 is accepted after w1's claim of epoch 3 was acknowledged."""
    h['ops'].append(op('w0', 'renew', 2.400, tok=['w0', 1], lease_ms=1000))


def d_bot_leaves_done(h):
    """A bot's SetStateFrom takes the card out of done (instead of the operator's reopen)."""
    k = find_op(h, 'op', 'reopen')
    h['ops'][k] = op('b0', 'move', 2.000, frm='done', to='ready')
    h['events'][find_ev(h, 'card_state_changed', reopened=True)] = ev(
        2.000, 'card_state_changed', 'b0', **{'from': 'done', 'to': 'ready'})


def d_owner_reopens(h):
    """A worker's owned write moves the card out of done."""
    h['ops'].insert(8, op('w2', 'claim', 1.600, tok=['w2', 3], resp={'fresh': True, 'epoch': 3},
                          lease_ms=1000))
    h['ops'][find_op(h, 'op', 'reopen')] = op('w2', 'state', 2.000, tok=['w2', 3], tag='w2#1',
                                               to='ready', resp={'state_reason': 'w2#1'})
    h['ops'].insert(10, op('w2', 'release', 2.050, tok=['w2', 3]))
    k = find_ev(h, 'card_state_changed', reopened=True)
    h['events'][k] = ev(2.000, 'card_state_changed', 'w2', 'w2#1',
                        **{'from': 'done', 'to': 'ready'})
    h['events'].insert(k, ev(1.600, 'card_claimed', 'w2', marker='w2', epoch=3))
    h['events'].insert(k + 2, ev(2.050, 'card_released', 'w2', marker='w2', epoch=3))
    h['ops'][find_op(h, 'w1', 'claim')].update(tok=['w1', 4], resp={'fresh': True, 'epoch': 4})
    for o in h['ops']:
        if o['actor'] == 'w1' and o['tok']:
            o['tok'] = ['w1', 4]
    h['events'][find_ev(h, 'card_claimed', marker='w1')]['payload']['epoch'] = 4
    h['cards']['h'].update(claim={'marker': 'w1', 'epoch': 4}, claim_epoch=4)


def d_bot_refiles(h):
    """A bot refiles done -> blocked (a violation only under refile='operator')."""
    h['ops'].insert(8, op('b0', 'move', 1.800, frm='done', to='blocked'))
    k = find_ev(h, 'card_state_changed', reopened=True)
    h['events'].insert(k, ev(1.800, 'card_state_changed', 'b0',
                             **{'from': 'done', 'to': 'blocked'}))
    h['events'][k + 1]['payload']['from'] = 'blocked'


def e_reclaim_before_lease_end(h):
    """The reaper reclaims w0's claim at 0.9 s; w0 renewed at 0.3 s for 1000 ms."""
    for k in range(find_ev(h, 'card_claimed', marker='reaper:h'), find_ev(h, 'card_released',
                                                                         marker='reaper:h') + 1):
        h['events'][k]['at'] = iso(0.900)


def e_reclaim_paused_run(h):
    """The reaper reclaims w1's claim, whose run has been paused since before its lease ran
    out, and releases it."""
    h['events'] += [
        ev(3.700, 'card_claimed', '', 'watchdog', marker='reaper:h', epoch=4,
           reclaimed_from={'marker': 'w1', 'epoch': 3}),
        ev(3.700, 'card_released', '', 'watchdog', marker='reaper:h', epoch=4)]
    h['cards']['h'].update(claim=None, claim_epoch=4)


def e_reclaim_live_run(h):
    """As above, but the run was never paused: running, lock renewed, never promoted."""
    e_reclaim_paused_run(h)
    k = find_op(h, 'w1', 'run_patch')
    del h['ops'][k]
    del h['events'][find_ev(h, 'run_updated', status='paused_waiting_human')]
    h['runs']['r2']['status'] = 'running'


def e_reclaim_heartbeating_run(h):
    """As above, with the run's heartbeats going on past the claim's lease (a live run behind
    a lapsed claim: the reaper must keep it)."""
    e_reclaim_live_run(h)
    h['ops'].append(op('w1', 'heartbeat', 3.500, tok=['w1', 3], run='r2', lease_ms=1000))
    h['events'].insert(len(h['events']) - 2, ev(3.500, 'run_updated', 'w1', run_id='r2',
                                                 status='running', marker='w1'))


def e_promotion_logged_after_reclaim(h):
    """The reaper promotes r2 (its lock long expired) and reclaims w1's claim, but the log
    has the reclaim first: a steal from a running run on the FS twin, whose log is in commit
    order; on the Mongo twin (cross_doc_order=False) the promotion, on another document,
    committed first and was delivered second."""
    e_reclaim_live_run(h)
    h['events'].append(ev(3.690, 'run_updated', '', 'watchdog', run_id='r2',
                          status='failed_resumable', failure_code='PROCESS_ORPHANED',
                          marker='w1'))
    h['runs']['r2']['status'] = 'failed_resumable'


def e_promote_live_lock(h):
    """The reaper promotes r2 50 ms after its owner's heartbeat renewed the lock for 1 s."""
    k = find_ev(h, 'run_updated', status='paused_waiting_human')
    h['events'].insert(k, ev(2.550, 'run_updated', '', 'watchdog', run_id='r2',
                             status='failed_resumable', failure_code='PROCESS_ORPHANED',
                             marker='w1'))


def e_files_against_run(h):
    """The reaper files the card done (run_finished) though its run failed."""
    h['ops'][find_op(h, 'w0', 'run_patch')]['status'] = 'failed'
    h['events'][find_ev(h, 'run_updated', status='finished')]['payload']['status'] = 'failed'
    h['runs']['r1']['status'] = 'failed'


def f_lost_event(h):
    """The bot's acknowledged move has no event."""
    del h['events'][find_ev(h, 'card_state_changed', to='review')]


def f_refused_left_event(h):
    """w0's refused (409) late write left an event."""
    h['events'].insert(find_ev(h, 'card_state_changed', reopened=True),
                       ev(1.500, 'card_updated', 'w0', fields=['awaiting_input']))


def f_duplicate_event(h):
    """The bot's move is in the log twice."""
    k = find_ev(h, 'card_state_changed', to='review')
    h['events'].insert(k + 1, copy.deepcopy(h['events'][k]))


def f_real_time_order(h):
    """The bot's move (acknowledged at 2.101) is logged after w1's claim (sent at 2.200)."""
    k = find_ev(h, 'card_state_changed', to='review')
    h['events'][k]['seq'], h['events'][k + 1]['seq'] = k + 2, k + 1
    h['events'][k], h['events'][k + 1] = h['events'][k + 1], h['events'][k]


def f_order_of_seqs(h):
    """The log's seqs go backwards."""
    h['events'][3]['seq'] = 2


def g_final_card(h):
    """The final card is in another column than the log put it in."""
    h['cards']['h']['state'] = 'ready'


def g_final_run(h):
    """The final run has another status than the log gave it."""
    h['runs']['r2']['status'] = 'running'


def g_final_epoch(h):
    """The final card's epoch is not the last one logged."""
    h['cards']['h']['claim_epoch'] = 7
    h['cards']['h']['claim']['epoch'] = 7


# ---- DESIGN §17: limits, schedules, retries (checks h, i, j) ------------------------------------

BOARDS = {'default': {'limits': {'ready': 1}, 'max_claims': 2, 'completed': 'done',
                      'failed': 'blocked',
                      'retry': {'max_attempts': 2, 'backoff_ms': 1000, 'max_backoff_ms': 4000}}}


def good_policy():
    """ready has limit 1, the board max_claims 2, retries max_attempts 2 (backoff 1 s).
    w0 claims k1 from ready, moves it to in_progress (it still counts against ready), and
    releases it with retry (attempt 1, not_before +1 s); w1 holds k3 meanwhile. w2's claim of
    the scheduled k2 is refused not_yet. w1 claims k1 after its not_before and retries it:
    attempt 2 of 2, so k1 is filed into blocked (attempts_exhausted). The operator reopens
    it (attempts 0); w0 claims it and files it done. w0 claims k2 once its time passed and
    releases it; a bot schedules it again."""
    ops = [
        op('op', 'create', 0.0, 201, card='k1', resp={'id': 'k1'}),
        op('op', 'create', 0.001, 201, card='k2', resp={'id': 'k2'}, not_before=T + 5.0),
        op('op', 'create', 0.002, 201, card='k3', resp={'id': 'k3'}),
        op('w0', 'claim', 0.100, card='k1', tok=['w0', 1], resp={'fresh': True, 'epoch': 1},
           lease_ms=60000),
        op('w1', 'claim', 0.200, card='k3', tok=['w1', 1], resp={'fresh': True, 'epoch': 1},
           lease_ms=60000),
        op('w0', 'state', 0.300, card='k1', tok=['w0', 1], tag='w0#1', to='in_progress',
           resp={'state_reason': 'w0#1'}),
        op('w0', 'release', 0.400, card='k1', tok=['w0', 1], retry=True,
           resp={'attempts': 1, 'not_before': iso(1.400)}),
        op('w2', 'claim', 0.500, 409, card='k2', resp={'code': 'not_yet'}),
        op('w1', 'release', 0.600, card='k3', tok=['w1', 1]),
        op('w1', 'claim', 1.500, card='k1', tok=['w1', 2], resp={'fresh': True, 'epoch': 2},
           lease_ms=60000),
        op('w1', 'release', 1.600, card='k1', tok=['w1', 2], retry=True,
           resp={'attempts': 2, 'state': 'blocked'}),
        op('op', 'reopen', 2.000, card='k1', to='ready'),
        op('w0', 'claim', 2.100, card='k1', tok=['w0', 3], resp={'fresh': True, 'epoch': 3},
           lease_ms=60000),
        op('w0', 'state', 2.200, card='k1', tok=['w0', 3], tag='w0#2', to='done',
           resp={'state_reason': 'w0#2'}),
        op('w0', 'release', 2.210, card='k1', tok=['w0', 3]),
        op('w0', 'claim', 5.100, card='k2', tok=['w0', 1], resp={'fresh': True, 'epoch': 1},
           lease_ms=60000),
        op('w0', 'release', 5.200, card='k2', tok=['w0', 1]),
        op('b0', 'patch', 5.300, card='k2', not_before=T + 9.0),
    ]
    events = [
        ev(0.0, 'card_created', 'op', card='k1', state='ready'),
        ev(0.001, 'card_created', 'op', card='k2', state='ready'),
        ev(0.002, 'card_created', 'op', card='k3', state='in_progress'),
        ev(0.100, 'card_claimed', 'w0', card='k1', marker='w0', epoch=1),
        ev(0.200, 'card_claimed', 'w1', card='k3', marker='w1', epoch=1),
        ev(0.300, 'card_state_changed', 'w0', 'w0#1', card='k1',
           **{'from': 'ready', 'to': 'in_progress'}),
        ev(0.400, 'card_released', 'w0', card='k1', marker='w0', epoch=1, retry=True,
           attempts=1, not_before=iso(1.400)),
        ev(0.600, 'card_released', 'w1', card='k3', marker='w1', epoch=1),
        ev(1.500, 'card_claimed', 'w1', card='k1', marker='w1', epoch=2),
        ev(1.600, 'card_state_changed', '', 'attempts_exhausted', card='k1',
           **{'from': 'in_progress', 'to': 'blocked'}),
        ev(1.600, 'card_gave_up', '', 'attempts_exhausted', card='k1',
           gave_up={'reason': 'attempts_exhausted', 'state': 'blocked'}),
        ev(1.600, 'card_released', 'w1', card='k1', marker='w1', epoch=2, retry=True,
           attempts=2),
        ev(2.000, 'card_state_changed', 'op', None, card='k1', reopened=True,
           **{'from': 'blocked', 'to': 'ready'}),
        ev(2.100, 'card_claimed', 'w0', card='k1', marker='w0', epoch=3),
        ev(2.200, 'card_state_changed', 'w0', 'w0#2', card='k1', **{'from': 'ready', 'to': 'done'}),
        ev(2.210, 'card_released', 'w0', card='k1', marker='w0', epoch=3),
        ev(5.100, 'card_claimed', 'w0', card='k2', marker='w0', epoch=1),
        ev(5.200, 'card_released', 'w0', card='k2', marker='w0', epoch=1),
        ev(5.300, 'card_updated', 'b0', card='k2', fields=['not_before']),
    ]
    for e in events:
        e['board'] = 'default'
    cards = {
        'k1': {'id': 'k1', 'state': 'done', 'claim': None, 'claim_epoch': 3, 'last_run_id': None,
               'gave_up': {'reason': 'attempts_exhausted'}, 'awaiting_input': False,
               'attempts': 0, 'not_before': None},
        'k2': {'id': 'k2', 'state': 'ready', 'claim': None, 'claim_epoch': 1,
               'last_run_id': None, 'gave_up': None, 'awaiting_input': False, 'attempts': 0,
               'not_before': iso(9.0)},
        'k3': {'id': 'k3', 'state': 'in_progress', 'claim': None, 'claim_epoch': 1,
               'last_run_id': None, 'gave_up': None, 'awaiting_input': False, 'attempts': 0,
               'not_before': None}}
    return {'ops': ops, 'events': events, 'cards': cards, 'runs': {}}


def add_claim(h, actor, card, t, epoch, state, release_at=None):
    """actor's fresh claim of card at t (and its release at release_at)."""
    h['ops'].append(op(actor, 'claim', t, card=card, tok=[actor, epoch],
                       resp={'fresh': True, 'epoch': epoch}, lease_ms=60000))
    e = ev(t, 'card_claimed', actor, card=card, marker=actor, epoch=epoch)
    e['board'] = 'default'
    h['events'].append(e)
    if release_at is not None:
        h['ops'].append(op(actor, 'release', release_at, card=card, tok=[actor, epoch]))
        e = ev(release_at, 'card_released', actor, card=card, marker=actor, epoch=epoch)
        e['board'] = 'default'
        h['events'].append(e)
    h['events'].sort(key=lambda x: x['at'])
    h['cards'][card].update(claim_epoch=epoch)


def h_column_over_limit(h):
    """w2 claims a second card from ready while k1's claim (taken from ready, then moved to
    in_progress) still lives: 2 claims from ready, whose limit is 1."""
    k = find_op(h, 'op', 'create')
    h['ops'].insert(k, op('op', 'create', 0.003, 201, card='k4', resp={'id': 'k4'}))
    e = ev(0.003, 'card_created', 'op', card='k4', state='ready')
    e['board'] = 'default'
    h['events'].insert(3, e)
    h['cards']['k4'] = {'id': 'k4', 'state': 'ready', 'claim': None, 'claim_epoch': 0,
                        'last_run_id': None, 'gave_up': None, 'awaiting_input': False,
                        'attempts': 0, 'not_before': None}
    add_claim(h, 'w2', 'k4', 0.350, 1, 'ready', 0.360)


def h_board_over_max_claims(h):
    """w2 claims k2 is not possible (scheduled); it claims a third card from in_progress while
    k1 and k3 are held: 3 live claims on a board with max_claims 2."""
    h['ops'].insert(3, op('op', 'create', 0.003, 201, card='k5', resp={'id': 'k5'}))
    e = ev(0.003, 'card_created', 'op', card='k5', state='in_progress')
    e['board'] = 'default'
    h['events'].insert(3, e)
    h['cards']['k5'] = {'id': 'k5', 'state': 'in_progress', 'claim': None, 'claim_epoch': 0,
                        'last_run_id': None, 'gave_up': None, 'awaiting_input': False,
                        'attempts': 0, 'not_before': None}
    add_claim(h, 'w2', 'k5', 0.250, 1, 'in_progress', 0.260)


def h_release_logged_after_claim(h):
    """w2 claims k4 from ready at 0.4005 s, just as w0's retry release of k1 (sent at 0.400)
    frees ready's one slot; the log has the claim first. On the FS twin (one serial log) two
    claims from ready were live at once; on the Mongo twin (two cards' events in delivery
    order) the release may have committed first: no violation."""
    h_column_over_limit(h)
    for o in h['ops']:
        if o['card'] == 'k4' and o['actor'] == 'w2':
            o['t0'] += 0.0505
            o['t1'] += 0.0505
    for e in h['events']:
        if e['card_id'] == 'k4' and e['actor'] == 'w2':
            e['at'] = iso(capacity_at(e) - T + 0.0505)
    h['events'].sort(key=lambda x: x['at'])
    claim = h['events'].pop(find_ev(h, 'card_claimed', marker='w2'))
    h['events'].insert(find_ev(h, 'card_released', marker='w0', epoch=1, retry=True), claim)


def i_claim_before_created_schedule(h):
    """w0 claims k2 at 4.0 s; it was created with not_before 5.0 s."""
    for o in h['ops']:
        if o['card'] == 'k2' and o['actor'] == 'w0':
            o['t0'] -= 1.1
            o['t1'] -= 1.1
    for e in h['events']:
        if e['card_id'] == 'k2' and e['actor'] == 'w0':
            e['at'] = iso(capacity_at(e) - T - 1.1)


def i_claim_before_retry_schedule(h):
    """w1 claims k1 at 1.2 s; the retry at 0.4 s scheduled it for 1.4 s."""
    for o in h['ops']:
        if o['card'] == 'k1' and o['actor'] == 'w1' and o['kind'] == 'claim':
            o['t0'] -= 0.3
            o['t1'] -= 0.3
    e = h['events'][find_ev(h, 'card_claimed', marker='w1', epoch=2)]
    e['at'] = iso(1.200)


def i_claim_before_patched_schedule(h):
    """w2 claims k2 at 6.0 s; the bot's PATCH at 5.3 s put it at 9.0 s."""
    add_claim(h, 'w2', 'k2', 6.000, 2, 'ready', 6.100)


def i_final_not_before(h):
    """The final card k2 has another not_before than the bot's PATCH gave it."""
    h['cards']['k2']['not_before'] = iso(8.0)


def j_attempts_payload(h):
    """The first retry release says attempts 3 (it is the first)."""
    h['events'][find_ev(h, 'card_released', marker='w0', epoch=1, retry=True)][
        'payload']['attempts'] = 3


def j_exhausted_not_filed(h):
    """The retry that reaches max_attempts (2) leaves k1 where it was."""
    del h['events'][find_ev(h, 'card_gave_up', gave_up={'reason': 'attempts_exhausted',
                                                           'state': 'blocked'})]
    k = next(k for k, e in enumerate(h['events']) if e['reason'] == 'attempts_exhausted')
    del h['events'][k]
    k = find_ev(h, 'card_state_changed', reopened=True)
    h['events'][k]['payload']['from'] = 'in_progress'
    del h['events'][k]
    del h['ops'][find_op(h, 'op', 'reopen')]
    h['cards']['k1']['gave_up'] = None


def j_exhausted_too_early(h):
    """The first retry (attempt 1 of 2) already files k1 attempts_exhausted."""
    k = find_ev(h, 'card_released', marker='w0', epoch=1, retry=True)
    ex = [ev(0.400, 'card_state_changed', '', 'attempts_exhausted', card='k1',
             **{'from': 'in_progress', 'to': 'blocked'}),
          ev(0.400, 'card_state_changed', 'op', None, card='k1', reopened=True,
             **{'from': 'blocked', 'to': 'in_progress'})]
    for e in ex:
        e['board'] = 'default'
    h['events'][k:k] = ex[:1]
    h['events'][k + 2:k + 2] = ex[1:]
    h['ops'].append(op('op', 'reopen', 0.450, card='k1', to='in_progress'))


def j_no_reset_on_completion(h):
    """k1 was filed done, yet the final card still counts 2 attempts."""
    h['cards']['k1']['attempts'] = 2


def j_backoff_out_of_range(h):
    """The first retry schedules k1 3 s later; the backoff of attempt 1 is 1 s."""
    e = h['events'][find_ev(h, 'card_released', marker='w0', epoch=1, retry=True)]
    e['payload']['not_before'] = iso(3.400)


def capacity_at(e):
    return checker.at_seconds(e['at'])


POLICY_CASES = [
    ('h', h_column_over_limit, 'taken from column ready of board default at seq'),
    ('h', h_board_over_max_claims, 'taken from board default at seq'),
    ('i', i_claim_before_created_schedule, 'before its not_before'),
    ('i', i_claim_before_retry_schedule, 'before its not_before'),
    ('i', i_claim_before_patched_schedule, 'before its not_before'),
    ('i', i_final_not_before, 'not_before: log'),
    ('j', j_attempts_payload, 'says attempts 3, the log counts 1'),
    ('j', j_exhausted_not_filed, 'not filed into blocked'),
    ('j', j_exhausted_too_early, 'after 1 attempt(s) of 2'),
    ('j', j_no_reset_on_completion, 'attempts: log 0, card 2'),
    ('j', j_backoff_out_of_range, 'the backoff is 1.000 s'),
]


CASES = [  # (check, the history, refile policy, words of the violation that must be reported)
    ('a', a_epoch_repeats, 'any', 'repeated'),
    ('a', a_epoch_twice_to_clients, 'any', 'handed out twice'),
    ('b', b_zombie_write_accepted, 'any', 'while the holder was w1/3'),
    ('b', b_zombie_write_accepted, 'any', 'after the claim of epoch 3'),
    ('b', b_release_by_non_holder, 'any', 'release of w0/1'),
    ('c', c_two_holders, 'any', 'two holders'),
    ('c', c_reclaim_wrong_holder, 'any', 'reclaimed from w2/1 but the holder was w0/1'),
    ('c', c_renew_after_newer_claim, 'any', 'renew with epoch 1'),
    ('d', d_bot_leaves_done, 'any', "not by an operator's reopen"),
    ('d', d_owner_reopens, 'any', "not by an operator's reopen"),
    ('d', d_bot_refiles, 'operator', 'not by an operator'),
    ('e', e_reclaim_before_lease_end, 'any', 'renewed in time'),
    ('e', e_reclaim_paused_run, 'any', 'was paused_waiting_human'),
    ('e', e_reclaim_live_run, 'any', 'never promoted'),
    ('e', e_reclaim_heartbeating_run, 'any', 'never promoted'),
    ('e', e_promotion_logged_after_reclaim, 'any', 'never promoted'),
    ('e', e_promote_live_lock, 'any', 'renewed its lock'),
    ('e', e_files_against_run, 'any', 'but its run r1 is failed'),
    ('f', f_lost_event, 'any', 'has no event of its own'),
    ('f', f_refused_left_event, 'any', 'match no acknowledged write'),
    ('f', f_duplicate_event, 'any', 'match no acknowledged write'),
    ('f', f_real_time_order, 'any', 'acknowledged before it was sent'),
    ('f', f_order_of_seqs, 'any', 'out of order'),
    ('g', g_final_card, 'any', "state: log 'review', card 'ready'"),
    ('g', g_final_run, 'any', 'the run says running'),
    ('g', g_final_epoch, 'any', 'epoch: log 3, card 7'),
]


def main():
    bad = 0
    v = run(good())
    if v:
        bad += 1
        print('FAIL: the good history has violations:')
        for line in checker.report(v):
            print(line)
    else:
        print('ok   the good history passes every check')
    v = run(good(), refile='operator')
    if v:
        bad += 1
        print('FAIL: the good history has violations under refile=operator')
    for want, mutate, refile, words in CASES:
        h = good()
        mutate(h)
        v = run(h, refile)
        hit = [x for x in v if x['check'] == want and words in x['what']]
        if not hit:
            bad += 1
            print('FAIL: check %s did not report "%s" on %s (%s); reported: %s' %
                  (want, words, mutate.__name__, mutate.__doc__.strip(),
                   ['(%s) %s' % (x['check'], x['what']) for x in v] or 'nothing'))
            continue
        print('ok   check %s fires on %s: %s' % (want, mutate.__name__, hit[0]['what']))
    # The same history is no violation on the Mongo twin; a reclaim with no promotion at all
    # still is.
    extra = 0
    for mutate, want in ((e_promotion_logged_after_reclaim, False), (e_reclaim_live_run, True)):
        h = good()
        mutate(h)
        fired = any(x['check'] == 'e' for x in run(h, cross_doc_order=False))
        extra += 1
        if fired != want:
            bad += 1
            print('FAIL: %s under cross_doc_order=False: check e %s' %
                  (mutate.__name__, 'fired' if fired else 'did not fire'))
        else:
            print('ok   %s under cross_doc_order=False: check e %s' %
                  (mutate.__name__, 'fires' if fired else 'holds (Mongo delivery order)'))
    # The refile case is no violation under DESIGN §4 (terminal -> terminal by anyone).
    h = good()
    d_bot_refiles(h)
    if run(h, 'any'):
        bad += 1
        print('FAIL: a bot\'s terminal -> terminal refiling was judged a violation under '
              'refile=any')
    else:
        print('ok   a bot\'s terminal -> terminal refiling passes under refile=any (DESIGN §4)')
    # DESIGN §17: the good policy history passes, on both twins' orders; each bad one fails.
    for cross in (True, False):
        v = run(good_policy(), boards=BOARDS, cross_doc_order=cross)
        extra += 1
        if v:
            bad += 1
            print('FAIL: the good policy history has violations (cross_doc_order=%s):' % cross)
            for line in checker.report(v):
                print(line)
        else:
            print('ok   the good policy history passes every check (cross_doc_order=%s)' %
                  cross)
    # ...and the a..g history is no violation of h..j (no limit binds, nothing scheduled).
    extra += 1
    if run(good(), boards=BOARDS):
        bad += 1
        print('FAIL: the good history has violations of h..j')
    for want, mutate, words in POLICY_CASES:
        h = good_policy()
        mutate(h)
        v = run(h, boards=BOARDS)
        hit = [x for x in v if x['check'] == want and words in x['what']]
        extra += 1
        if not hit:
            bad += 1
            print('FAIL: check %s did not report "%s" on %s (%s); reported: %s' %
                  (want, words, mutate.__name__, mutate.__doc__.strip(),
                   ['(%s) %s' % (x['check'], x['what']) for x in v] or 'nothing'))
            continue
        print('ok   check %s fires on %s: %s' % (want, mutate.__name__, hit[0]['what']))
    # Check h under the Mongo delivery order: a release that may have committed before the
    # claim it allowed is no violation there; one sent after the claim was answered still is.
    for mutate, cross, want in ((h_release_logged_after_claim, True, True),
                                (h_release_logged_after_claim, False, False),
                                (h_column_over_limit, False, True)):
        h = good_policy()
        mutate(h)
        fired = any(x['check'] == 'h' for x in run(h, boards=BOARDS, cross_doc_order=cross))
        extra += 1
        if fired != want:
            bad += 1
            print('FAIL: %s under cross_doc_order=%s: check h %s' %
                  (mutate.__name__, cross, 'fired' if fired else 'did not fire'))
        else:
            print('ok   %s under cross_doc_order=%s: check h %s' %
                  (mutate.__name__, cross, 'fires' if fired else 'holds (delivery order)'))
    print('%d case(s), %d failed' % (len(CASES) + 3 + extra, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
