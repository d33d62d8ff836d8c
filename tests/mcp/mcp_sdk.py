#!/usr/bin/env python3
"""boardd's POST /mcp driven by the official MCP Python SDK (PyPI `mcp`, pinned in
tests/requirements.txt) over its Streamable HTTP client transport, against a real boardd:
the 2026-07-28 stateless era the SDK picks by default (server/discover probe), the
initialize handshake (mode="legacy", 2025-11-25), every tool of the table, refusals as
isError tool results with the §8 code, capabilities narrowing tools/list, and an agent token
that dies with its worker's claim.

usage: mcp_sdk.py path/to/boardd
"""
import asyncio
import json
import os
import sys
import tempfile

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD = sys.argv[1]
ALL_TOOLS = ['list_cards', 'get_card', 'create_card', 'move_card', 'close_card', 'set_labels',
             'adjust_labels', 'add_comment']


class Rest:
    def __init__(self, port):
        self.port = port

    def call(self, method, path, token, body=None, headers=None):
        return bt.request(self.port, method, path, token, body, headers)[:2]


def client(port, token, mode='auto'):
    http = httpx2.AsyncClient(headers={'Authorization': 'Bearer ' + token},
                              timeout=httpx2.Timeout(30.0))
    return Client(streamable_http_client('http://127.0.0.1:%d/mcp' % port, http_client=http),
                  mode=mode)


def sc(res):
    return res.structured_content or {}


async def modern_era(port, rest, bot, op):
    async with client(port, bot) as c:
        check(c.protocol_version == '2026-07-28',
              'auto mode negotiates 2026-07-28, got %s' % c.protocol_version)
        tools = await c.list_tools()
        check([t.name for t in tools.tools] == ALL_TOOLS, 'tools/list: %s' % tools.tools)
        check(all(t.input_schema.get('type') == 'object' and t.output_schema for t in tools.tools),
              'every tool has inputSchema and outputSchema')

        res = await c.call_tool('create_card', {'title': 'mcp card', 'labels': ['x'],
                                                'state': 'backlog', 'priority': 5})
        check(not res.is_error and sc(res).get('state') == 'backlog' and
              sc(res).get('priority') == 5, 'create_card: %s' % res)
        cid = sc(res).get('id')
        check(res.content and json.loads(res.content[0].text).get('id') == cid,
              'the text rendering is the structured content')

        res = await c.call_tool('get_card', {'id': cid})
        check(not res.is_error and sc(res).get('title') == 'mcp card', 'get_card')
        res = await c.call_tool('list_cards', {'state': 'backlog', 'limit': 10})
        check(not res.is_error and cid in [x['id'] for x in sc(res).get('cards', [])],
              'list_cards: %s' % res)

        await c.call_tool('create_card', {'title': 'second', 'state': 'backlog'})
        page = await c.call_tool('list_cards', {'state': 'backlog', 'limit': 1})
        nxt = sc(page).get('next')
        page2 = await c.call_tool('list_cards', {'state': 'backlog', 'limit': 1, 'after': nxt})
        check(nxt and len(sc(page)['cards']) == 1 and len(sc(page2)['cards']) == 1 and
              sc(page)['cards'][0]['id'] != sc(page2)['cards'][0]['id'],
              'list_cards pages with next/after: %s %s' % (page, page2))
        res = await c.call_tool('move_card', {'id': cid, 'to': 'ready'})
        check(not res.is_error and sc(res).get('state') == 'ready', 'move_card without from')
        res = await c.call_tool('move_card', {'id': cid, 'from': 'backlog', 'to': 'review'})
        check(res.is_error and sc(res).get('code') == 'state_conflict' and
              sc(res).get('status') == 409, 'move_card with a stale from: %s' % res)
        res = await c.call_tool('move_card', {'id': cid, 'from': 'ready', 'to': 'review'})
        check(not res.is_error and sc(res).get('state') == 'review', 'move_card with from')

        res = await c.call_tool('adjust_labels', {'id': cid, 'add': ['y'], 'remove': ['x']})
        check(not res.is_error and sc(res).get('labels') == ['y'], 'adjust_labels: %s' % res)
        res = await c.call_tool('set_labels', {'id': cid, 'labels': ['a', 'b']})
        check(not res.is_error and sc(res).get('labels') == ['a', 'b'], 'set_labels')
        res = await c.call_tool('add_comment', {'id': cid, 'body': 'hello'})
        check(not res.is_error and sc(res)['comments'][-1]['body'] == 'hello' and
              sc(res)['comments'][-1]['author'] == 't-bot', 'add_comment: %s' % res)

        res = await c.call_tool('close_card', {'id': cid, 'to': 'in_progress'})
        check(res.is_error and sc(res).get('code') == 'transition_rejected',
              'close_card into a working column is refused: %s' % res)
        res = await c.call_tool('close_card', {'id': cid})
        check(not res.is_error and sc(res).get('state') == 'done', 'close_card: %s' % res)

        # No way back out of a terminal column through any tool: no fallback.
        for args in ({'id': cid, 'to': 'ready'}, {'id': cid, 'from': 'done', 'to': 'ready'}):
            res = await c.call_tool('move_card', args)
            check(res.is_error and sc(res).get('code') == 'terminal_state_exit' and
                  sc(res).get('status') == 422 and sc(res).get('detail'),
                  'move_card out of done: %s' % res)
        # A refusal says what was wrong as the REST route does (DESIGN §11, §13), never just
        # its title.
        st, prob = rest.call('PATCH', '/v1/cards/%s/state' % cid, bot, {'from': 'done',
                                                                         'to': 'ready'})
        check(st == 422 and sc(res).get('detail') == prob.get('detail') and
              sc(res).get('detail') != 'Terminal State Exit',
              'move_card out of done says why, as REST does: %s / %s' % (res, prob))
        res = await c.call_tool('move_card', {'id': cid, 'to': 'no_such_column'})
        check(res.is_error and sc(res).get('code') == 'transition_rejected' and
              'no_such_column' in sc(res).get('detail', ''),
              'move_card into an unknown column names it: %s' % res)
        for args, name in (({'title': 't', 'board': 'no-such-board'}, 'no-such-board'),
                           ({'title': 't', 'state': 'no_such_column'}, 'no_such_column'),
                           ({'title': 't', 'blockers': ['no-such-card']}, 'no-such-card')):
            res = await c.call_tool('create_card', args)
            check(res.is_error and name in sc(res).get('detail', ''),
                  'create_card names what was wrong (%s): %s' % (name, res))
        for i in range(2):  # the server holds --max-comments 3: hello, then two more
            await c.call_tool('add_comment', {'id': cid, 'body': 'more %d' % i})
        res = await c.call_tool('add_comment', {'id': cid, 'body': 'one too many'})
        check(res.is_error and sc(res).get('code') == 'payload_too_large' and
              'comments' in sc(res).get('detail', ''),
              'add_comment past --max-comments says so: %s' % res)
        # Terminal -> terminal is the operator's refiling (ADR-096 §5): a bot's close_card
        # or move_card is refused as REST refuses it, with the same detail.
        st, prob = rest.call('PATCH', '/v1/cards/%s/state' % cid, bot, {'from': 'done',
                                                                         'to': 'blocked'})
        for tool, args in (('close_card', {'id': cid, 'to': 'blocked'}),
                           ('move_card', {'id': cid, 'from': 'done', 'to': 'blocked'})):
            res = await c.call_tool(tool, args)
            check(res.is_error and sc(res).get('code') == 'terminal_state_exit' and
                  st == 422 and prob.get('code') == 'terminal_state_exit' and
                  sc(res).get('detail') == prob.get('detail') and
                  'blocked' in sc(res).get('detail', ''),
                  'a bot\'s %s refiling is refused as REST does: %s / %s' % (tool, res, prob))
        res = await c.call_tool('close_card', {'id': cid, 'to': 'done'})
        check(not res.is_error and sc(res).get('state') == 'done',
              'close_card into the column the card is in: %s' % res)
        res = await c.call_tool('get_card', {'id': 'no-such-card'})
        check(res.is_error and sc(res).get('code') == 'not_found', 'get_card of nothing')
        res = await c.call_tool('create_card', {'title': 't', 'colour': 'red'})
        check(res.is_error and sc(res).get('code') == 'bad_request' and
              'colour' in sc(res).get('detail', ''), 'an unknown argument is named')
        # null only where the inputSchema's type lists it, as REST: a move_card with from:
        # null is refused, not a move without the compare it asked for
        for name, args in (('move_card', {'id': cid, 'to': 'blocked', 'from': None}),
                           ('create_card', {'title': 't', 'board': None}),
                           ('create_card', {'title': 't', 'priority': None}),
                           ('adjust_labels', {'id': cid, 'add': None}),
                           ('list_cards', {'limit': None})):
            res = await c.call_tool(name, args)
            arg = [k for k, v in args.items() if v is None][0]
            check(res.is_error and sc(res).get('code') == 'bad_request' and
                  'null' in sc(res).get('detail', '') and arg in sc(res).get('detail', ''),
                  '%s with %s: null is refused: %s' % (name, arg, res))
        res = await c.call_tool('create_card', {'title': 't-null-nb', 'not_before': None})
        check(not res.is_error and sc(res).get('not_before') is None,
              'not_before: null is taken (its type lists null): %s' % res)

        st, card = rest.call('GET', '/v1/cards/' + cid, op)
        check(st == 200 and card['state'] == 'done', 'REST sees what the tools did')
        st, ev = rest.call('GET', '/v1/events?limit=1000', op)
        mine = [e for e in ev['events'] if e['card_id'] == cid]
        check(mine and all(e['actor'] == 't-bot' for e in mine),
              'every tool event records the token as actor: %s' % [e['actor'] for e in mine])
        st, card = rest.call('PATCH', '/v1/cards/%s/state' % cid, op, {'from': 'done',
                                                                        'to': 'blocked'})
        check(st == 200 and card['state'] == 'blocked', 'the operator refiles: %s' % card)
        try:
            await c.call_tool('no_such_tool', {})
            check(False, 'an unknown tool is a JSON-RPC error')
        except MCPError as e:
            check(e.code == -32602, 'unknown tool: -32602, got %s' % e.code)
    return cid


async def legacy_era(port, bot, cid):
    async with client(port, bot, mode='legacy') as c:
        check(c.protocol_version == '2025-11-25',
              'legacy mode negotiates 2025-11-25, got %s' % c.protocol_version)
        tools = await c.list_tools()
        check(len(tools.tools) == len(ALL_TOOLS), 'legacy tools/list')
        res = await c.call_tool('get_card', {'id': cid})
        check(not res.is_error and sc(res).get('id') == cid, 'legacy get_card')
        res = await c.call_tool('move_card', {'id': cid, 'to': 'ready'})
        check(res.is_error and sc(res).get('code') == 'terminal_state_exit', 'legacy refusal')
        await c.session.send_ping()


async def narrow_caps(port, reader):
    async with client(port, reader) as c:
        tools = await c.list_tools()
        check([t.name for t in tools.tools] == ['list_cards', 'get_card'],
              'a board.read token lists only the read tools: %s' % [t.name for t in tools.tools])
        try:
            await c.call_tool('create_card', {'title': 'nope'})
            check(False, 'calling a tool not granted is a JSON-RPC error')
        except MCPError as e:
            check(e.code == -32602 and 'board.create' in e.error.message,
                  'not granted: %s %s' % (e.code, e.error.message))


async def agent_tokens(port, rest, worker, op):
    st, card = rest.call('POST', '/v1/cards', op, {'title': 'agent work', 'state': 'ready'})
    cid = card['id']
    st, claim = rest.call('POST', '/v1/cards/%s/claim' % cid, worker, {'marker': 'w-1'})
    check(st == 200, 'claim: %s' % claim)
    ifm = {'If-Match': '"%d"' % claim['epoch']}
    st, minted = rest.call('POST', '/v1/cards/%s/agent-tokens' % cid, worker,
                           {'marker': 'w-1', 'caps': ['board.label', 'board.comment']}, ifm)
    check(st == 201 and minted.get('token') and minted.get('expires_at'), 'mint: %s %s' % (st, minted))
    agent = minted['token']
    async with client(port, agent) as c:
        tools = await c.list_tools()
        check([t.name for t in tools.tools] == ['set_labels', 'adjust_labels', 'add_comment'],
              'agent tools/list: %s' % [t.name for t in tools.tools])
        res = await c.call_tool('adjust_labels', {'id': cid, 'add': ['agent-was-here']})
        check(not res.is_error and 'agent-was-here' in sc(res).get('labels', []),
              'agent adjust_labels: %s' % res)
    st, ev = rest.call('GET', '/v1/events?limit=1000', op)
    lab = [e for e in ev['events'] if e['card_id'] == cid and e['type'] == 'card_labels_changed']
    check(lab and lab[-1]['actor'] == 't-worker/agent' and
          lab[-1]['payload'].get('actor_epoch') == claim['epoch'],
          'agent events record <worker>/agent and the claim epoch: %s' % lab)
    st, _ = rest.call('POST', '/v1/cards/%s/release' % cid, worker,
                      {'marker': 'w-1', 'epoch': claim['epoch']})
    check(st == 200, 'release')
    try:
        async with client(port, agent) as c:
            await c.list_tools()
        check(False, 'an agent token after its claim was released is refused')
    except Exception as e:  # noqa: BLE001 - the SDK surfaces the 401 as its own error
        check('401' in repr(e) or 'Unauthorized' in repr(e) or isinstance(e, (MCPError,
              httpx2.HTTPStatusError, ExceptionGroup)),
              'refused after release: %r' % e)
    st, body = rest.call('GET', '/v1/cards/' + cid, agent)
    check(st == 401, 'REST with the released agent token: %s %s' % (st, body))


async def main():
    with tempfile.TemporaryDirectory() as tmp:
        tokens = tmp + '/tokens.json'
        bot = bt.token_add(BOARDD, tokens, 't-bot', ['bot'])
        op = bt.token_add(BOARDD, tokens, 't-op', ['operator'])
        worker = bt.token_add(BOARDD, tokens, 't-worker', ['worker'])
        reader = bt.token_add(BOARDD, tokens, 't-reader', ['bot'], caps=['board.read'])
        srv = bt.Server(BOARDD, tmp + '/data', tokens, tmp, threads=2,
                        extra=['--log-format', 'json', '--max-comments', '3']).started(timeout=10)
        port = srv.port
        try:
            rest = Rest(port)
            cid = await modern_era(port, rest, bot, op)
            await legacy_era(port, bot, cid)
            await narrow_caps(port, reader)
            await agent_tokens(port, rest, worker, op)
        finally:
            srv.stop(timeout=10)
    return bt.summary()


sys.exit(asyncio.run(main()))
