#!/usr/bin/env python3
"""Checks that src/ keeps the floors and the seam src/engine/engine.h declares.

engine.h opens with the floor list, bottom up, between the lines
"floors:" and "end of floors.", one floor per line ("//   N  a.cpp, b.cpp
what they hold"), and the calls allowed to go up, one per line
("//   up: caller.cpp -> function  why"). This script finds every function
defined in src/**/*.cpp (universal-ctags; files are named without their
wing, so a name must be unique across src/), every call from one file's function
to a function defined in exactly one other file, and fails on a call to a
higher floor that the list does not name, on a named call that no longer
exists, and on a src/**/*.cpp file the list leaves out.

The seam: engine.h's declarations sit under "// ---- file.cpp ----"
banners, in floor order, one banner per file of the list. Every function
declared under a banner must be defined in that file, and a declaration
whose comment says "Context: L" must carry REQUIRES (and one with
REQUIRES(...lock) must say L): the comment and the compiler's annotation
tell one story.

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

engine_h = src / 'engine' / 'engine.h'
header = engine_h.read_text().splitlines()
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
    sys.exit('check_floors: no floor list in src/engine/engine.h (between "floors:" and "end of floors.")')

paths = {}  # file name -> path (the wing is not part of the name)
for p in sorted(src.rglob('*.cpp')):
    if p.name in paths:
        sys.exit(f'check_floors: two files named {p.name}: {paths[p.name]} and {p}')
    paths[p.name] = p
files = sorted(paths)
problems = [f'{f} is on no floor in engine.h' for f in files if f not in floors]
problems += [f'engine.h names {f}, which is not in src/' for f in floors if f not in files]

tags = subprocess.run(['ctags', '--fields=+ne', '--c++-kinds=f', '--language-force=c++', '-o', '-'] +
                      [str(paths[f]) for f in files], capture_output=True, text=True, check=True).stdout
defined = collections.defaultdict(set)  # name -> files defining it (not file-local)
bodies = collections.defaultdict(list)  # file -> [(name, first, last)]
for t in tags.splitlines():
    parts = t.split('\t')
    name, path = parts[0], Path(parts[1]).name
    fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
    if 'line' not in fields or 'end' not in fields:
        continue
    bodies[path].append((name, int(fields['line']), int(fields['end'])))
    member = fields.get('class', 'cmwq::detail') != 'cmwq::detail' or 'struct' in fields
    if 'file' not in fields and not member:  # cmwq::detail::f() is ctags' class cmwq::detail
        defined[name].add(path)


def code_only(text):
    """The text with comments, strings and character literals blanked."""
    out = re.sub(r'//[^\n]*|/\*.*?\*/', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text, flags=re.S)
    return re.sub(r'"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\'', '""', out)


calls = collections.Counter()
for f in files:
    lines = code_only(paths[f].read_text()).splitlines()
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
    up = floors.get(to, 0) > floors.get(f, 0)  # a file on no floor is reported above
    if verbose:
        print(f'{f}:{fn} -> {to}:{callee}{"  UP" if up else ""}')
    if not up:
        continue
    if (f, callee) in allowed:
        allowed[(f, callee)] = True
    else:
        problems.append(f'{f}:{fn}() calls {callee}() of {to}, a higher floor '
                        f'({floors.get(f)} -> {floors.get(to)}), and engine.h does not name it')
for (f, callee), used in allowed.items():
    if not used:
        problems.append(f'engine.h names "up: {f} -> {callee}", but there is no such upward call')

# The seam: banners in floor order, each declaration under its file's.
banner_re = re.compile(r'^// ---- (\S+\.cpp) -+$')
sections = []  # (file, first line, last line)
for i, line in enumerate(header, 1):
    m = banner_re.match(line)
    if m:
        if sections:
            sections[-1][2] = i - 1
        sections.append([m.group(1), i, len(header)])
order = [sec[0] for sec in sections]
problems += [f'engine.h has no banner for {f}' for f in files if f not in order]
problems += [f'engine.h has two banners for {f}' for f in set(order) if order.count(f) > 1]
for a, b in zip(order, order[1:]):
    if floors.get(a, 0) > floors.get(b, 0):
        problems.append(f'engine.h: the banner of {b} (floor {floors.get(b)}) comes after {a} '
                        f'(floor {floors.get(a)}): sections go bottom up')
protos = subprocess.run(['ctags', '--fields=+ne', '--c++-kinds=p', '--language-force=c++', '-o', '-',
                         str(engine_h)], capture_output=True, text=True, check=True).stdout
declared = 0
for t in protos.splitlines():
    parts = t.split('\t')
    name = parts[0]
    fields = dict(p.split(':', 1) for p in parts[3:] if ':' in p)
    if 'line' not in fields or 'class' in fields or 'struct' in fields:
        continue
    line = int(fields['line'])
    sec = next((sec for sec in sections if sec[1] <= line <= sec[2]), None)
    if not sec:
        continue
    declared += 1
    where = defined.get(name, set())
    if where and sec[0] not in where:
        problems.append(f'engine.h:{line}: {name} sits under the {sec[0]} banner but is defined in '
                        f'{", ".join(sorted(where))}')
    # The nearest "Context:" line above, within the declaration's comment,
    # read to the declaration.
    k = line - 1
    decl = ' '.join(header[line - 1:int(fields.get('end', line))])
    context = None
    # Declarations grouped under one comment share its Context line.
    while k >= 1 and header[k - 1].strip() and not banner_re.match(header[k - 1]):
        if header[k - 1].startswith('// Context: '):
            context = ' '.join(h[3:] for h in header[k - 1:line - 1] if h.startswith('//'))
            context = context[len('Context: '):]
            break
        k -= 1
    if context is None:
        continue
    need = set()
    for r in re.findall(r'REQUIRES\(([^)]*)\)', decl):
        for arg in r.split(','):
            arg = arg.strip()
            if arg.endswith('pool->lock'):
                need.add('L')
            elif arg.endswith('nna->lock'):
                need.add('N')
            elif arg.endswith('->mutex'):
                need.add('W')
            elif arg.endswith('pool_mutex'):
                need.add('G')
    said = set(re.findall(r'\b([LNWG])\b', context))
    first = context.split('.')[0]
    for letter in sorted(need - said):
        problems.append(f'engine.h:{line}: {name} REQUIRES its {letter} lock but says "Context: {first}"')
    if need and re.match(r'(no lock|any)\b', context):
        problems.append(f'engine.h:{line}: {name} REQUIRES a lock but says "Context: {first}"')
    if re.match(r'L\b', context) and 'L' not in need:
        problems.append(f'engine.h:{line}: {name} says "Context: {first}" but has no REQUIRES of a pool lock')

for p in problems:
    print('check_floors:', p)
if problems:
    sys.exit(1)
print(f'check_floors: {len(files)} files on {len(set(floors.values()))} floors; '
      f'{sum(1 for k in calls if floors.get(k[2], 0) > floors.get(k[0], 0))} upward calls, each named in engine.h; '
      f'{declared} declarations, each under its file and with its context')
