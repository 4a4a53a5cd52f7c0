#!/usr/bin/env python3
"""Compares two benchmark runs of one machine (before/after a change): for each of rma, coll
and decomp, the ratio new/old of every record's time_us, records matched by bench, op, impl,
size and layout; medians and deciles for symcomm's own implementations and for the baselines
(NCCL, raw copies) of the same runs, and the five symcomm records that slowed most.

    bench/compare_runs.py OLD_DIR NEW_DIR   (each holding rma.jsonl, coll.jsonl, decomp.jsonl,
                                             or <bench>_<commit>.jsonl with --old/--new tags)
"""
import argparse
import json
import os
import statistics

KEYS = ['bench', 'op', 'impl', 'bytes', 'dtype', 'grid', 'shape', 'layout', 'buffers', 'launch',
        'batches', 'n']


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def key(record):
    return tuple((k, json.dumps(record.get(k))) for k in KEYS if k in record)


def spread(values):
    if not values:
        return 'n/a'
    values = sorted(values)
    return (f'n={len(values)} median {statistics.median(values):.3f} '
            f'p10 {values[len(values) // 10]:.3f} p90 {values[9 * len(values) // 10]:.3f}')


def compare(old_path, new_path, name):
    old = {key(r): r for r in load(old_path)}
    new = {key(r): r for r in load(new_path)}
    ours, baselines, worst = [], [], []
    for k, a in old.items():
        b = new.get(k)
        if not b or not a.get('time_us') or not b.get('time_us'):
            continue
        ratio = b['time_us'] / a['time_us']
        if a['impl'].startswith('symcomm'):
            ours.append(ratio)
            worst.append((ratio, a, b))
        else:
            baselines.append(ratio)
    lines = [f'{name}: new/old time, symcomm {spread(ours)}; baselines {spread(baselines)}']
    for ratio, a, b in sorted(worst, key=lambda w: -w[0])[:5]:
        what = ' '.join(f'{k}={a[k]}' for k in KEYS if k in a and k != 'bench')
        lines.append(f'   slowest: {ratio:.2f} {what}: old {a["time_us"]:.1f} us, '
                     f'new {b["time_us"]:.1f} us')
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('old')
    p.add_argument('new')
    p.add_argument('--old-tag', default='', help='files are <bench>_<tag>.jsonl in OLD')
    p.add_argument('--new-tag', default='', help='files are <bench>_<tag>.jsonl in NEW')
    a = p.parse_args()
    for bench in ['rma', 'coll', 'decomp']:
        name_old = f'{bench}_{a.old_tag}.jsonl' if a.old_tag else f'{bench}.jsonl'
        name_new = f'{bench}_{a.new_tag}.jsonl' if a.new_tag else f'{bench}.jsonl'
        old, new = os.path.join(a.old, name_old), os.path.join(a.new, name_new)
        if os.path.exists(old) and os.path.exists(new):
            print('\n'.join(compare(old, new, bench)))


if __name__ == '__main__':
    main()
