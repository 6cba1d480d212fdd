#!/usr/bin/env python3
"""The attention kernel's synchronization under random interleavings: deadlocks, refills too early.

A model of what the units of one thread block of sage2_attention_kernel (kernels/attention/
sage2_attention_kernel.cuh, the overlapped schedule) wait for and signal, run as Python generators
that a random scheduler interleaves:
  - the ring of K/V stages: block i lands in stage i mod S ("full"); a stage is refilled with block
    i + S once every unit reading block i released it ("empty": 4 arrivals a unit, one per warp; the
    refiller arrives for the units that do not read block i);
  - a unit, per KV block i >= 1: waits for block i, takes its turn, issues Q K^T of block i and P V of
    block i - 1, passes the turn, runs the softmax, refills block i - 2's stage if it is its turn
    (block i mod units, or the block's last unit for a unit that does not read block i + S), waits
    for P V and releases block i - 1;
  - ping-pong (two units): turn t of warpgroup w waits at barrier w, which the other warpgroup's
    arrival after its issue opens; the turns both units have are taken, unit 0 first.
Checked on random blocks (1-3 units, 3-5 stages, causal and not, 1-12 KV blocks): every run ends, no
stage is refilled while a unit reads it, no turn arrival is left over. The model must also find the
faults it is meant to find (2 stages: a deadlock; warpgroup 1 passing its last turn: an arrival left
over), or the check fails. Exit 0 when all hold.
"""
import random
import sys

RELEASES_PER_UNIT = 4  # each warp's lane 0 releases a stage


def run_block(kv_counts, stages, ping_pong, seed, skip_last_pass=True, max_steps=200_000):
    """'ok', or what went wrong, for one block whose units read kv_counts[u] KV blocks."""
    rng = random.Random(seed)
    units = len(kv_counts)
    block_kv = max(kv_counts)
    last_unit = max(u for u in range(units) if kv_counts[u] > 0)
    loaded = set(range(min(stages, block_kv)))  # asked for at the block's entry
    empty_arrivals = [0] * stages
    reading = set()  # (unit, KV block) of stages in use
    common = min(kv_counts) + 1 if ping_pong and units == 2 and min(kv_counts) > 0 else 0
    pending = [0, 0]  # arrivals waiting at turn barrier w
    fault = []

    def unit_program(w):
        kv = kv_counts[w]
        if kv == 0:
            return

        def take_turn(t):
            if t < common:
                while pending[w] == 0:
                    yield
                pending[w] -= 1

        def pass_turn(t):
            if t < common and not (skip_last_pass and w == 1 and t == common - 1):
                pending[1 - w] += 1

        def wait_full(i):
            while i not in loaded:
                yield
            reading.add((w, i))

        def release(i):
            reading.discard((w, i))
            empty_arrivals[i % stages] += RELEASES_PER_UNIT

        def refill(i):
            after = i + stages
            if i < 0 or after >= block_kv:
                return
            turn = i % units
            if w != (turn if kv_counts[turn] > after else last_unit):
                return
            readers = sum(k > i for k in kv_counts)
            stage = i % stages
            empty_arrivals[stage] += (units - readers) * RELEASES_PER_UNIT
            while empty_arrivals[stage] < (i // stages + 1) * units * RELEASES_PER_UNIT:
                yield
            if any(block == i for (_, block) in reading):
                fault.append(f"stage {stage} refilled while block {i} is read")
            loaded.add(after)

        if w == 1 and common > 0:
            pending[0] += 1
        yield from wait_full(0)
        yield from take_turn(0)
        pass_turn(0)
        yield
        for i in range(1, kv):
            yield from wait_full(i)
            yield from take_turn(i)
            pass_turn(i)
            yield  # the softmax
            yield from refill(i - 2)
            release(i - 1)
        yield from take_turn(kv)
        pass_turn(kv)
        release(kv - 1)

    programs = {w: unit_program(w) for w in range(units)}
    steps = 0
    while programs:
        w = rng.choice(sorted(programs))
        try:
            next(programs[w])
        except StopIteration:
            del programs[w]
        steps += 1
        if fault:
            return fault[0]
        if steps > max_steps:
            return "deadlock"
    return "ok" if pending == [0, 0] else f"turn arrivals left over: {pending}"


def random_block(rng):
    """(KV blocks per unit, stages) of a random thread block; causal: later units read more."""
    units, stages, blocks = rng.choice([1, 2, 3]), rng.choice([3, 4, 5]), rng.randint(1, 12)
    if rng.random() < 0.5:
        first = rng.randint(1, blocks)
        counts = [min(blocks, first + u // 2) for u in range(units)]
    else:
        counts = [blocks] * units
    if units > 1 and rng.random() < 0.2:
        counts[-1] = 0  # the block's last unit is past the head's last
    return counts, stages


def main():
    failures = 0
    cases = 3000
    for seed in range(cases):
        counts, stages = random_block(random.Random(seed))
        for ping_pong in (False, True):
            result = run_block(counts, stages, ping_pong, seed)
            if result != "ok":
                failures += 1
                print(f"units' KV blocks {counts}, {stages} stages, ping-pong {ping_pong}: {result}")
    faults = {"2 stages (refill two blocks behind needs 3)": run_block([5, 5], 2, True, 1),
              "warpgroup 1 passes its last turn": run_block([5, 5], 4, True, 1, skip_last_pass=False)}
    for what, result in faults.items():
        found = result != "ok"
        print(f"fault '{what}': {'found (' + result + ')' if found else 'NOT found'}")
        failures += not found
    print(f"{2 * cases} random blocks: {'all ok' if failures == 0 else str(failures) + ' failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
