#!/usr/bin/env python3
"""Lists the kernel primitives each public cmwq header defines, and fails
when one is defined although the program brings its own.

cmwq's kernel-style headers may define a kernel primitive (struct list_head,
jiffies, HZ, struct lock_class_key, the cpumask names, container_of, struct
timer_list, ...) only where the program has not: see <cmwq/linux/shims.h>.
For each public header this compiles three translation units with the
preprocessor and reads which names the cmwq headers define (macros from
-dD, structures, typedefs and functions from the expanded text, each by the
file it comes from):

  alone     the header by itself: the names it provides (listed);
  foreign   a program's own shims on the include path (tests/foreign_shims:
            list, jiffies, lockdep, cpumask, kernel.h and its own timers),
            included after the header: cmwq must define none of the names
            those shims define;
  external  CMWQ_KERNEL_SHIMS_EXTERNAL with the program's struct list_head:
            cmwq must define no kernel primitive at all.

  check_kernel_names.py INCLUDE_DIR [GENERATED_INCLUDE_DIR] [--cc CC] [--cxx CXX]
Exit 0 when every header passes, 1 otherwise.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FOREIGN = os.path.join(HERE, '..', 'tests', 'foreign_shims')

# The kernel's names that cmwq's headers may provide for a program without
# its own (and must leave to a program that has them).
KERNEL_NAMES = {
    'list.h': ['list_head'],
    'jiffies.h': ['HZ', 'jiffies', 'msecs_to_jiffies', 'usecs_to_jiffies',
                  'jiffies_to_msecs', 'jiffies_to_usecs'],
    'lockdep.h': ['lock_class_key', 'lockdep_map'],
    'cpumask.h': ['cpumask', 'cpumask_t', 'cpumask_var_t', 'NR_CPUS', 'num_online_cpus',
                  'for_each_cpu', 'for_each_online_cpu', 'for_each_possible_cpu',
                  'cpu_online_mask', 'cpu_possible_mask', 'cpumask_clear', 'cpumask_setall',
                  'cpumask_copy', 'cpumask_set_cpu', 'cpumask_clear_cpu', 'cpumask_test_cpu',
                  'cpumask_empty', 'cpumask_weight', 'cpumask_equal', 'cpumask_and',
                  'cpumask_or', 'cpumask_next', 'cpumask_first'],
    'kernel.h': ['container_of'],
    'timer.h': ['timer_list', 'timer_setup', 'timer_pending', 'mod_timer', 'del_timer_sync',
                'add_timer', 'del_timer', 'timer_delete', 'timer_delete_sync'],
    'sched.h': ['task_struct'],
}
ALL = sorted({n for names in KERNEL_NAMES.values() for n in names})

DEF_RE = re.compile(r'^#define\s+(\w+)')
LINE_RE = re.compile(r'^# \d+ "([^"]+)"')
STRUCT_RE = re.compile(r'\b(?:struct|union)\s+(\w+)\s*\{')
TYPEDEF_RE = re.compile(r'\btypedef\b[^;{}]*?\b(\w+)\s*(?:\[[^\]]*\])?\s*;')
FUNC_RE = re.compile(r'\b(\w+)\s*\([^;{}]*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?[;{]')


def file_scope(text):
    """text with everything inside braces removed (extern "C" blocks kept)."""
    text = text.replace('extern "C" {', ' ')
    out, depth = [], 0
    for ch in text:
        if ch == '{':
            if depth == 0:
                out.append('{')
            depth += 1
        elif ch == '}':
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return ''.join(out)


def defined_names(cmd, src, cmwq_root):
    """{name: file} of what files under cmwq_root define, preprocessing src."""
    out = subprocess.run(cmd + ['-E', '-dD', src], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr.strip())
    cur, names, text = '', {}, {}
    for line in out.stdout.splitlines():
        m = LINE_RE.match(line)
        if m:
            cur = m.group(1)
            continue
        if not os.path.abspath(cur).startswith(cmwq_root):
            continue
        m = DEF_RE.match(line)
        if m:
            names.setdefault(m.group(1), cur)
        elif not line.startswith('#'):
            text.setdefault(cur, []).append(line)
    for f, lines in text.items():
        body = ' '.join(lines)
        for m in STRUCT_RE.finditer(body):
            names.setdefault(m.group(1), f)
        top = file_scope(body)
        for rx in (TYPEDEF_RE, FUNC_RE):
            for m in rx.finditer(top):
                names.setdefault(m.group(1), f)
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('include')
    ap.add_argument('generated', nargs='?')
    ap.add_argument('--cc', default=os.environ.get('CC', 'cc'))
    ap.add_argument('--cxx', default=os.environ.get('CXX', 'c++'))
    a = ap.parse_args()
    inc = os.path.abspath(a.include)
    cmwq_root = os.path.join(inc, 'cmwq')
    incs = ['-I' + inc] + (['-I' + os.path.abspath(a.generated)] if a.generated else [])
    headers = []
    for d, _, files in os.walk(cmwq_root):
        for f in files:
            if f.endswith(('.h', '.hpp')):
                headers.append(os.path.relpath(os.path.join(d, f), inc))
    headers.sort()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        ext_list = os.path.join(tmp, 'program_list.h')
        with open(ext_list, 'w') as f:
            f.write('struct list_head { struct list_head *next, *prev; };\n')
        for h in headers:
            if h == 'cmwq/urcu.h':
                continue  # needs a liburcu flavour first; it defines no kernel name
            cxx = h.endswith('.hpp')
            base = [a.cxx, '-std=c++20', '-x', 'c++'] if cxx else [a.cc, '-std=c11', '-x', 'c']
            tu = os.path.join(tmp, 'tu.c')
            with open(tu, 'w') as f:
                f.write('#include <%s>\n' % h)
            ftu = os.path.join(tmp, 'ftu.c')
            with open(ftu, 'w') as f:
                f.write('#include <%s>\n' % h)
                for k in ('kernel', 'list', 'jiffies', 'lockdep', 'cpumask', 'timer'):
                    f.write('#include <linux/%s.h>\n' % k)
            try:
                alone = defined_names(base + incs, tu, cmwq_root)
                foreign = defined_names(base + incs + ['-I' + os.path.join(FOREIGN, 'own_timer'),
                                                       '-I' + os.path.join(FOREIGN, 'include')],
                                        ftu, cmwq_root)
                external = defined_names(base + incs + ['-DCMWQ_KERNEL_SHIMS_EXTERNAL',
                                                        '-DCMWQ_TIMER_LIST_EXTERNAL',
                                                        '-include', ext_list], tu, cmwq_root)
            except RuntimeError as e:
                print('FAIL %s: does not preprocess: %s' % (h, e))
                failed += 1
                continue
            provided = [n for n in ALL if n in alone]
            bad_foreign = ['%s (%s)' % (n, os.path.relpath(foreign[n], inc)) for n in ALL if n in foreign]
            bad_external = ['%s (%s)' % (n, os.path.relpath(external[n], inc)) for n in ALL if n in external]
            print('%-28s provides: %s' % (h, ' '.join(provided) or '-'))
            if bad_foreign:
                print('FAIL %s: defined although the program has its own: %s' % (h, ', '.join(bad_foreign)))
                failed += 1
            if bad_external:
                print('FAIL %s: defined under CMWQ_KERNEL_SHIMS_EXTERNAL: %s' % (h, ', '.join(bad_external)))
                failed += 1
    print('%d passed, %d failed' % (len(headers) - 1 - failed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
