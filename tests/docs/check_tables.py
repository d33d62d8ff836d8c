#!/usr/bin/env python3
"""The docs' renderings of the code's tables say what the code says:

- docs/design.md's decision table = core/decide.c's stuck_table: the same rows, in the same
  precedence order, with the same action and reason;
- docs/http.md's error table = api/errors.c's table (with core/core.h's codes): every code
  with its status, no code missing, none invented;
- every route docs/http.md's route table names is in api/router.c's route table (a route
  the guide does not name yet is listed as a note, not a failure: other work adds routes);
- every event type docs/http.md names is one core/core.h knows (a type it does not name yet
  is a note);
- every metric family docs/operations.md's table names is in metrics/metrics.h with that type
  (a family it does not name yet is a note).

usage: check_tables.py REPO_ROOT
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402

ROOT = sys.argv[1]
failed = 0


def read(*p):
    return open(os.path.join(ROOT, *p), encoding='utf-8').read()


def fail(msg):
    global failed
    failed += 1
    print('FAIL:', msg)


def md_section(text, heading):
    m = re.search(r'^#+ %s\n(.*?)(?=^#+ |\Z)' % re.escape(heading), text, re.M | re.S)
    if not m:
        fail('no section "%s"' % heading)
        return ''
    return m.group(1)


def md_rows(section):
    rows = []
    for line in section.splitlines():
        if not line.startswith('|') or re.match(r'^\|[-| ]+\|$', line):
            continue
        cells = [c.strip().replace('\\|', '|') for c in re.split(r'(?<!\\)\|', line)[1:-1]]
        rows.append([c[1:-1] if c.startswith('`') and c.endswith('`') else c for c in cells])
    return rows[1:]  # the header


def decision_table():
    src = read('core', 'decide.c')
    body = src[src.index('stuck_table[] = {'):]
    body = body[:body.index('};')]
    code = [(n, a.lower(), '' if r == 'NULL' else r.strip('"')) for n, a, r in re.findall(
        r'\{"([a-z_]+)", p_\w+, CORE_STUCK_([A-Z_]+), (NULL|"[a-z_]+"), (?:true|false)\}', body)]
    doc = [(r[0], r[2], r[3]) for r in md_rows(md_section(read('docs', 'design.md'),
                                                          'The decision table'))]
    if not code:
        fail('core/decide.c: no stuck_table rows found')
    if doc != code:
        fail('docs/design.md decision table != core/decide.c stuck_table:\n  doc:  %s\n  code: %s'
             % (doc, code))
    return len(code)


def error_table():
    codes = dict(re.findall(r'X\((CORE_[A-Z_]+), "([a-z_]+)"\)', read('core', 'core.h')))
    statuses = {codes[e]: int(s) for e, s in re.findall(r'X\((CORE_[A-Z_]+), (\d{3}),',
                                                        read('api', 'errors.c'))
                if e in codes and e != 'CORE_OK'}
    doc = {r[0]: int(r[1]) for r in md_rows(md_section(read('docs', 'http.md'), 'Errors'))
           if len(r) >= 2 and r[1].isdigit()}
    for c, s in statuses.items():
        if c not in doc:
            fail('docs/http.md: the error code %s (%d) is not in the error table' % (c, s))
        elif doc[c] != s:
            fail('docs/http.md: %s is %d in the guide, %d in api/errors.c' % (c, doc[c], s))
    for c in doc:
        if c not in statuses:
            fail('docs/http.md: the error code %s is not in api/errors.c' % c)
    return len(statuses)


def routes():
    code = set(re.findall(r'X\("([A-Z]+)", "([^"]+)"', read('api', 'router.c')))
    doc = set()
    for r in md_rows(md_section(read('docs', 'http.md'), 'Routes')):
        for m in re.finditer(r'(GET|POST|PUT|PATCH|DELETE) (/[^\s`,]*)', r[0]):
            doc.add((m.group(1), m.group(2)))
    for m, p in sorted(doc - code):
        fail('docs/http.md names %s %s, which api/router.c does not route' % (m, p))
    for m, p in sorted(code - doc):
        print('note: %s %s is routed but not in docs/http.md yet' % (m, p))
    return len(doc)


def event_types():
    known = set(re.findall(r'X\(CORE_EV_[A-Z_]+, "([a-z_]+)"\)', read('core', 'core.h')))
    sec = md_section(read('docs', 'http.md'), 'Events')
    m = re.search(r'Types: (.*?)\. `machine', sec, re.S)
    named = set(re.findall(r'`([a-z_]+)`', m.group(1))) if m else set()
    if not named:
        fail('docs/http.md: no "Types: ..." list in Events')
    for t in sorted(named - known):
        if t not in ('from', 'to', 'reopened', 'marker', 'epoch', 'reclaimed_from', 'true'):
            fail('docs/http.md names the event type %s, which core/core.h does not know' % t)
    for t in sorted(known - named):
        print('note: the event type %s is not listed in docs/http.md yet' % t)
    return len(named)


def metric_families():
    path = os.path.join(ROOT, 'metrics', 'metrics.h')
    if not os.path.exists(path):
        return 0
    code = {n: t for n, (t, _) in bt.metrics_table(path).items()}
    doc = {}
    for r in md_rows(md_section(read('docs', 'operations.md'), 'Metrics and alerts')):
        names = [x.strip().strip('`') for x in r[0].split(',')]
        for n in names:
            doc[n] = r[1] if len(r) > 1 else ''
    for n, t in sorted(doc.items()):
        if n not in code:
            fail('docs/operations.md names the metric %s, which metrics/metrics.h does not define'
                 % n)
        elif t and t != code[n]:
            fail('docs/operations.md: %s is a %s, metrics/metrics.h says %s' % (n, t, code[n]))
    for n in sorted(set(code) - set(doc)):
        print('note: the metric %s is not in docs/operations.md yet' % n)
    return len(doc)


def main():
    n = decision_table(), error_table(), routes(), event_types(), metric_families()
    print('%d decision rows, %d error codes, %d routes, %d event words, %d metric families '
          'compared; %d failed' % (n + (failed,)))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
