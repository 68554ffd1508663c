#!/usr/bin/env python3
"""Checks that src/ keeps the floors src/engine.h declares.

engine.h opens with the floor list, bottom up, between the lines
"floors:" and "end of floors.", one floor per line ("//   N  a.cpp, b.cpp
what they hold"), and the calls allowed to go up, one per line
("//   up: caller.cpp -> function  why"). This script finds every function
defined in src/*.cpp (universal-ctags), every call from one file's function
to a function defined in exactly one other file, and fails on a call to a
higher floor that the list does not name, on a named call that no longer
exists, and on a src/*.cpp file the list leaves out.

    python3 scripts/check_floors.py [SRC_DIR]     prints the cross-file
                                                  calls with -v
"""
import collections
import re
import subprocess
import sys
from pathlib import Path

src = Path(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith('-') else
           Path(__file__).resolve().parent.parent / 'src')
verbose = '-v' in sys.argv

header = (src / 'engine.h').read_text().splitlines()
floors, allowed = {}, {}
inside = False
for line in header:
    if re.match(r'^// .*floors:\s*$', line):
        inside = True
        continue
    if inside and 'end of floors.' in line:
        break
    if not inside:
        continue
    m = re.match(r'^//\s+up:\s+(\S+\.cpp)\s+->\s+(\w+)', line)
    if m:
        allowed[(m.group(1), m.group(2))] = False
        continue
    m = re.match(r'^//\s+(\d+)\s+(\S.*?)(\s{2,}|$)', line)
    if m:
        for f in re.split(r',\s*', m.group(2)):
            floors[f.strip()] = int(m.group(1))
if not floors:
    sys.exit('check_floors: no floor list in src/engine.h (between "floors:" and "end of floors.")')

files = sorted(p.name for p in src.glob('*.cpp'))
problems = [f'{f} is on no floor in engine.h' for f in files if f not in floors]
problems += [f'engine.h names {f}, which is not in src/' for f in floors if f not in files]

tags = subprocess.run(['ctags', '--fields=+ne', '--c++-kinds=f', '--language-force=c++', '-o', '-'] +
                      [str(src / f) for f in files], capture_output=True, text=True, check=True).stdout
defined = collections.defaultdict(set)  # name -> files defining it (not file-local)
bodies = collections.defaultdict(list)  # file -> [(name, first, last)]
for t in tags.splitlines():
    parts = t.split('\t')
    name, path = parts[0], Path(parts[1]).name
    fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
    if 'line' not in fields or 'end' not in fields:
        continue
    bodies[path].append((name, int(fields['line']), int(fields['end'])))
    if 'file' not in fields and 'class' not in fields and 'struct' not in fields:
        defined[name].add(path)


def code_only(text):
    """The text with comments, strings and character literals blanked."""
    out = re.sub(r'//[^\n]*|/\*.*?\*/', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', out)


calls = collections.Counter()
for f in files:
    lines = code_only((src / f).read_text()).splitlines()
    for name, first, last in bodies[f]:
        body = '\n'.join(lines[first - 1:last])
        for m in re.finditer(r'(?<![\w.>:])(\w+)\s*\(', body):
            callee = m.group(1)
            where = defined.get(callee)
            if not where or len(where) != 1 or f in where or callee == name:
                continue
            (to,) = where
            if callee == 'ensure_started':  # any public entry point, first
                continue
            calls[(f, name, to, callee)] += 1

for (f, fn, to, callee), n in sorted(calls.items()):
    up = floors.get(to, 0) > floors.get(f, 0)
    if verbose:
        print(f'{f}:{fn} -> {to}:{callee}{"  UP" if up else ""}')
    if not up:
        continue
    if (f, callee) in allowed:
        allowed[(f, callee)] = True
    else:
        problems.append(f'{f}:{fn}() calls {callee}() of {to}, a higher floor '
                        f'({floors[f]} -> {floors[to]}), and engine.h does not name it')
for (f, callee), used in allowed.items():
    if not used:
        problems.append(f'engine.h names "up: {f} -> {callee}", but there is no such upward call')

for p in problems:
    print('check_floors:', p)
if problems:
    sys.exit(1)
print(f'check_floors: {len(files)} files on {len(set(floors.values()))} floors; '
      f'{sum(1 for k in calls if floors[k[2]] > floors[k[0]])} upward calls, each named in engine.h')
