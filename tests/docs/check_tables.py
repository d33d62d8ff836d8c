#!/usr/bin/env python3
"""The docs' renderings of the code's tables say what the code says:

- docs/design.md's decision table = core/decide.c's stuck_table: the same rows, in the same
  precedence order, with the same action and reason;
- docs/http.md's error table = api/errors.c's table (with core/core.h's codes): every code
  with its status, no code missing, none invented; and every "409 claim_conflict" the prose
  of README.md, docs/ and the man pages writes pairs the code with its status;
- docs/http.md's route table = api/router.c's route table: the same routes, each with the
  same roles, the body fields and query parameters the router accepts, and success statuses
  openapi/openapi.yaml lists for it (a new route is one row in the guide);
- openapi/openapi.yaml's request body fields and query parameters = api/router.c's;
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


ROLE_BITS = {'W': 'worker', 'B': 'bot', 'O': 'operator'}


def route_table():
    """{(method, path): (roles, body fields or None, query parameters)} of api/router.c's
    API_ROUTES: roles a set of role names, {'any'} or {'none'} (public)."""
    src = read('api', 'router.c')
    body = src[src.index('#define API_ROUTES(X)'):]
    body = body[:body.index('\n\n')].replace('\\\n', ' ')
    rows = {}
    for m in re.finditer(r'X\("([A-Z]+)",\s*"([^"]+)",\s*\w+,\s*([^,]+),\s*([^,]+),\s*'
                         r'(NULL|"[^"]*"),\s*(NULL|"[^"]*")\)', body):
        method, path, roles, flags, fields, query = m.groups()
        if 'PUB' in flags:
            rs = {'none'}
        elif roles.strip() == 'ANY':
            rs = {'any'}
        else:
            rs = {ROLE_BITS[r.strip()] for r in roles.split('|')}
        f = None if fields == 'NULL' else {x.lstrip('?') for x in fields.strip('"').split()}
        q = set() if query == 'NULL' else set(query.strip('"').split())
        rows[(method, path)] = (rs, f, q)
    return rows


def openapi_statuses():
    """{(METHOD, path): {status codes}} of openapi/openapi.yaml."""
    sys.path.insert(0, os.path.join(ROOT, 'openapi'))
    import yamlsub  # noqa: E402
    doc = yamlsub.loads(read('openapi', 'openapi.yaml'))
    out = {}
    for path, item in (doc.get('paths') or {}).items():
        for method, op in item.items():
            if isinstance(op, dict) and 'responses' in op:
                out[(method.upper(), path)] = {str(k) for k in op['responses']}
    return out


def openapi_fields():
    """openapi.yaml's request bodies and query parameters = api/router.c's: each route's
    body schema (its $refs and allOf/oneOf/anyOf followed) has exactly the fields the route
    accepts, and its query parameters are exactly the route's (the router refuses the rest
    with 400, so a field only the contract lists would be refused, one only the router knows
    is undocumented)."""
    sys.path.insert(0, os.path.join(ROOT, 'openapi'))
    import yamlsub  # noqa: E402
    doc = yamlsub.loads(read('openapi', 'openapi.yaml'))

    def res(o):
        while isinstance(o, dict) and '$ref' in o:
            _, _, kind, name = o['$ref'].split('/')
            o = doc['components'][kind][name]
        return o

    def props(o):
        o = res(o)
        p = set((o.get('properties') or {}).keys())
        for k in ('allOf', 'oneOf', 'anyOf'):
            for sub in o.get(k) or []:
                p |= props(sub)
        return p

    n = 0
    for (m, p), (_, fields, query) in sorted(route_table().items()):
        op = (doc.get('paths') or {}).get(p, {}).get(m.lower())
        if not isinstance(op, dict):
            continue  # openapi/check_routes.py reports a missing route
        n += 1
        rb = op.get('requestBody')
        if fields is not None:
            sch = ((rb or {}).get('content') or {}).get('application/json', {}).get('schema')
            if sch is None:
                fail('openapi.yaml: %s %s has no JSON request body; the route takes %s'
                     % (m, p, sorted(fields)))
            elif props(sch) != fields:
                fail('openapi.yaml: %s %s body fields %s, api/router.c accepts %s'
                     % (m, p, sorted(props(sch)), sorted(fields)))
        qp = {res(x).get('name') for x in op.get('parameters') or [] if res(x).get('in') ==
              'query'}
        if qp != query:
            fail('openapi.yaml: %s %s query parameters %s, api/router.c accepts %s'
                 % (m, p, sorted(qp), sorted(query)))
    return n


def top_level_fields(what):
    """The field names of the {...} bodies a route's description shows (a row may show two:
    `{body}`; a worker: `{marker, body}`), nested objects' keys left out, `name?` as name;
    None when it shows no body."""
    depth, top, seen = 0, '', False
    for ch in what:
        if ch == '{':
            depth += 1
            seen = True
            if depth == 1:
                top += ','
                continue
        elif ch == '}':
            depth -= 1
            continue
        if depth == 1:
            top += ch
    if not seen:
        return None
    return set(re.findall(r'(?:^|,)\s*([a-z_]+)\??(?=\s*(?::|,|$))', top))


def routes():
    """The guide's route table against api/router.c: every route named both ways, the roles
    the guide gives it (all its rows together) = the table's, the body fields it shows =
    the fields the table accepts, the query parameters it names (`name`, `name?`,
    `name=...`) = the table's; and every status of its success column is one openapi.yaml
    lists for that route."""
    code = route_table()
    spec = openapi_statuses()
    doc = {}
    for r in md_rows(md_section(read('docs', 'http.md'), 'Routes')):
        if len(r) < 4:
            continue
        names = re.findall(r'(GET|POST|PUT|PATCH|DELETE) (/[^\s`,]*)', r[0])
        for m in names:
            d = doc.setdefault(m, {'roles': set(), 'fields': None, 'query': set(),
                                   'status': set(), 'rows': 0})
            d['rows'] += 1
            role = r[1].lower()
            d['roles'] |= ({'none'} if role == 'none' else {'any'} if role == 'any' else
                           set(re.findall(r'worker|bot|operator', role)))
            what = r[2].split(':')[0] if m[0] in ('GET', 'DELETE') else r[2]
            if m[0] in ('GET', 'DELETE'):
                d['query'] |= set(re.findall(r'`([a-z_]+)\??(?:=[^`]*)?`', r[2]))
            else:
                f = top_level_fields(what)
                if f is not None:
                    d['fields'] = (d['fields'] or set()) | f
            # one row naming two routes (list and one): statuses apply to both loosely
            if len(names) == 1:
                d['status'] |= set(re.findall(r'\b([1-5]\d\d)\b', r[3]))
    for m, p in sorted(set(doc) - set(code)):
        fail('docs/http.md names %s %s, which api/router.c does not route' % (m, p))
    for m, p in sorted(set(code) - set(doc)):
        fail('%s %s is routed (api/router.c) but not in docs/http.md\'s route table' % (m, p))
    for key in sorted(set(doc) & set(code)):
        d, (roles, fields, query) = doc[key], code[key]
        name = '%s %s' % key
        want = {'worker', 'bot', 'operator'} if roles == {'any'} else roles
        got = {'worker', 'bot', 'operator'} if d['roles'] == {'any'} else d['roles']
        if want != got:
            fail('docs/http.md: %s is for %s, api/router.c says %s'
                 % (name, sorted(got), sorted(want)))
        if d['fields'] is not None and fields is not None and d['fields'] != fields:
            fail('docs/http.md: %s shows the body fields %s, api/router.c accepts %s '
                 '(missing from the guide: %s; unknown to the route: %s)'
                 % (name, sorted(d['fields']), sorted(fields), sorted(fields - d['fields']),
                    sorted(d['fields'] - fields)))
        if key[0] in ('GET', 'DELETE') and d['query'] - query:
            fail('docs/http.md: %s names the query parameters %s, which api/router.c '
                 'refuses' % (name, sorted(d['query'] - query)))
        if key[0] in ('GET', 'DELETE') and query - d['query']:
            fail('docs/http.md: %s does not name the query parameters %s that api/router.c '
                 'accepts' % (name, sorted(query - d['query'])))
        if key in spec:
            for st in sorted(d['status'] - spec[key]):
                fail('docs/http.md: %s answers %s, which openapi.yaml does not list for it '
                     '(it lists %s)' % (name, st, sorted(spec[key])))
        else:
            fail('openapi.yaml has no responses for %s' % name)
    return len(doc)


def error_mentions():
    """Every "status code" pair the prose of README.md, docs/*.md and the man pages writes
    (`409 claim_conflict`, 409 `run_final`, 409 \\fBrun_final\\fR, across a line break) gives
    the code the status api/errors.c answers it with."""
    codes = dict(re.findall(r'X\((CORE_[A-Z_]+), "([a-z_]+)"\)', read('core', 'core.h')))
    statuses = {codes[e]: int(s) for e, s in re.findall(r'X\((CORE_[A-Z_]+), (\d{3}),',
                                                        read('api', 'errors.c'))
                if e in codes and e != 'CORE_OK'}
    files = ['README.md'] + ['docs/' + n for n in sorted(os.listdir(os.path.join(ROOT, 'docs')))
                             if n.endswith('.md')]
    files += ['docs/man/' + n for n in sorted(os.listdir(os.path.join(ROOT, 'docs', 'man')))]
    n = 0
    for f in files:
        text = read(*f.split('/')).replace('\\fB', '').replace('\\fR', '').replace('\\-', '-')
        text = re.sub(r'\n\.B[RI]? ', ' ', text)
        for m in re.finditer(r'\b([1-5]\d\d)`?\s+`?([a-z][a-z_]+)\b', text):
            st, code = int(m.group(1)), m.group(2)
            if code not in statuses:
                continue
            n += 1
            if statuses[code] != st:
                line = text.count('\n', 0, m.start()) + 1
                fail('%s:%d: says %d %s; api/errors.c answers %s with %d'
                     % (f, line, st, code, code, statuses[code]))
    return n


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
    n = (decision_table(), error_table(), error_mentions(), routes(), openapi_fields(),
         event_types(), metric_families())
    print('%d decision rows, %d error codes, %d status+code mentions, %d routes, %d openapi '
          'operations\' bodies and queries, %d event words, %d metric families compared; '
          '%d failed' % (n + (failed,)))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
