#!/usr/bin/env python3
"""The README's MCP tool table is `boardd mcp-tools --markdown`, rendered from the table the
server serves (api/mcp_tools.c): the docs cannot drift from tools/list.

usage: readme_tools.py path/to/boardd README.md
"""
import subprocess
import sys

boardd, readme = sys.argv[1], sys.argv[2]
want = subprocess.run([boardd, 'mcp-tools', '--markdown'], capture_output=True, text=True,
                      check=True).stdout
text = open(readme, encoding='utf-8').read()
begin, end = '<!-- mcp-tools:begin -->\n', '<!-- mcp-tools:end -->'
if begin not in text or end not in text:
    print('FAIL: README.md has no mcp-tools section')
    sys.exit(1)
got = text.split(begin, 1)[1].split(end, 1)[0]
if got != want:
    print('FAIL: README.md mcp-tools section differs from `boardd mcp-tools --markdown`:')
    print(want)
    print('0 passed, 1 failed')
    sys.exit(1)
full = subprocess.run([boardd, 'mcp-tools'], capture_output=True, text=True, check=True).stdout
import json  # noqa: E402
tools = json.loads(full)
ok = all(t['name'] in got and t['inputSchema']['type'] == 'object' and t['outputSchema']
         for t in tools) and len(tools) == 8
print('%d passed, %d failed' % (1 + ok, 1 - ok))
sys.exit(0 if ok else 1)
