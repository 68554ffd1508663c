#!/usr/bin/env python3
"""Mutation testing of the engine: puts each mutant of scripts/mutants.txt
into a scratch copy of the committed tree, one at a time, rebuilds
incrementally, runs the test suite and tabulates which mutants the suite
kills. Run through scripts/mutants.sh (docs/testing.md)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Tests that say nothing about the engine's guarantees and take long: the
# installed-package, benchmark, tool and wq_dump checks.
EXCLUDE = "install|bench|tools_|wq_dump|nproc_|exit_clean|check_headers"


def decode(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in "nt\\":
            out.append({"n": "\n", "t": "\t", "\\": "\\"}[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def parse(path):
    mutants, cur = [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("@ "):
            ident, _, why = line[2:].partition(" ")
            cur = {"id": ident, "why": why}
            mutants.append(cur)
        elif cur is not None and line.startswith(("file: ", "find: ", "repl: ", "equivalent: ")):
            key, _, val = line.partition(": ")
            cur[key] = decode(val) if key in ("find", "repl") else val
    for m in mutants:
        for key in ("file", "find", "repl"):
            if key not in m:
                sys.exit(f"mutants: {m['id']}: no '{key}:' line")
    return mutants


def run(cmd, cwd, timeout, log):
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return 124


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scratch", default="/tmp/cmwq-mutants", help="scratch directory (replaced)")
    ap.add_argument("--only", help="regular expression: mutant ids to run")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--test-timeout", type=int, default=60, help="per-test timeout (s)")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    args = ap.parse_args()

    mutants = parse(os.path.join(ROOT, "scripts", "mutants.txt"))
    if args.only:
        mutants = [m for m in mutants if re.search(args.only, m["id"])]
    # Every mutant must still apply to the current source.
    stale = []
    for m in mutants:
        with open(os.path.join(ROOT, m["file"]), encoding="utf-8") as f:
            if f.read().count(m["find"]) != 1:
                stale.append(m["id"])
    if stale:
        sys.exit("mutants: stale (text not found exactly once): " + ", ".join(stale))

    scratch = args.scratch
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    src = os.path.join(scratch, "src")
    subprocess.run(f"git -C {ROOT} archive HEAD | tar -x -C {scratch}", shell=True, check=True)
    build = os.path.join(scratch, "build")
    log = os.path.join(scratch, "mutants.log")
    t0 = time.time()
    if run(["cmake", "-S", scratch, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            "-DCMWQ_BUILD_BENCH=OFF"], scratch, 600, log) or \
       run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, 1800, log):
        sys.exit(f"mutants: the unmutated tree does not build (see {log})")
    ctest = ["ctest", "--test-dir", build, "-j", str(args.jobs), "--timeout", str(args.test_timeout),
             "-E", EXCLUDE]
    if run(ctest, scratch, 1800, log):
        sys.exit(f"mutants: the unmutated tree fails its tests (see {log})")
    print(f"baseline built and passed in {time.time() - t0:.0f} s; {len(mutants)} mutants", flush=True)

    results = []
    for m in mutants:
        path = os.path.join(scratch, m["file"])
        original = open(path, encoding="utf-8").read()
        open(path, "w", encoding="utf-8").write(original.replace(m["find"], m["repl"], 1))
        t = time.time()
        if run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, 900, log):
            verdict = "killed (does not build)"
        else:
            rc = run(ctest + ["--stop-on-failure"], scratch, 1800, log)
            verdict = "killed" if rc else ("equivalent" if "equivalent" in m else "SURVIVED")
        open(path, "w", encoding="utf-8").write(original)
        os.utime(path)
        secs = time.time() - t
        results.append((m, verdict, secs))
        print(f"{m['id']:<24} {verdict:<24} {secs:5.0f} s  {m['why']}", flush=True)
    # Rebuild the unmutated tree so the scratch build is left clean.
    run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, 900, log)

    killed = sum(1 for _, v, _ in results if v.startswith("killed"))
    equivalent = sum(1 for _, v, _ in results if v == "equivalent")
    total = len(results) - equivalent  # an equivalent mutant changes no guarantee
    summary = (f"{killed} of {total} killed ({100.0 * killed / max(total, 1):.0f}%), "
               f"{equivalent} equivalent not counted, in {time.time() - t0:.0f} s")
    print(summary)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write("| mutant | guarantee | result |\n|---|---|---|\n")
            for m, v, _ in results:
                note = f" ({m['equivalent']})" if v == "equivalent" else ""
                f.write(f"| `{m['id']}` | {m['why']} | {v}{note} |\n")
            f.write(f"\n{summary}\n")
    return 0 if killed == total else 1


if __name__ == "__main__":
    sys.exit(main())
