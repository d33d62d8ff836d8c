#!/usr/bin/env python3
"""`boardd token` (server/tokens.c) says what is missing and answers --help (issue 26):

- `boardd token add` without --tokens (the README's old example) names --tokens and what it
  is, exit 2, and writes nothing; so for a missing --name or --role;
- `boardd token --help`, `boardd token add --help` print the usage on stdout, exit 0, and the
  usage says a running boardd takes a new token on SIGHUP;
- an unknown subcommand or option is named;
- a token added says, on stderr, that a running boardd needs SIGHUP.

usage: test_token_cli.py path/to/boardd
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD = os.path.abspath(sys.argv[1])


def first(stderr):
    """The first line boardd token wrote itself (a library may warn before it)."""
    return next((l for l in stderr.splitlines() if l.startswith('boardd token')), '')


def token(*args, cwd=None):
    return subprocess.run([BOARDD, 'token'] + list(args), capture_output=True, text=True,
                          timeout=30, env=bt.clean_env(), cwd=cwd)


def main():
    tmp = tempfile.mkdtemp(prefix='boardd-token-cli-')
    tf = os.path.join(tmp, 'tokens.json')

    r = token('add', '--name', 'ci-bot', '--role', 'bot', '--cap', 'board.read', cwd=tmp)
    line = first(r.stderr)
    check(r.returncode == 2 and 'missing --tokens FILE' in line and 'tokens.json' in line,
          'token add without --tokens says so first: %d %r' % (r.returncode, r.stderr[:300]))
    check(not os.listdir(tmp), 'and writes nothing: %s' % os.listdir(tmp))
    r = token('add', '--tokens', tf)
    line = first(r.stderr)
    check(r.returncode == 2 and '--name NAME' in line and '--role ROLE' in line and
          '--tokens' not in line, 'every missing option is named, only those: %r' % line)
    check(not os.path.exists(tf), 'nothing written')

    for args in (['--help'], ['-h'], ['add', '--help'], ['add', '--name', 'x', '--help']):
        r = token(*args)
        check(r.returncode == 0 and r.stdout.startswith('usage: boardd token add') and
              'SIGHUP' in r.stdout and 'boardd token' not in r.stderr,
              'boardd token %s: the usage on stdout, exit 0: %d %r %r'
              % (' '.join(args), r.returncode, r.stdout[:80], r.stderr[:200]))

    r = token()
    check(r.returncode == 2 and 'usage: boardd token add' in r.stderr, 'token alone: usage, 2')
    r = token('remove', '--name', 'x')
    check(r.returncode == 2 and 'unknown subcommand remove' in r.stderr,
          'an unknown subcommand is named: %r' % r.stderr[:120])
    r = token('add', '--tokens', tf, '--name', 'x', '--role', 'bot', '--colour', 'red')
    check(r.returncode == 2 and 'unknown option --colour' in r.stderr,
          'an unknown option is named: %r' % r.stderr[:120])

    # A token's name is the actor of its changes: never one the server writes itself (the
    # reaper's "reaper:<host>", an agent token's "<holder>/agent").
    for bad in ('reaper:vm', 'ci-bot/agent', 'tab\there', 'x' * 129):
        r = token('add', '--tokens', tf, '--name', bad, '--role', 'operator')
        check(r.returncode == 2 and 'invalid --name' in first(r.stderr) and
              not os.path.exists(tf), '--name %r refused, nothing written: %d %r'
              % (bad[:20], r.returncode, r.stderr[:200]))

    r = token('add', '--tokens', tf, '--name', 'ci-bot', '--role', 'bot')
    check(r.returncode == 0 and re.fullmatch(r'[0-9a-f]{64}\n', r.stdout) and
          'SIGHUP' in r.stderr, 'a token added, SIGHUP named: %d %r' % (r.returncode, r.stderr))

    # A tokens file naming one so is refused whole, saying which entry and why.
    with open(tf) as f:
        doc = json.load(f)
    doc['tokens'].append(dict(doc['tokens'][0], name='reaper:vm'))
    bad_tf = os.path.join(tmp, 'bad-tokens.json')
    with open(bad_tf, 'w') as f:
        json.dump(doc, f)
    r = subprocess.run([BOARDD, '--listen', '127.0.0.1:0', '--store', 'fs:' + tmp + '/data',
                        '--tokens', bad_tf], capture_output=True, text=True, timeout=30,
                       env=bt.clean_env())
    check(r.returncode != 0 and 'tokens[1]: invalid "name"' in r.stderr,
          'boardd refuses a tokens file with a name "reaper:vm": %d %r'
          % (r.returncode, r.stderr[-300:]))
    return bt.summary('boardd token')


if __name__ == '__main__':
    sys.exit(main())
