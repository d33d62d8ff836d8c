#!/usr/bin/env python3
"""The Grafana dashboard (deploy/grafana/boardd.json) against the one metrics table
(metrics/metrics.h): valid JSON, every panel's query names metric families that exist (a
histogram through its _bucket/_sum/_count series), groups only by labels those families
have, and every family of the table is on some panel.

usage: test_dashboard.py deploy/grafana/boardd.json metrics/metrics.h
"""
import json
import re
import sys

DASH, TABLE = sys.argv[1], sys.argv[2]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print('FAIL ' + what)


def table():
    """{name: (type, {labels})} of METRICS_TABLE."""
    text = open(TABLE).read().replace('\\\n', ' ')  # joined continuation lines
    rows = re.findall(r'X\(METRICS_\w+,\s*METRICS_(COUNTER|GAUGE|HISTOGRAM),\s*"(\w+)",'
                      r'\s*"([^"]*)"', text)
    out = {}
    for kind, name, labels in rows:
        labs = {x for x in labels.split(',') if x}
        out[name] = (kind.lower(), labs)
    return out


def family_of(series, fams):
    """The table family a series name belongs to, or None."""
    if series in fams and fams[series][0] != 'histogram':
        return series
    for suffix in ('_bucket', '_sum', '_count'):
        base = series[:-len(suffix)]
        if series.endswith(suffix) and base in fams and fams[base][0] == 'histogram':
            return base
    return None


def panels(d):
    for p in d.get('panels', []):
        yield p
        yield from panels(p)


def main():
    fams = table()
    check(len(fams) > 20, 'the table was read (%d families)' % len(fams))
    try:
        d = json.load(open(DASH))
    except ValueError as e:
        check(False, 'valid JSON: %s' % e)
        return
    check(isinstance(d.get('title'), str) and d.get('uid'), 'a title and a uid')
    used = set()
    ids = set()
    for p in panels(d):
        check(p.get('id') not in ids, 'panel ids are unique (%s)' % p.get('id'))
        ids.add(p.get('id'))
        if p.get('type') == 'row':
            continue
        targets = p.get('targets') or []
        check(targets, 'panel %r has a query' % p.get('title'))
        for t in targets:
            expr = t.get('expr', '')
            names = re.findall(r'\b((?:boardd|process)_[a-zA-Z0-9_]+)\b', expr)
            check(names, 'panel %r: %r names a metric' % (p.get('title'), expr))
            labels = set()
            for n in names:
                f = family_of(n, fams)
                check(f is not None, 'panel %r: %s is not a metric of the table' %
                      (p.get('title'), n))
                if f:
                    used.add(f)
                    labels |= fams[f][1] | ({'le'} if n.endswith('_bucket') else set())
            # Grouping and matchers may use the family's labels and the scrape's own.
            labels |= {'job', 'instance'}
            for grp in re.findall(r'\b(?:by|without)\s*\(([^)]*)\)', expr):
                for lab in (x.strip() for x in grp.split(',') if x.strip()):
                    check(lab in labels, 'panel %r: groups by %r, not a label of %s' %
                          (p.get('title'), lab, names))
            for lab in re.findall(r'[{,]\s*([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)', expr):
                check(lab in labels, 'panel %r: matches on %r, not a label of %s' %
                      (p.get('title'), lab, names))
    for f in sorted(fams):
        check(f in used, 'family %s is on no panel' % f)


if __name__ == '__main__':
    main()
    print('dashboard: %s' % ('FAIL' if failed else 'ok'))
    sys.exit(1 if failed else 0)
