#!/usr/bin/env python3
"""Per boot of a run: ready_s, host s per guest s (boot, busy), QEMU CPU s, peak RSS, repetition guest span."""
import json, sys, os, re, glob
run = sys.argv[1]
cpu = [l.split() for l in open(sys.argv[2])] if len(sys.argv) > 2 else []
boots = {}
for l in open(os.path.join(run, 'events.jsonl')):
    e = json.loads(l)
    if e.get('event') == 'boot':
        boots[e['boot_id']] = dict(vcpus=e['vcpus'], ready=e.get('ready_s'), wpg=e.get('wall_per_guest_s'))
    if e.get('event') == 'boot_end' and e.get('boot_id') in boots:
        boots[e['boot_id']]['busy'] = e.get('busy_wall_per_guest_s')
    if e.get('event') == 'profile' and e.get('boot_id') in boots:
        boots[e['boot_id']].setdefault('ops', []).append(e.get('ops'))
for bid, b in boots.items():
    spans = []
    for f in glob.glob(os.path.join(run, 'logs/boots', bid, 'bench-*.log')):
        t = open(f, errors='replace').read()
        u0 = re.search(r'uptime0 ([\d.]+) ', t); u1 = re.search(r'uptime1 ([\d.]+) ', t)
        if u0 and u1: spans.append(round(float(u1.group(1)) - float(u0.group(1)), 2))
    print(f"{bid:32} vcpus {b['vcpus']:4} ready_s {b['ready'] or 0:7.1f} host/guest boot {b['wpg'] or 0:6.1f} busy {b.get('busy') or 0:6.1f} ops {b.get('ops')} rep guest s {spans}")
