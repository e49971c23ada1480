#!/usr/bin/env python3
"""Per boot of one variant and benchmark in a run: kernel instructions per
op, the share of them in the scheduler's and the clock's functions (the
patterns of harness/src/profile/scaling/classify.rs, read from it), and
the instructions per op of any FUNCTION named.

    scheduler_share.py RUN_DIR VARIANT BENCHMARK [FUNCTION ...]
"""
import fnmatch, glob, json, os, re, sys

run, variant, bench = sys.argv[1:4]
named = sys.argv[4:]
here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, '../../../harness/src/profile/scaling/classify.rs')).read()
block = src.split('pub const SCHEDULER_FUNCTIONS')[1].split('];')[0]
pats = re.findall(r'"([^"]+)"', block)

def sched(name):
    name = re.sub(r'\.(isra|constprop|part|cold)\.\d+$', '', name)
    name = re.sub(r'\.(isra|constprop|part|cold)\.\d+', '', name)
    return any(fnmatch.fnmatchcase(name, p) for p in pats)

rows = {}
for l in open(os.path.join(run, 'events.jsonl')):
    e = json.loads(l)
    if e.get('event') == 'profile' and e['variant'] == variant and e['benchmark'] == bench and not e['warmup'] and e.get('ops'):
        f = os.path.join(run, e['path'])
        if not os.path.exists(f):
            continue
        tot = sch = 0
        fn = dict.fromkeys(named, 0)
        for line in open(f, errors='replace'):
            p = line.split()
            if len(p) >= 3 and p[0] == 'f' and not p[1].startswith('['):
                n = int(p[2]); tot += n
                if sched(p[1]): sch += n
                if p[1] in fn: fn[p[1]] += n
        rows.setdefault(e['vcpus'], []).append((tot / e['ops'], sch / e['ops'], {k: round(v / e['ops']) for k, v in fn.items()}))
for v in sorted(rows):
    ks = [round(t) for t, _, _ in rows[v]]; ss = [round(s) for _, s, _ in rows[v]]
    sh = [round(100 * s / t, 1) for t, s, _ in rows[v]]
    print(f"{variant} {bench} {v:4} vCPUs: kernel/op {min(ks)}–{max(ks)}; scheduler/op {min(ss)}–{max(ss)} ({min(sh)}–{max(sh)}%), boots {len(ks)}")
    for k in named:
        vals = [f[k] for _, _, f in rows[v]]
        print(f"    {k}: {min(vals)}–{max(vals)}")
