"""A small parser for the YAML subset openapi.yaml is written in.

Why: /openapi.json is generated from openapi.yaml at build time, and a fresh Debian machine
has python3 (meson needs it) but not necessarily PyYAML. The subset: block mappings, block
sequences, flow sequences/mappings on one line, plain/single/double-quoted scalars, comments.
No anchors, tags, multi-line scalars or multi-document files. When PyYAML is present,
check_routes.py verifies this parser and yaml.safe_load agree on the whole document.
"""
import json
import re

_INT = re.compile(r'^[-+]?[0-9]+$')
_FLOAT = re.compile(r'^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$')


class YamlError(ValueError):
    pass


def _strip_comment(line):
    out, q = [], None
    for i, c in enumerate(line):
        if q:
            if c == q:
                q = None
        elif c in '"\'' and (i == 0 or line[i - 1] in ' [{,:'):
            q = c
        elif c == '#' and (i == 0 or line[i - 1] == ' '):
            break
        out.append(c)
    return ''.join(out).rstrip()


def _scalar(s):
    s = s.strip()
    if s == '' or s in ('~', 'null', 'Null', 'NULL'):
        return None
    if s in ('true', 'True', 'TRUE'):
        return True
    if s in ('false', 'False', 'FALSE'):
        return False
    if s.startswith('"'):
        return json.loads(s)
    if s.startswith("'"):
        if not s.endswith("'") or len(s) < 2:
            raise YamlError('unterminated string: ' + s)
        return s[1:-1].replace("''", "'")
    if s.startswith('[') or s.startswith('{'):
        return _flow(s)
    if _INT.match(s):
        return int(s)
    if _FLOAT.match(s):
        return float(s)
    return s


def _split_flow(body):
    parts, depth, q, cur = [], 0, None, []
    for c in body:
        if q:
            cur.append(c)
            if c == q:
                q = None
            continue
        if c in '"\'':
            q = c
        elif c in '[{':
            depth += 1
        elif c in ']}':
            depth -= 1
        elif c == ',' and depth == 0:
            parts.append(''.join(cur))
            cur = []
            continue
        cur.append(c)
    if ''.join(cur).strip():
        parts.append(''.join(cur))
    return [p.strip() for p in parts]


def _flow(s):
    if s.startswith('[') and s.endswith(']'):
        return [_scalar(p) for p in _split_flow(s[1:-1])]
    if s.startswith('{') and s.endswith('}'):
        out = {}
        for p in _split_flow(s[1:-1]):
            k, v = _key_value(p)
            out[k] = _scalar(v)
        return out
    raise YamlError('bad flow collection: ' + s)


def _key_value(text):
    """Splits 'key: value' at the first ': ' (or a trailing ':') outside quotes."""
    q = None
    for i, c in enumerate(text):
        if q:
            if c == q:
                q = None
        elif c in '"\'' and i == 0:
            q = c
        elif c == ':' and (i + 1 == len(text) or text[i + 1] == ' '):
            return _scalar(text[:i]), text[i + 1:].strip()
    raise YamlError('expected "key: value": ' + text)


def loads(text):
    lines = []
    for raw in text.splitlines():
        if '\t' in raw[:len(raw) - len(raw.lstrip())]:
            raise YamlError('tab indentation')
        line = _strip_comment(raw)
        if line.strip() in ('', '---'):
            continue
        lines.append((len(line) - len(line.lstrip(' ')), line.strip()))
    pos = [0]

    def block(indent):
        if pos[0] >= len(lines):
            return None
        ind, text = lines[pos[0]]
        if ind < indent:
            return None
        if text.startswith('- ') or text == '-':
            return seq(ind)
        return mapping(ind)

    def value_after(text_value, ind):
        if text_value != '':
            return _scalar(text_value)
        if pos[0] < len(lines) and lines[pos[0]][0] > ind:
            return block(lines[pos[0]][0])
        if pos[0] < len(lines) and lines[pos[0]][0] == ind and lines[pos[0]][1].startswith('- '):
            return seq(ind)
        return None

    def mapping(ind):
        out = {}
        while pos[0] < len(lines):
            i, text = lines[pos[0]]
            if i < ind:
                break
            if i > ind:
                raise YamlError('bad indentation at: ' + text)
            if text.startswith('- '):
                break
            k, v = _key_value(text)
            if k in out:
                raise YamlError('duplicate key: %r' % (k,))
            pos[0] += 1
            out[k] = value_after(v, ind)
        return out

    def seq(ind):
        out = []
        while pos[0] < len(lines):
            i, text = lines[pos[0]]
            if i != ind or not (text.startswith('- ') or text == '-'):
                break
            item = text[2:].strip() if text != '-' else ''
            if item == '':
                pos[0] += 1
                out.append(block(ind + 1))
                continue
            try:
                k, v = _key_value(item) if not item[0] in '"\'[{' else (None, None)
            except YamlError:
                k = None
            if k is None:
                pos[0] += 1
                out.append(_scalar(item))
                continue
            # "- key: value" opens a mapping whose keys sit at ind + 2
            lines[pos[0]] = (ind + 2, item)
            out.append(mapping(ind + 2))
        return out

    doc = block(0)
    if pos[0] != len(lines):
        raise YamlError('unparsed content at: ' + lines[pos[0]][1])
    return doc
