#!/usr/bin/env python3
"""boardctl's --help and its man page (docs/man/boardctl.1) say the same:

- the global options of `boardctl --help`'s usage = the man page's SYNOPSIS options;
- each option of `boardctl work --help` is a WORK AND RUN OPTIONS entry, and back, with the
  same "(default X)" when --help states one;
- each verb's usage line (cards ls/show/create/move, reopen, events, attention, runs) names the
  options its OTHER VERBS entry names, no more, no fewer.

usage: check_boardctl.py path/to/boardctl path/to/boardctl.1
"""
import re
import subprocess
import sys

BOARDCTL, MAN = sys.argv[1], sys.argv[2]
failed = 0


def fail(msg):
    global failed
    failed += 1
    print('FAIL:', msg)


def help_of(*verb):
    r = subprocess.run([BOARDCTL, *verb, '--help'], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        fail('boardctl %s --help exited %d' % (' '.join(verb), r.returncode))
    return r.stdout


def flags(text):
    return set(re.findall(r'--([a-z][a-z-]*)', text))


def usage_lines(text, verb):
    """The usage lines of `verb` (with their continuation lines) in a --help text."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r'^(?:usage:|      ) boardctl ((?:cards )?[a-z]+)\b(.*)$', line)
        if m:
            cur = m.group(1)
            out[cur] = out.get(cur, '') + m.group(2)
        elif cur and line.startswith('      ') and line.strip().startswith('['):
            out[cur] += line
        else:
            cur = None
    return out.get(verb, '')


def main():
    man = open(MAN, encoding='utf-8').read().replace('\\-', '-')
    sections = dict(re.findall(r'^\.SH (.+)\n((?:(?!^\.SH ).*\n)*)', man, re.M))

    top_help = help_of()
    top = flags(top_help[:top_help.index('\n\n')] if '\n\n' in top_help else '') - {'help'}
    # `boardctl --version` is a line of its own in both
    if 'version' in top and not re.search(r'^\.B boardctl --version$',
                                          sections.get('SYNOPSIS', ''), re.M):
        fail('--help has boardctl --version; the man SYNOPSIS does not')
    top.discard('version')
    # the SYNOPSIS also shows work's --board/--card; the globals are those before "verb"
    syn_globals = flags(sections.get('SYNOPSIS', '').split('.I verb')[0])
    if top != syn_globals:
        fail('global options: --help %s, the man SYNOPSIS %s' % (sorted(top),
                                                                 sorted(syn_globals)))

    work = help_of('work')
    opts = sections.get('WORK AND RUN OPTIONS', '')
    entries = {m.group(1): m.group(2) for m in re.finditer(
        r'^\.BI --([a-z-]+)(?: .*)?\n((?:(?!^\.TP).*\n)*)', opts, re.M)}
    hopts = {}
    for line in work.splitlines():
        m = re.match(r'^  --([a-z-]+)\b.*?(?:\(default ([^)]*)\))?\s*$', line)
        if m:
            hopts[m.group(1)] = m.group(2)
    hopts.pop('help', None)
    for f, d in sorted(hopts.items()):
        if f not in entries:
            fail('work --help has --%s; the man page has no entry for it' % f)
        elif d and 'default ' + d not in ' '.join(entries[f].split()):
            fail('--%s: --help says default %s; the man page says: %s'
                 % (f, d, ' '.join(entries[f].split())))
    for f in sorted(set(entries) - set(hopts)):
        fail('the man page has --%s; work --help does not' % f)

    other = sections.get('OTHER VERBS', '')
    cards = help_of('cards')
    for verb, text in (('cards ls', cards), ('cards show', cards), ('cards create', cards),
                       ('cards move', cards), ('reopen', help_of('reopen')),
                       ('events', help_of('events')), ('attention', help_of('attention')),
                       ('runs', help_of('runs'))):
        m = re.search(r'^\.B %s\b(.*)$' % re.escape(verb), other, re.M)
        if not m:
            fail('the man page has no OTHER VERBS entry for %s' % verb)
            continue
        h, mf = flags(usage_lines(text, verb)), flags(m.group(1))
        if not usage_lines(text, verb):
            fail('boardctl %s --help has no usage line' % verb)
        elif h != mf:
            fail('%s: --help names %s, the man page %s' % (verb, sorted(h), sorted(mf)))
    print('%d global options, %d work/run options, 8 verbs compared; %d failed'
          % (len(top), len(hopts), failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
